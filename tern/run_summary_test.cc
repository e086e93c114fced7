#include "tern/run_summary.h"

#include <signal.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tern {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using Json = nlohmann::ordered_json;

// summary.json as a reader sees it; a test failure when it does not parse.
Json Parse(const std::string& text) {
  Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(json.is_object()) << text;
  return json;
}

// How the summary shows the checksum 0xab (FormatChecksum's form).
constexpr char kAb[] = "0x00000000000000ab";

// A worker's run of `steps` steps; push and pull bytes change from step to
// step so that a mean differs from the first or last value.
std::vector<MetricsRecord> WorkerRun(uint32_t worker, uint64_t steps,
                                     uint64_t checksum) {
  std::vector<MetricsRecord> records;
  for (uint64_t step = 0; step < steps; ++step) {
    MetricsRecord r;
    r.worker = worker;
    r.step = step;
    r.loss = 2.0 - 0.1 * step;
    r.push_bytes = 100 + 10 * step;
    r.pull_bytes = 200 + 20 * step;
    r.push_msg_bytes = r.push_bytes + 50;
    r.pull_msg_bytes = r.pull_bytes + 60;
    r.fp32_bytes = 1600;
    r.wall_s = 0.5 * (step + 1);
    records.push_back(r);
  }
  records[steps / 2].test_accuracy = 0.5;
  records[steps / 2].test_loss = 1.5;
  records.back().test_accuracy = 0.75;
  records.back().test_loss = 0.8;
  records.back().param_checksum = checksum;
  records.back().final = true;
  return records;
}

TEST(SummarizeTest, MeansRatiosAndAgreement) {
  const TrainingSummary s = Summarize(
      {WorkerRun(0, 4, 0xab), WorkerRun(1, 4, 0xab), WorkerRun(2, 4, 0xab)});
  EXPECT_EQ(s.workers_reporting, 3u);
  EXPECT_EQ(s.workers_finished, 3u);
  EXPECT_EQ(s.steps, 4u);
  EXPECT_DOUBLE_EQ(s.train_s, 2.0);
  EXPECT_DOUBLE_EQ(s.steps_per_s, 2.0);
  EXPECT_EQ(s.final_test_accuracy, 0.75);
  EXPECT_EQ(s.final_test_loss, 0.8);
  ASSERT_TRUE(s.final_loss.has_value());
  EXPECT_DOUBLE_EQ(*s.final_loss, 1.7);
  // Push bytes 100, 110, 120, 130 -> mean 115; pull 200..260 -> 230.
  EXPECT_DOUBLE_EQ(s.push_bytes_per_step, 115);
  EXPECT_DOUBLE_EQ(s.pull_bytes_per_step, 230);
  EXPECT_DOUBLE_EQ(s.push_msg_bytes_per_step, 165);
  EXPECT_DOUBLE_EQ(s.pull_msg_bytes_per_step, 290);
  EXPECT_DOUBLE_EQ(s.fp32_bytes_per_step, 1600);
  EXPECT_DOUBLE_EQ(s.push_ratio_vs_fp32, 1600 / 115.0);
  EXPECT_DOUBLE_EQ(s.pull_ratio_vs_fp32, 1600 / 230.0);
  EXPECT_THAT(s.final_checksums, ElementsAre(kAb, kAb, kAb));
  EXPECT_TRUE(s.checksums_agree);
}

TEST(SummarizeTest, MeansWeighEveryRecordOfEveryWorker) {
  // Worker 1 stopped after 2 steps: the mean is over 4 + 2 records.
  std::vector<MetricsRecord> short_run = WorkerRun(1, 4, 0xab);
  short_run.resize(2);
  const TrainingSummary s = Summarize({WorkerRun(0, 4, 0xab), short_run});
  EXPECT_DOUBLE_EQ(s.push_bytes_per_step,
                   (100 + 110 + 120 + 130 + 100 + 110) / 6.0);
  EXPECT_EQ(s.workers_reporting, 2u);
  EXPECT_EQ(s.workers_finished, 1u);
  EXPECT_FALSE(s.checksums_agree);
  EXPECT_THAT(s.final_checksums, ElementsAre(kAb, ""));
}

TEST(SummarizeTest, DifferentChecksumsDisagree) {
  const TrainingSummary s =
      Summarize({WorkerRun(0, 2, 0x1), WorkerRun(1, 2, 0x2)});
  EXPECT_FALSE(s.checksums_agree);
}

TEST(SummarizeTest, AnEarlyStopReportsTheLatestEvaluation) {
  std::vector<MetricsRecord> run = WorkerRun(0, 6, 0x1);
  run.resize(5);  // the final record is missing; step 3 had an evaluation
  const TrainingSummary s = Summarize({run});
  EXPECT_EQ(s.steps, 5u);
  EXPECT_EQ(s.final_test_accuracy, 0.5);
  EXPECT_EQ(s.workers_finished, 0u);
}

