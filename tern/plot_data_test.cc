#include "tern/plot_data.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/records/step_record.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A fresh folder under the test's temporary directory.
std::string MakeDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string pattern =
      absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/plot_data_XXXXXX");
  EXPECT_NE(::mkdtemp(pattern.data()), nullptr);
  return pattern;
}

records::StepRecord Record(uint32_t worker, uint64_t step, double loss) {
  records::StepRecord r;
  r.worker = worker;
  r.step = step;
  r.loss = loss;
  r.push_bytes = 100 * (worker + 1);
  r.pull_bytes = 200;
  r.fp32_bytes = 1600;
  r.compute_s = 0.5 + worker;
  r.network_s = 0.25;
  r.wall_s = step + 0.5 * worker;
  return r;
}

void WriteLines(const std::string& path,
                const std::vector<std::string>& lines) {
  std::ofstream out(path);
  for (const std::string& line : lines) out << line << "\n";
}

TEST(LoadRunTest, MeansOverWorkersAndTheReferenceWorkersClock) {
  const std::string dir = MakeDir();
  records::StepRecord evaluated = Record(0, 1, 1.0);
  evaluated.test_accuracy = 0.75;
  WriteLines(dir + "/worker-0.jsonl",
             {records::StepRecordLine(Record(0, 0, 2.0)),
              records::StepRecordLine(evaluated)});
  WriteLines(dir + "/worker-1.jsonl",
             {records::StepRecordLine(Record(1, 0, 4.0)),
              "{\"worker\": 1, \"step\"",  // killed mid-line
              records::StepRecordLine(Record(1, 1, 3.0))});

  absl::StatusOr<RunSeries> run = LoadRun(dir);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->workers, 2u);
  EXPECT_EQ(run->reference_worker, 0u);
  EXPECT_EQ(run->bad_lines, 1);
  EXPECT_THAT(run->step, ElementsAre(0, 1));
  EXPECT_THAT(run->loss, ElementsAre(3.0, 2.0));
  EXPECT_THAT(run->push_bytes, ElementsAre(150, 150));
  EXPECT_THAT(run->compute_s, ElementsAre(1.0, 1.0));
  EXPECT_THAT(run->wall_s, ElementsAre(0.0, 1.0));  // worker 0's
  EXPECT_EQ(run->fp32_bytes, 1600);
  EXPECT_THAT(run->eval_step, ElementsAre(1));
  EXPECT_THAT(run->test_accuracy, ElementsAre(0.75));
  EXPECT_EQ(run->codec, "");  // no summary.json yet: a run still going
}

TEST(LoadRunTest, AResumedWorkersRepeatedStepCountsOnceTheLastOne) {
  const std::string dir = MakeDir();
  WriteLines(dir + "/worker-3.jsonl",
             {records::StepRecordLine(Record(3, 0, 2.0)),
              records::StepRecordLine(Record(3, 1, 9.0)),
              records::StepRecordLine(Record(3, 1, 1.0))});
  absl::StatusOr<RunSeries> run = LoadRun(dir);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->reference_worker, 3u);  // no worker 0: the lowest id
  EXPECT_THAT(run->loss, ElementsAre(2.0, 1.0));
}

TEST(LoadRunTest, ReadsTheSummary) {
  const std::string dir = MakeDir();
  WriteLines(dir + "/worker-0.jsonl",
             {records::StepRecordLine(Record(0, 0, 2.0))});
  WriteLines(dir + "/summary.json",
             {R"({"codec": "fp32", "target_accuracy": 0.8,
                  "time_to_target_s": 12.5,
                  "geo": {"mode": "weightgrad", "wan_bytes_up": 10,
                          "wan_bytes_down": null}})"});
  absl::StatusOr<RunSeries> run = LoadRun(dir);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->codec, "fp32");
  EXPECT_EQ(run->geo_mode, "weightgrad");
  EXPECT_EQ(run->target_accuracy, 0.8);
  EXPECT_EQ(run->time_to_target_s, 12.5);
  EXPECT_EQ(run->wan_bytes_up, 10);
  EXPECT_FALSE(run->wan_bytes_down.has_value());
}

TEST(LoadRunTest, ErrorsNameTheFolderOrFile) {
  const std::string dir = MakeDir();
  absl::StatusOr<RunSeries> run = LoadRun(dir + "/nope");
  EXPECT_EQ(run.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(run.status().message(), HasSubstr(dir + "/nope"));

  run = LoadRun(dir);  // empty
  EXPECT_EQ(run.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(run.status().message(),
              HasSubstr(absl::StrCat(dir, " holds no step records")));

  WriteLines(dir + "/worker-0.jsonl", {"not json"});
  run = LoadRun(dir);
  EXPECT_EQ(run.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(run.status().message(), HasSubstr("none with a record"));

  WriteLines(dir + "/worker-0.jsonl",
             {records::StepRecordLine(Record(0, 0, 2.0))});
  WriteLines(dir + "/summary.json", {"{truncated"});
  run = LoadRun(dir);
  EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(run.status().message(), HasSubstr(dir + "/summary.json"));
}

TEST(LabelRunsTest, ModeThenCodecThenFolderAndCollisionsByFolder) {
  std::vector<RunSeries> runs(4);
  runs[0].dir = "runs/geo/wg";
  runs[0].geo_mode = "weightgrad";
  runs[0].codec = "terngrad";
  runs[1].dir = "runs/x/dropping";
  runs[1].codec = "dropping";
  runs[2].dir = "runs/x/dropping-2bit/";
  runs[2].codec = "dropping";
  runs[3].dir = "runs/old";
  ASSERT_TRUE(LabelRuns({}, &runs).ok());
  EXPECT_EQ(runs[0].label, "weightgrad");
  EXPECT_EQ(runs[1].label, "dropping (dropping)");
  EXPECT_EQ(runs[2].label, "dropping (dropping-2bit)");
  EXPECT_EQ(runs[3].label, "old");

  ASSERT_TRUE(LabelRuns({"a", "b", "c", "d"}, &runs).ok());
  EXPECT_EQ(runs[2].label, "c");
  EXPECT_EQ(LabelRuns({"a"}, &runs).code(), absl::StatusCode::kInvalidArgument);
}

TEST(PlotInputTest, NonFiniteNumbersAreNull) {
  std::vector<RunSeries> runs(1);
  runs[0].step = {0};
  runs[0].loss = {std::nan("")};
  runs[0].wall_s = {1.5};
  const nlohmann::json input = PlotInput(runs, "out");
  EXPECT_EQ(input["out_dir"], "out");
  EXPECT_TRUE(input["runs"][0]["loss"][0].is_null());
  EXPECT_EQ(input["runs"][0]["wall_s"][0], 1.5);
  EXPECT_TRUE(input["runs"][0]["time_to_target_s"].is_null());
}

}  // namespace
}  // namespace tern
