#include "tern/geo_report.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tern/geo_plan.h"

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

records::LpsReport Lps(uint32_t d, uint64_t up, uint64_t down, bool done,
                       const std::string& checksum) {
  records::LpsReport report;
  report.datacenter = d;
  report.steps = 12;
  report.final_sync_done = done;
  report.param_checksum = checksum;
  report.wan_bytes_up = up;
  report.wan_bytes_down = down;
  return report;
}

records::GlobalServerReport Global(uint64_t in, uint64_t out) {
  records::GlobalServerReport report;
  report.open_round = 4;
  report.rounds_closed = 4;
  report.bytes_in = in;
  report.bytes_out = out;
  return report;
}

TEST(LpsRunWanBytesTest, TheLpssOwnCountsWhenEveryLpsReported) {
  for (uint32_t datacenters : {1u, 2u, 5u}) {
    SCOPED_TRACE(datacenters);
    std::vector<std::optional<records::LpsReport>> lpss;
    for (uint32_t d = 0; d < datacenters; ++d) {
      lpss.push_back(Lps(d, 1000 + d, 40 + d, true, "0x01"));
    }
    const WanMeasurement wan =
        LpsRunWanBytes(lpss, Global(123456, 2048), datacenters);
    ASSERT_TRUE(wan.bytes.has_value());
    // Not the global server's numbers, which are there too.
    EXPECT_DOUBLE_EQ(wan.bytes->up,
                     1000.0 * datacenters + datacenters * (datacenters - 1) / 2);
    EXPECT_DOUBLE_EQ(wan.bytes->down,
                     40.0 * datacenters + datacenters * (datacenters - 1) / 2);
    EXPECT_EQ(wan.source, "update and answer payloads from the LPSs' reports");
  }
}

TEST(LpsRunWanBytesTest, SaysWhenAnLpsStoppedBeforeItsFinalRound) {
  const WanMeasurement wan = LpsRunWanBytes(
      {Lps(0, 100, 47, false, "0x02"), Lps(1, 1100, 1047, true, "0x03")},
      std::nullopt, 2);
  ASSERT_TRUE(wan.bytes.has_value());
  EXPECT_DOUBLE_EQ(wan.bytes->up, 1200);
  EXPECT_DOUBLE_EQ(wan.bytes->down, 1094);
  EXPECT_THAT(wan.source, ::testing::HasSubstr("not every LPS finished"));
}

TEST(LpsRunWanBytesTest, TheGlobalServersWhenAnLpsLeftNone) {
  const WanMeasurement wan = LpsRunWanBytes(
      {Lps(0, 100, 47, true, "0x02"), std::nullopt}, Global(123456, 2048), 3);
  ASSERT_TRUE(wan.bytes.has_value());
  EXPECT_DOUBLE_EQ(wan.bytes->up, 123456);
  EXPECT_DOUBLE_EQ(wan.bytes->down, 3 * 2048);
  EXPECT_THAT(wan.source, ::testing::HasSubstr("global server's report"));

  const WanMeasurement none =
      LpsRunWanBytes({std::nullopt, std::nullopt}, std::nullopt, 2);
  EXPECT_FALSE(none.bytes.has_value());
  EXPECT_THAT(none.source, ::testing::HasSubstr("neither"));
}

TEST(LpsChecksumsTest, OnePerDataCenterEmptyWithoutAReport) {
  EXPECT_THAT(LpsChecksums({Lps(0, 1, 1, true, "0x0123456789abcdef"),
                            std::nullopt,
                            Lps(2, 1, 1, false, "0xfedcba9876543210")}),
              ::testing::ElementsAre("0x0123456789abcdef", "",
                                     "0xfedcba9876543210"));
  EXPECT_TRUE(LpsChecksums({}).empty());
}

// The reports are read from the files the servers write, wherever launch
// told them to (ReportFileOf); what the servers log does not matter.
TEST(ReportsInTest, ReadsTheFilesTheServersWrite) {
  const std::string dir = ::testing::TempDir() + "/geo_report_reports";
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(records::WriteLpsReport(ReportFileOf(dir, "lps/0"),
                                      Lps(0, 1100, 1047, true, "0x03"))
                  .ok());
  ASSERT_TRUE(records::WriteGlobalServerReport(ReportFileOf(dir, "global"),
                                               Global(99, 7))
                  .ok());
  // An LPS log whose lines say something else entirely: a renamed log
  // message cannot change the report.
  std::ofstream(dir + "/lps-0.log")
      << "[lps/0] final synchronization done after 3 rounds: 5 B up, 5 B "
         "down in all; final checksum 0x00000000000000ff\n";
  const std::vector<std::optional<records::LpsReport>> lpss =
      LpsReportsIn(dir, 2);
  ASSERT_EQ(lpss.size(), 2u);
  ASSERT_TRUE(lpss[0].has_value());
  EXPECT_EQ(lpss[0]->wan_bytes_up, 1100u);
  EXPECT_EQ(lpss[0]->param_checksum, "0x03");
  EXPECT_FALSE(lpss[1].has_value());  // lps/1 left no report
  const std::optional<records::GlobalServerReport> global =
      GlobalServerReportIn(dir);
  ASSERT_TRUE(global.has_value());
  EXPECT_EQ(global->bytes_in, 99u);
  EXPECT_FALSE(GlobalServerReportIn(dir + "/nowhere").has_value());
}

}  // namespace
}  // namespace tern