TEST(SummarizeTest, NothingReported) {
  const TrainingSummary s = Summarize({{}, {}});
  EXPECT_EQ(s.workers_reporting, 0u);
  EXPECT_EQ(s.steps, 0u);
  EXPECT_EQ(s.push_ratio_vs_fp32, 0);
  EXPECT_FALSE(s.checksums_agree);
  EXPECT_FALSE(s.final_test_accuracy.has_value());
}

TEST(SummaryJsonTest, WritesEveryFieldAndEscapes) {
  LaunchOutcome outcome;
  outcome.status = RunStatus::kFailed;
  outcome.exit_code = 1;
  outcome.failed_child = "worker/1";
  outcome.failure = "exit code 1";
  outcome.out_dir = "runs/a \"quoted\"\\dir";
  outcome.shards = 2;
  outcome.workers = 2;
  outcome.total_steps = 4;
  outcome.children = {{"ps/0", "killed by signal 15 (Terminated)"}};
  const std::string text = SummaryJson(
      outcome, Summarize({WorkerRun(0, 4, 0xab), WorkerRun(1, 4, 0xab)}));
  // What tests/launch_test.sh greps for.
  EXPECT_THAT(text, HasSubstr(R"("status": "failed")"));
  EXPECT_EQ(text.front(), '{');
  EXPECT_EQ(text.substr(text.size() - 2), "}\n");
  const Json json = Parse(text);
  EXPECT_EQ(json["status"], "failed");
  EXPECT_EQ(json["exit_code"], 1);
  EXPECT_EQ(json["failed_child"], "worker/1");
  EXPECT_EQ(json["out_dir"], "runs/a \"quoted\"\\dir");
  EXPECT_EQ(json["final_test_accuracy"], 0.75);
  EXPECT_EQ(json["push_bytes_per_step"], 115);
  EXPECT_NEAR(json["push_ratio_vs_fp32"].get<double>(), 1600.0 / 115, 1e-9);
  EXPECT_EQ(json["param_checksums"], Json({kAb, kAb}));
  EXPECT_EQ(json["checksums_agree"], true);
  EXPECT_EQ(json["children"],
            Json::parse(R"j([{"name": "ps/0", "exit": )j"
                        R"j("killed by signal 15 (Terminated)"}])j"));
  // The keys keep their documented order.
  EXPECT_EQ(json.begin().key(), "status");
  EXPECT_LT(text.find("\"exit_code\""), text.find("\"geo\""));
}

TEST(SummaryJsonTest, MissingValuesAreNull) {
  const Json json = Parse(SummaryJson(LaunchOutcome(), Summarize({{}})));
  EXPECT_TRUE(json["final_test_accuracy"].is_null());
  EXPECT_TRUE(json["final_loss"].is_null());
  EXPECT_EQ(json["param_checksums"], Json::parse("[null]"));
  EXPECT_EQ(json["checksums_agree"], false);
  EXPECT_EQ(json["status"], "ok");
}

TEST(SummaryTextTest, SaysWhatAHumanNeeds) {
  LaunchOutcome outcome;
  outcome.out_dir = "runs/x";
  outcome.shards = 2;
  outcome.workers = 2;
  outcome.total_steps = 4;
  const std::string text = SummaryText(
      outcome, Summarize({WorkerRun(0, 4, 0xab), WorkerRun(1, 4, 0xab)}));
  EXPECT_THAT(text, HasSubstr("tern launch: ok (exit 0), output in runs/x"));
  EXPECT_THAT(text, HasSubstr("2 of 2 finished"));
  EXPECT_THAT(text, HasSubstr("4 of 4 in 2.0 s (2.00 steps/s)"));
  EXPECT_THAT(text, HasSubstr("test accuracy   75.00%"));
  EXPECT_THAT(text, HasSubstr("115 B (13.91x less than fp32's 1.56 KiB)"));
  EXPECT_THAT(text,
              HasSubstr(std::string("identical (param_checksum ") + kAb + ")"));
}

TEST(RunReportTest, PlainLaunchAddsOnlyNulls) {
  const Json json = Parse(SummaryJson(LaunchOutcome(), Summarize({{}})));
  EXPECT_TRUE(json["target_accuracy"].is_null());
  EXPECT_TRUE(json["time_to_target_s"].is_null());
  EXPECT_TRUE(json["geo"].is_null());
  const std::string text = SummaryText(LaunchOutcome(), Summarize({{}}));
  EXPECT_THAT(text, Not(HasSubstr("WAN")));
  EXPECT_THAT(text, Not(HasSubstr("time to")));
}

