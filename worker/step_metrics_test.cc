#include "worker/step_metrics.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"

namespace tern::worker {
namespace {

TEST(StepRecordJsonTest, WritesEveryContractFieldInOrder) {
  StepRecord r;
  r.worker = 3;
  r.step = 41;
  r.loss = 0.25;
  r.lr = 0.01;
  r.push_bytes = 100;
  r.pull_bytes = 200;
  r.push_msg_bytes = 150;
  r.pull_msg_bytes = 260;
  r.fp32_bytes = 4000;
  r.compute_s = 0.5;
  r.encode_s = 0.125;
  r.network_s = 1.5;
  r.decode_s = 0.0625;
  r.eval_s = 2.5;
  r.wall_s = 12;
  EXPECT_EQ(StepRecordJson(r),
            "{\"worker\":3,\"step\":41,\"loss\":0.25,\"lr\":0.01,"
            "\"push_bytes\":100,\"pull_bytes\":200,\"push_msg_bytes\":150,"
            "\"pull_msg_bytes\":260,\"fp32_bytes\":4000,\"compute_s\":0.5,"
            "\"encode_s\":0.125,\"network_s\":1.5,\"decode_s\":0.0625,"
            "\"eval_s\":2.5,\"wall_s\":12.0}");
}

TEST(StepRecordJsonTest, OptionalFieldsAppearOnlyWhenSet) {
  StepRecord r;
  r.test_accuracy = 0.875;
  r.test_loss = 0.5;
  r.param_checksum = 0xabcdefull;
  r.final = true;
  const std::string json = StepRecordJson(r);
  EXPECT_NE(json.find("\"test_accuracy\":0.875,\"test_loss\":0.5,"
                      "\"param_checksum\":\"0x0000000000abcdef\","
                      "\"final\":true}"),
            std::string::npos)
      << json;
  const std::string plain = StepRecordJson(StepRecord{});
  EXPECT_EQ(plain.find("test_accuracy"), std::string::npos);
  EXPECT_EQ(plain.find("param_checksum"), std::string::npos);
  EXPECT_EQ(plain.find("final"), std::string::npos);
}

TEST(StepRecordJsonTest, NonFiniteNumbersBecomeNull) {
  StepRecord r;
  r.loss = NAN;
  r.lr = INFINITY;
  const std::string json = StepRecordJson(r);
  EXPECT_NE(json.find("\"loss\":null,\"lr\":null"), std::string::npos) << json;
}

TEST(MetricsWriterTest, WritesOneLinePerRecord) {
  const std::string path =
      std::string(std::getenv("TEST_TMPDIR")) + "/metrics.jsonl";
  {
    auto writer = MetricsWriter::Open(path);
    ASSERT_TRUE(writer.ok()) << writer.status();
    StepRecord r;
    for (uint64_t step = 0; step < 3; ++step) {
      r.step = step;
      ASSERT_TRUE((*writer)->Write(r).ok());
    }
  }
  std::ifstream in(path);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    EXPECT_NE(line.find("\"step\":" + std::to_string(lines) + ","),
              std::string::npos);
    EXPECT_EQ(line.front(), '{');
    EXPECT_EQ(line.back(), '}');
    ++lines;
  }
  EXPECT_EQ(lines, 3);
}

TEST(MetricsWriterTest, UnwritablePathIsAnError) {
  const auto writer = MetricsWriter::Open("/nonexistent-dir/metrics.jsonl");
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(writer.status().message().find("/nonexistent-dir"),
            absl::string_view::npos);
}

}  // namespace
}  // namespace tern::worker
