// `tern plot` on two runs written in the real format (the records' own
// writer and the launch summary's), drawn by /usr/bin/python3 and Debian's
// matplotlib: every chart is a PNG, and the errors name what is wrong.
#include "tern/plot_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "common/records/step_record.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tern/run_summary.h"

namespace tern {
namespace {

using ::testing::HasSubstr;

constexpr int kSteps = 60;

std::string MakeDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string pattern =
      absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name, "_XXXXXX");
  EXPECT_NE(::mkdtemp(pattern.data()), nullptr);
  return pattern;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Worker `worker`'s records of a run whose codec sends `push_bytes` a step;
// worker 0 evaluates every 20 steps and at the end.
void WriteWorker(const std::string& dir, uint32_t worker, uint64_t push_bytes) {
  std::ofstream out(absl::StrCat(dir, "/worker-", worker, ".jsonl"));
  for (int step = 0; step < kSteps; ++step) {
    records::StepRecord r;
    r.worker = worker;
    r.step = step;
    r.loss = 2.3 * std::exp(-step / 30.0) + 0.01 * worker;
    r.push_bytes = push_bytes;
    r.pull_bytes = 2 * push_bytes;
    r.push_msg_bytes = push_bytes + 40;
    r.pull_msg_bytes = 2 * push_bytes + 40;
    r.fp32_bytes = 13'098'536;
    r.compute_s = 0.2;
    r.encode_s = 0.01 * (push_bytes < 1'000'000);
    r.network_s = 0.1 + 0.001 * step;
    r.decode_s = 0.02;
    r.wall_s = 0.35 * (step + 1);
    const bool last = step == kSteps - 1;
    if (worker == 0 && (step % 20 == 0 || last)) {
      r.test_accuracy = 0.5 + 0.4 * step / kSteps;
      r.test_loss = 1.0;
    }
    r.final = last;
    out << records::StepRecordLine(r) << "\n";
  }
}

// summary.json as `tern launch` writes it (tern/launch_report.cc adds the
// codec to SummaryDocument).
void WriteSummary(const std::string& dir, const std::string& codec,
                  const RunReport& report) {
  LaunchOutcome outcome;
  outcome.out_dir = dir;
  outcome.workers = 2;
  nlohmann::ordered_json document =
      SummaryDocument(outcome, TrainingSummary(), report);
  document["codec"] = codec;
  std::ofstream(dir + "/summary.json") << document.dump(2) << "\n";
}

class PlotCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // matplotlib's font cache, where the test may write.
    ::setenv("MPLCONFIGDIR", MakeDir("mpl").c_str(), 1);
    root_ = MakeDir("plot");
    fp32_ = root_ + "/fp32";
    weightgrad_ = root_ + "/wg";
    ::mkdir(fp32_.c_str(), 0755);
    ::mkdir(weightgrad_.c_str(), 0755);
    for (uint32_t worker : {0u, 1u}) {
      WriteWorker(fp32_, worker, 13'098'536);
      WriteWorker(weightgrad_, worker, 818'668);
    }
    RunReport plain;
    plain.target_accuracy = 0.7;
    WriteSummary(fp32_, "fp32", plain);
    RunReport geo = plain;
    geo.time_to_target_s = 14.0;
    geo.geo_mode = "weightgrad";
    geo.datacenters = 2;
    geo.workers_per_dc = 1;
    geo.wan_bytes_up = 3.0e7;
    geo.wan_bytes_down = 2.5e7;
    WriteSummary(weightgrad_, "terngrad", geo);
  }

  std::string root_, fp32_, weightgrad_;
};

TEST_F(PlotCommandTest, DrawsEveryChartOfTwoRuns) {
  PlotOptions options;
  options.run_dirs = {fp32_, weightgrad_};
  options.out_dir = root_ + "/charts";
  testing::internal::CaptureStdout();
  const int code = RunPlot(options);
  const std::string out = testing::internal::GetCapturedStdout();
  ASSERT_EQ(code, 0) << out;
  for (const char* name : {"loss_step", "loss_time", "accuracy_step",
                           "accuracy_time", "bytes_step", "time_split",
                           "wan_bytes", "time_to_target", "overview"}) {
    const std::string path = absl::StrCat(options.out_dir, "/", name, ".png");
    const std::string png = ReadFile(path);
    EXPECT_EQ(png.substr(0, 8), "\x89PNG\r\n\x1a\n") << path;
    EXPECT_GT(png.size(), 10'000u) << path;
    EXPECT_THAT(out, HasSubstr(": " + path + "\n"));
  }
  EXPECT_THAT(out, HasSubstr("[1/9] loss against step"));
  EXPECT_THAT(out, HasSubstr("9 chart(s) of 2 run(s)"));
}

TEST(PlotFlagsTest, LabelsAreOneWordAndRunDirsMayFollow) {
  CLI::App app("tern plot");
  PlotOptions options;
  AddPlotFlags(&app, &options);
  app.parse(std::vector<std::string>{"b", "a", "fp32,terngrad", "--labels"});
  EXPECT_EQ(options.labels, (std::vector<std::string>{"fp32", "terngrad"}));
  EXPECT_EQ(options.run_dirs, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(options.python, "/usr/bin/python3");
}

TEST_F(PlotCommandTest, OneRunGoesToItsPlotsFolder) {
  PlotOptions options;
  options.run_dirs = {fp32_};
  EXPECT_EQ(PlotOutDir(options), fp32_ + "/plots");
  options.run_dirs = {fp32_ + "/", weightgrad_};
  EXPECT_EQ(PlotOutDir(options), root_ + "/plots");
}

TEST_F(PlotCommandTest, AnEmptyDirectoryIsAnErrorNamingIt) {
  const std::string empty = MakeDir("empty");
  PlotOptions options;
  options.run_dirs = {fp32_, empty};
  testing::internal::CaptureStderr();
  const int code = RunPlot(options);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 1);
  EXPECT_THAT(err, HasSubstr(absl::StrCat("tern plot: error: ", empty,
                                          " holds no step records")));
}

TEST_F(PlotCommandTest, MissingMatplotlibSaysHowToInstallIt) {
  // Python without its site packages: no Debian matplotlib.
  const std::string python = MakeDir("bin") + "/python3";
  std::ofstream(python) << "#!/bin/sh\nexec /usr/bin/python3 -S \"$@\"\n";
  ::chmod(python.c_str(), 0755);
  PlotOptions options;
  options.run_dirs = {fp32_};
  options.python = python;
  testing::internal::CaptureStderr();
  EXPECT_EQ(RunPlot(options), 1);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("matplotlib is missing"));
  EXPECT_THAT(err, HasSubstr("deploy/install-deps.sh"));

  options.python = "/nonexistent/python3";
  testing::internal::CaptureStderr();
  EXPECT_EQ(RunPlot(options), 1);
  EXPECT_THAT(testing::internal::GetCapturedStderr(),
              HasSubstr("no Python at /nonexistent/python3"));
}

}  // namespace
}  // namespace tern