TEST(RunReportTest, GeoRunWithWanBytesAndTarget) {
  RunReport report;
  report.target_accuracy = 0.8;
  report.time_to_target_s = 12.5;
  report.step_to_target = 99;
  report.job_wall_s = 30;
  report.geo_mode = "terngrad";
  report.datacenters = 3;
  report.workers_per_dc = 2;
  report.emulate_wan = true;
  report.wan_mbit = 100;
  report.wan_bytes_up = 3 << 20;
  report.wan_bytes_down = 1 << 20;
  report.wan_bytes_source = "the workers' messages";
  const TrainingSummary training =
      Summarize({WorkerRun(0, 4, 0xab), WorkerRun(1, 4, 0xab)});
  const Json json = Parse(SummaryJson(LaunchOutcome(), training, report));
  EXPECT_EQ(json["target_accuracy"], 0.8);
  EXPECT_EQ(json["time_to_target_s"], 12.5);
  EXPECT_EQ(json["step_to_target"], 99);
  EXPECT_EQ(json["job_wall_s"], 30);
  EXPECT_EQ(json["geo"]["mode"], "terngrad");
  EXPECT_EQ(json["geo"]["datacenters"], 3);
  EXPECT_EQ(json["geo"]["wan_mbit"], 100);
  EXPECT_EQ(json["geo"]["wan_bytes"], 4194304);
  EXPECT_EQ(json["geo"]["wan_bytes_up"], 3145728);
  EXPECT_EQ(json["geo"]["wan_bytes_down"], 1048576);
  EXPECT_TRUE(json["geo"]["lps_checksums"].is_null());
  const std::string text = SummaryText(LaunchOutcome(), training, report);
  EXPECT_THAT(text, HasSubstr("time to 80.00%  12.5 s (step 99, worker 0)"));
  EXPECT_THAT(text, HasSubstr("terngrad, 3 data center(s) x 2 worker(s), "
                              "emulated WAN at 100 mbit/s per link"));
  EXPECT_THAT(text, HasSubstr("WAN bytes       4.00 MiB (up 3.00 MiB, down "
                              "1.00 MiB; the workers' messages)"));
  EXPECT_THAT(text,
              HasSubstr(std::string("identical (param_checksum ") + kAb + ")"));
}

TEST(RunReportTest, LpsModeComparesLpsChecksumsAndSaysWhyBytesAreMissing) {
  RunReport report;
  report.target_accuracy = 0.99;
  report.geo_mode = "weightgrad";
  report.datacenters = 2;
  report.workers_per_dc = 1;
  report.lps_mode = true;
  report.lps_checksums = {"0x01", "0x01"};
  report.wan_bytes_source = "no log";
  EXPECT_TRUE(LpsChecksumsAgree(report));
  const TrainingSummary training =
      Summarize({WorkerRun(0, 4, 0xab), WorkerRun(1, 4, 0xcd)});
  std::string text = SummaryText(LaunchOutcome(), training, report);
  EXPECT_THAT(text, HasSubstr("differ by design"));
  EXPECT_THAT(text, HasSubstr("LPS checksums agree (0x01)"));
  EXPECT_THAT(text, HasSubstr("WAN bytes       unavailable (no log)"));
  EXPECT_THAT(text, HasSubstr("time to 99.00%  not reached"));
  EXPECT_THAT(text, HasSubstr("on loopback"));
  const Json json = Parse(SummaryJson(LaunchOutcome(), training, report));
  EXPECT_TRUE(json["geo"]["wan_bytes"].is_null());
  EXPECT_EQ(json["geo"]["lps_checksums"], Json({"0x01", "0x01"}));
  EXPECT_EQ(json["geo"]["lps_checksums_agree"], true);
  EXPECT_TRUE(json["time_to_target_s"].is_null());

  report.lps_checksums = {"0x01", ""};
  EXPECT_FALSE(LpsChecksumsAgree(report));
  text = SummaryText(LaunchOutcome(), training, report);
  EXPECT_THAT(text, HasSubstr("NOT confirmed equal: [0x01, none]"));
  report.lps_checksums = {"0x01", "0x02"};
  EXPECT_FALSE(LpsChecksumsAgree(report));
  report.lps_checksums = {};
  EXPECT_FALSE(LpsChecksumsAgree(report));
}

TEST(LaunchOutcomeTest, TheFirstEndDecides) {
  LaunchOutcome outcome;
  EXPECT_TRUE(outcome.ok());
  EXPECT_STREQ(RunStatusName(outcome.status), "ok");
  outcome.Fail("ps/1", "exit code 3", 1);
  outcome.Fail("worker/0", "exit code 143", 143);
  outcome.Interrupt(SIGINT);
  EXPECT_EQ(outcome.status, RunStatus::kFailed);
  EXPECT_STREQ(RunStatusName(outcome.status), "failed");
  EXPECT_EQ(outcome.failed_child, "ps/1");
  EXPECT_EQ(outcome.failure, "exit code 3");
  EXPECT_EQ(outcome.exit_code, 1);

  LaunchOutcome interrupted;
  interrupted.Interrupt(SIGINT);
  interrupted.Fail("ps/1", "exit code 3", 1);
  EXPECT_EQ(interrupted.status, RunStatus::kInterrupted);
  EXPECT_STREQ(RunStatusName(interrupted.status), "interrupted");
  EXPECT_EQ(interrupted.exit_code, 128 + SIGINT);
  EXPECT_EQ(interrupted.failed_child, "");
}

}  // namespace
}  // namespace tern
