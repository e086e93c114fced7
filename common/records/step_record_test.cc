#include "common/records/step_record.h"

#include <cmath>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern::records {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

StepRecord Full() {
  StepRecord r;
  r.worker = 3;
  r.step = 41;
  r.loss = 2.302585124969482;
  r.lr = 0.05;
  r.push_bytes = 1000;
  r.pull_bytes = 1500;
  r.push_msg_bytes = 1100;
  r.pull_msg_bytes = 1600;
  r.fp32_bytes = 16000;
  r.compute_s = 0.125;
  r.encode_s = 0.01;
  r.network_s = 0.02;
  r.decode_s = 0.03;
  r.eval_s = 1.5;
  r.wall_s = 9.75;
  r.test_accuracy = 0.875;
  r.test_loss = 0.4;
  r.param_checksum = 0xdeadbeefull;
  r.final = true;
  return r;
}

TEST(StepRecordTest, RoundTripsEveryField) {
  const StepRecord in = Full();
  absl::StatusOr<StepRecord> out = ParseStepRecord(StepRecordLine(in));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->worker, in.worker);
  EXPECT_EQ(out->step, in.step);
  EXPECT_EQ(out->loss, in.loss);  // exactly: no digits are lost
  EXPECT_EQ(out->lr, in.lr);
  EXPECT_EQ(out->push_bytes, in.push_bytes);
  EXPECT_EQ(out->pull_bytes, in.pull_bytes);
  EXPECT_EQ(out->push_msg_bytes, in.push_msg_bytes);
  EXPECT_EQ(out->pull_msg_bytes, in.pull_msg_bytes);
  EXPECT_EQ(out->fp32_bytes, in.fp32_bytes);
  EXPECT_EQ(out->compute_s, in.compute_s);
  EXPECT_EQ(out->encode_s, in.encode_s);
  EXPECT_EQ(out->network_s, in.network_s);
  EXPECT_EQ(out->decode_s, in.decode_s);
  EXPECT_EQ(out->eval_s, in.eval_s);
  EXPECT_EQ(out->wall_s, in.wall_s);
  EXPECT_EQ(out->test_accuracy, in.test_accuracy);
  EXPECT_EQ(out->test_loss, in.test_loss);
  EXPECT_EQ(out->param_checksum, in.param_checksum);
  EXPECT_TRUE(out->final);
}

TEST(StepRecordTest, OneCompactLineInTheContractsOrder) {
  const std::string line = StepRecordLine(Full());
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(line.rfind("{\"worker\":3,\"step\":41,\"loss\":", 0), 0u) << line;
  EXPECT_THAT(line, HasSubstr("\"param_checksum\":\"0x00000000deadbeef\""));
  EXPECT_THAT(line, HasSubstr(",\"final\":true}"));
}

TEST(StepRecordTest, OptionalFieldsOnlyWhenSetAndNonFiniteAsNull) {
  StepRecord r;
  r.loss = std::numeric_limits<double>::infinity();
  r.wall_s = 1;
  const std::string line = StepRecordLine(r);
  EXPECT_THAT(line, HasSubstr("\"loss\":null"));
  for (const char* absent : {"test_accuracy", "test_loss", "param_checksum",
                             "final"}) {
    EXPECT_THAT(line, Not(HasSubstr(absent)));
  }
  absl::StatusOr<StepRecord> back = ParseStepRecord(line);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(std::isnan(back->loss));
  EXPECT_FALSE(back->test_accuracy.has_value());
  EXPECT_FALSE(back->param_checksum.has_value());
  EXPECT_FALSE(back->final);
}

TEST(StepRecordTest, RequiredFieldsAreNamed) {
  const std::string full = StepRecordLine(Full());
  for (const char* key : {"worker", "step", "loss", "push_bytes", "pull_bytes",
                          "fp32_bytes", "wall_s"}) {
    SCOPED_TRACE(key);
    std::string line = full;
    const std::string field = std::string("\"") + key + "\":";
    const size_t at = line.find(field);
    ASSERT_NE(at, std::string::npos);
    line.replace(at, field.size(), std::string("\"renamed_") + key + "\":");
    absl::StatusOr<StepRecord> record = ParseStepRecord(line);
    EXPECT_EQ(record.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(record.status().message(), HasSubstr(field.substr(0, field.size() - 1)));
  }
  EXPECT_THAT(ParseStepRecord("[1]").status().message(),
              HasSubstr("not a JSON object"));
}

// The checksum is a number in memory and FormatChecksum's string on disk; a
// string of another form is refused rather than read as some checksum.
TEST(StepRecordTest, RefusesAMalformedChecksumNamingTheField) {
  const std::string full = StepRecordLine(Full());
  const std::string good = "\"0x00000000deadbeef\"";
  ASSERT_NE(full.find(good), std::string::npos);
  for (const char* bad : {"\"0xdeadbeef\"", "\"00000000deadbeef\"",
                          "\"0x00000000deadbeez\"", "3735928559", "null"}) {
    SCOPED_TRACE(bad);
    std::string line = full;
    line.replace(line.find(good), good.size(), bad);
    absl::StatusOr<StepRecord> record = ParseStepRecord(line);
    EXPECT_EQ(record.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(record.status().message(), HasSubstr("\"param_checksum\""));
  }
}

}  // namespace
}  // namespace tern::records
