#include "common/logging.h"

#include "gtest/gtest.h"

namespace tern {
namespace {

TEST(LoggingTest, NamesTheRoleAndId) {
  EXPECT_EQ(MakeLogger("ps", "1")->name(), "ps/1");
  EXPECT_EQ(MakeLogger("launch", "")->name(), "launch");
}

TEST(LoggingTest, ParsesLevelsAndRejectsUnknownOnes) {
  EXPECT_EQ(*ParseLogLevel("debug"), spdlog::level::debug);
  EXPECT_EQ(*ParseLogLevel("off"), spdlog::level::off);
  const auto bad = ParseLogLevel("loud");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("loud"), absl::string_view::npos);
}

}  // namespace
}  // namespace tern
