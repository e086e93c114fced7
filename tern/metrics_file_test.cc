#include "tern/metrics_file.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr char kStep[] =
    R"({"worker": 2, "step": 7, "loss": 1.5, "lr": 0.01, "push_bytes": 1000,)"
    R"( "pull_bytes": 1500, "push_msg_bytes": 1100, "pull_msg_bytes": 1600,)"
    R"( "fp32_bytes": 16000, "compute_s": 0.1, "encode_s": 0.01,)"
    R"( "network_s": 0.02, "decode_s": 0.01, "wall_s": 3.25})";

constexpr char kFinal[] =
    R"({"worker": 0, "step": 39, "loss": null, "lr": 0.01, "push_bytes": 1,)"
    R"( "pull_bytes": 2, "push_msg_bytes": 3, "pull_msg_bytes": 4,)"
    R"( "fp32_bytes": 5, "eval_s": 1.25, "wall_s": 9, "test_accuracy": 0.875,)"
    R"( "test_loss": 0.4, "param_checksum": "0x00000000deadbeef",)"
    R"( "final": true, "something_new": [1, 2]})";

TEST(ParseMetricsLineTest, ReadsAStepRecord) {
  absl::StatusOr<MetricsRecord> record = ParseMetricsLine(kStep);
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->worker, 2u);
  EXPECT_EQ(record->step, 7u);
  EXPECT_DOUBLE_EQ(record->loss, 1.5);
  EXPECT_DOUBLE_EQ(record->push_bytes, 1000);
  EXPECT_DOUBLE_EQ(record->pull_bytes, 1500);
  EXPECT_DOUBLE_EQ(record->push_msg_bytes, 1100);
  EXPECT_DOUBLE_EQ(record->pull_msg_bytes, 1600);
  EXPECT_DOUBLE_EQ(record->fp32_bytes, 16000);
  EXPECT_DOUBLE_EQ(record->wall_s, 3.25);
  EXPECT_DOUBLE_EQ(record->eval_s, 0);  // absent: no evaluation
  EXPECT_FALSE(record->test_accuracy.has_value());
  EXPECT_FALSE(record->param_checksum.has_value());
  EXPECT_FALSE(record->final);
}

TEST(ParseMetricsLineTest, ReadsTheFinalRecordAndNullLoss) {
  absl::StatusOr<MetricsRecord> record = ParseMetricsLine(kFinal);
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_TRUE(std::isnan(record->loss));
  EXPECT_EQ(record->test_accuracy, 0.875);
  EXPECT_DOUBLE_EQ(record->eval_s, 1.25);
  EXPECT_EQ(record->test_loss, 0.4);
  EXPECT_EQ(record->param_checksum, 0xdeadbeefull);
  EXPECT_TRUE(record->final);
}

TEST(ParseMetricsLineTest, RejectsBadRecords) {
  struct Case {
    const char* line;
    const char* expected;
  };
  for (const Case& c : {
           Case{"not json", "not a JSON object"},
           Case{"[1, 2]", "not a JSON object"},
           Case{R"({"step": 1, "loss": 1, "push_bytes": 1, "pull_bytes": 1,)"
                R"( "fp32_bytes": 1, "wall_s": 1})",
                "\"worker\""},
           Case{R"({"worker": -1, "step": 1, "loss": 1, "push_bytes": 1,)"
                R"( "pull_bytes": 1, "fp32_bytes": 1, "wall_s": 1})",
                "\"worker\""},
           Case{R"({"worker": 0, "step": 1.5, "loss": 1, "push_bytes": 1,)"
                R"( "pull_bytes": 1, "fp32_bytes": 1, "wall_s": 1})",
                "\"step\""},
           Case{R"({"worker": 0, "step": 1, "loss": "x", "push_bytes": 1,)"
                R"( "pull_bytes": 1, "fp32_bytes": 1, "wall_s": 1})",
                "\"loss\""},
           Case{R"({"worker": 0, "step": 1, "loss": 1, "push_bytes": null,)"
                R"( "pull_bytes": 1, "fp32_bytes": 1, "wall_s": 1})",
                "\"push_bytes\""},
           Case{R"({"worker": 0, "step": 1, "loss": 1, "push_bytes": 1,)"
                R"( "pull_bytes": 1, "fp32_bytes": 1})",
                "\"wall_s\""},
       }) {
    absl::StatusOr<MetricsRecord> record = ParseMetricsLine(c.line);
    ASSERT_FALSE(record.ok()) << c.line;
    EXPECT_EQ(record.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(record.status().message(), HasSubstr(c.expected)) << c.line;
  }
}

TEST(MetricsTailTest, FollowsAGrowingFile) {
  const std::string path =
      std::string(std::getenv("TEST_TMPDIR")) + "/tail.jsonl";
  std::remove(path.c_str());
  MetricsTail tail(path);
  EXPECT_THAT(tail.ReadNew(), IsEmpty());  // not there yet

  std::ofstream out(path, std::ios::binary);
  out << kStep << "\n" << "garbage\n" << std::string(kFinal).substr(0, 20);
  out.flush();
  std::vector<MetricsRecord> first = tail.ReadNew();
  ASSERT_THAT(first, SizeIs(1));
  EXPECT_EQ(first[0].step, 7u);
  EXPECT_EQ(tail.bad_lines(), 1);

  // The rest of the half-written line arrives.
  out << std::string(kFinal).substr(20) << "\n";
  out.flush();
  std::vector<MetricsRecord> second = tail.ReadNew();
  ASSERT_THAT(second, SizeIs(1));
  EXPECT_TRUE(second[0].final);
  EXPECT_THAT(tail.ReadNew(), IsEmpty());
}

TEST(MetricsTailTest, StartsOverWhenTheFileIsReplaced) {
  const std::string path =
      std::string(std::getenv("TEST_TMPDIR")) + "/replaced.jsonl";
  {
    std::ofstream out(path);
    out << kStep << "\n" << kStep << "\n";
  }
  MetricsTail tail(path);
  EXPECT_THAT(tail.ReadNew(), SizeIs(2));
  {
    std::ofstream out(path, std::ios::trunc);
    out << kFinal << "\n";
  }
  std::vector<MetricsRecord> records = tail.ReadNew();
  ASSERT_THAT(records, SizeIs(1));
  EXPECT_TRUE(records[0].final);
}

}  // namespace
}  // namespace tern
