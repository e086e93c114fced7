#include "common/records/server_report.h"

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern::records {
namespace {

using ::testing::HasSubstr;

std::string Path(const std::string& name) {
  return ::testing::TempDir() + "/" + name;
}

TEST(ServerReportTest, LpsReportRoundTrips) {
  for (bool done : {false, true}) {
    LpsReport report;
    report.datacenter = 3;
    report.steps = 1234567;
    report.final_sync_done = done;
    report.param_checksum = "0x0123456789abcdef";
    // Beyond 2^53: counts stay exact integers in the file.
    report.wan_bytes_up = (uint64_t{1} << 60) + 1;
    report.wan_bytes_down = 42;
    ASSERT_TRUE(WriteLpsReport(Path("lps.json"), report).ok());
    absl::StatusOr<LpsReport> read = ReadLpsReport(Path("lps.json"));
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(read->datacenter, 3u);
    EXPECT_EQ(read->steps, 1234567u);
    EXPECT_EQ(read->final_sync_done, done);
    EXPECT_EQ(read->param_checksum, "0x0123456789abcdef");
    EXPECT_EQ(read->wan_bytes_up, (uint64_t{1} << 60) + 1);
    EXPECT_EQ(read->wan_bytes_down, 42u);
  }
}

TEST(ServerReportTest, GlobalServerReportRoundTrips) {
  GlobalServerReport report;
  report.open_round = 9;
  report.rounds_closed = 8;
  report.late_submissions = 1;
  report.duplicates = 2;
  report.refused = 3;
  report.holds = 4;
  report.hold_timeouts = 5;
  report.bytes_in = 123456;
  report.bytes_out = 2048;
  ASSERT_TRUE(WriteGlobalServerReport(Path("gs.json"), report).ok());
  absl::StatusOr<GlobalServerReport> read =
      ReadGlobalServerReport(Path("gs.json"));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->open_round, 9u);
  EXPECT_EQ(read->rounds_closed, 8u);
  EXPECT_EQ(read->late_submissions, 1u);
  EXPECT_EQ(read->duplicates, 2u);
  EXPECT_EQ(read->refused, 3u);
  EXPECT_EQ(read->holds, 4u);
  EXPECT_EQ(read->hold_timeouts, 5u);
  EXPECT_EQ(read->bytes_in, 123456u);
  EXPECT_EQ(read->bytes_out, 2048u);
}

TEST(ServerReportTest, AKindIsNotAnother) {
  ASSERT_TRUE(WriteGlobalServerReport(Path("kind.json"), {}).ok());
  absl::StatusOr<LpsReport> read = ReadLpsReport(Path("kind.json"));
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(read.status().message(), HasSubstr("lps"));
}

TEST(ServerReportTest, AbsentFieldsDefaultAndWrongTypesAreErrors) {
  std::ofstream(Path("old.json")) << R"({"kind": "lps", "steps": 7})";
  absl::StatusOr<LpsReport> old = ReadLpsReport(Path("old.json"));
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->steps, 7u);
  EXPECT_EQ(old->wan_bytes_up, 0u);
  EXPECT_FALSE(old->final_sync_done);

  std::ofstream(Path("wrong.json"))
      << R"({"kind": "lps", "steps": "seven"})";
  EXPECT_EQ(ReadLpsReport(Path("wrong.json")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadLpsReport(Path("absent.json")).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tern::records
