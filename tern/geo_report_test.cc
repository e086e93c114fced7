#include "tern/geo_report.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern {
namespace {

MetricsRecord Record(uint64_t step, double wall_s,
                     std::optional<double> accuracy = std::nullopt) {
  MetricsRecord record;
  record.step = step;
  record.wall_s = wall_s;
  record.test_accuracy = accuracy;
  record.push_msg_bytes = 100 + step;
  record.pull_msg_bytes = 10;
  return record;
}

TEST(TimeToTargetTest, FirstEvaluationAtOrAboveTheTarget) {
  const std::vector<MetricsRecord> records = {
      Record(0, 0.1), Record(9, 1.0, 0.5), Record(19, 2.0, 0.8),
      Record(29, 3.0, 0.7), Record(39, 4.0, 0.9)};
  std::optional<TargetReached> reached = TimeToTarget(records, 0.8);
  ASSERT_TRUE(reached.has_value());
  EXPECT_EQ(reached->step, 19u);
  EXPECT_DOUBLE_EQ(reached->wall_s, 2.0);
  EXPECT_EQ(TimeToTarget(records, 0.85)->step, 39u);
  EXPECT_EQ(TimeToTarget(records, 0.5)->step, 9u);
  EXPECT_FALSE(TimeToTarget(records, 0.95).has_value());
  EXPECT_FALSE(TimeToTarget({}, 0.1).has_value());
  // Records without an evaluation never count, whatever the target.
  EXPECT_FALSE(TimeToTarget({Record(0, 0.1), Record(1, 0.2)}, 0.0).has_value());
}

TEST(TimeToTargetTest, EvaluationTimeIsNotTrainingTime) {
  std::vector<MetricsRecord> records = {Record(9, 3.0, 0.5),
                                        Record(19, 7.0, 0.7),
                                        Record(29, 11.0, 0.9)};
  records[0].eval_s = 1.5;
  records[1].eval_s = 1.0;
  records[2].eval_s = 0.5;
  // 11 s since training began, 3 s of it evaluating.
  EXPECT_DOUBLE_EQ(TimeToTarget(records, 0.85)->wall_s, 8.0);
  EXPECT_DOUBLE_EQ(TimeToTarget(records, 0.5)->wall_s, 1.5);
}

TEST(WorkerWanBytesTest, SumsEveryRecordOfEveryWorker) {
  for (size_t workers : {0u, 1u, 3u}) {
    for (size_t steps : {0u, 1u, 33u}) {
      std::vector<std::vector<MetricsRecord>> per_worker(workers);
      double up = 0;
      double down = 0;
      for (auto& records : per_worker) {
        for (size_t s = 0; s < steps; ++s) {
          records.push_back(Record(s, 0));
          up += 100 + s;
          down += 10;
        }
      }
      const WanBytes bytes = WorkerWanBytes(per_worker);
      EXPECT_DOUBLE_EQ(bytes.up, up);
      EXPECT_DOUBLE_EQ(bytes.down, down);
    }
  }
}

TEST(GlobalServerWanBytesTest, ReadsTheStopLine) {
  const std::vector<std::string> log = {
      "[global/0] round 3 closed after 1.0s: 2 of 2 data centers sent it, 0 "
      "late update(s) joined, lagging [], 4 chunks averaged, 99 bytes in, 7 "
      "bytes out",
      "[global/0] Terminated received: shutting down",
      "[2024-01-01 00:00:00.000] [global/0] [info] stopped at round 4: 4 "
      "rounds closed, 0 late updates, 0 duplicates, 0 refused, 0 holds (0 "
      "held calls timed out), 123456 bytes in, 2048 bytes out"};
  std::optional<WanBytes> bytes = GlobalServerWanBytes(log, 3);
  ASSERT_TRUE(bytes.has_value());
  EXPECT_DOUBLE_EQ(bytes->up, 123456);
  EXPECT_DOUBLE_EQ(bytes->down, 3 * 2048);
  // Without the stop line (a killed GS) the per-round lines are not summed.
  EXPECT_FALSE(GlobalServerWanBytes({log[0], log[1]}, 3).has_value());
  EXPECT_FALSE(GlobalServerWanBytes({}, 3).has_value());
  EXPECT_FALSE(
      GlobalServerWanBytes({"stopped at round 1: bytes in"}, 3).has_value());
}

TEST(LpsLogWanBytesTest, FinalTotalsOrTheSumOfTheRounds) {
  const std::vector<std::string> rounds = {
      "[x] [lps/0] [info] round 0 at step 5: sent 3 of 4 chunks, 100 B up, "
      "40 B down, g_thresh 0.2, lagging [], 0 round(s) queued, 0.1s, "
      "checksum 0x0000000000000001",
      "[x] [lps/0] [info] worker 1 joined (2 of 2)",
      "[x] [lps/0] [info] round 1 at step 10: sent 0 of 4 chunks, 0 B up, 7 "
      "B down, g_thresh 0.2, lagging [1], 0 round(s) queued, 0.1s, checksum "
      "0x0000000000000002"};
  std::optional<LpsWanBytes> partial = LpsLogWanBytes(rounds);
  ASSERT_TRUE(partial.has_value());
  EXPECT_FALSE(partial->complete);
  EXPECT_DOUBLE_EQ(partial->bytes.up, 100);
  EXPECT_DOUBLE_EQ(partial->bytes.down, 47);

  std::vector<std::string> done = rounds;
  done.push_back(
      "[x] [lps/0] [info] round 2 (final, fp32) at step 12: sent 4 of 4 "
      "chunks, 1000 B up, 1000 B down, g_thresh 0, lagging [], 0 round(s) "
      "queued, 0.1s, checksum 0x0000000000000003");
  done.push_back(
      "[x] [lps/0] [info] final synchronization done after 3 rounds: 1100 B "
      "up, 1047 B down in all; final checksum 0x0000000000000003");
  std::optional<LpsWanBytes> total = LpsLogWanBytes(done);
  ASSERT_TRUE(total.has_value());
  EXPECT_TRUE(total->complete);
  EXPECT_DOUBLE_EQ(total->bytes.up, 1100);
  EXPECT_DOUBLE_EQ(total->bytes.down, 1047);
  EXPECT_EQ(LastLpsChecksum(done), "0x0000000000000003");

  EXPECT_FALSE(LpsLogWanBytes({}).has_value());
  EXPECT_FALSE(LpsLogWanBytes({rounds[1]}).has_value());
}

TEST(LastLpsChecksumTest, LastChecksumOnTheLastLineThatHasOne) {
  EXPECT_EQ(LastLpsChecksum({}), "");
  EXPECT_EQ(LastLpsChecksum({"round 1: checksum 0x00000000000000aa",
                             "round 2: sent 3 chunks",
                             "final: W checksum 0x0123456789abcdef, "
                             "round checksum 0xfedcba9876543210 done",
                             "stopping"}),
            "0xfedcba9876543210");
  // A longer or shorter hex number is not a checksum.
  EXPECT_EQ(LastLpsChecksum({"checksum 0x0123456789abcdef0"}), "");
  EXPECT_EQ(LastLpsChecksum({"checksum 0x0123"}), "");
  EXPECT_EQ(LastLpsChecksum({"checksum 0x0123456789ABCDEF"}),
            "0x0123456789ABCDEF");
  // The last line that mentions one decides, even without a value.
  EXPECT_EQ(
      LastLpsChecksum({"checksum 0x0123456789abcdef", "checksum unavailable"}),
      "");
}

TEST(ReadLogLinesTest, LinesOfAFileAndNothingForNoFile) {
  const std::string path = ::testing::TempDir() + "/geo_report_log.txt";
  std::ofstream(path) << "a\nb b\n\nlast";
  EXPECT_THAT(ReadLogLines(path),
              ::testing::ElementsAre("a", "b b", "", "last"));
  EXPECT_TRUE(ReadLogLines(path + ".missing").empty());
}

}  // namespace
}  // namespace tern
