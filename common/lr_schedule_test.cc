#include "common/lr_schedule.h"

#include <cmath>

#include "gtest/gtest.h"

namespace tern {
namespace {

TEST(LrScheduleTest, ParsesTheThreeNamesAndRejectsOthers) {
  EXPECT_EQ(*ParseLrScheduleKind("constant"), LrScheduleKind::kConstant);
  EXPECT_EQ(*ParseLrScheduleKind("poly"), LrScheduleKind::kPoly);
  EXPECT_EQ(*ParseLrScheduleKind("step"), LrScheduleKind::kStep);
  const auto bad = ParseLrScheduleKind("cosine");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("cosine"), absl::string_view::npos);
}

TEST(LrScheduleTest, ConstantNeverChanges) {
  const auto schedule =
      LrSchedule::Create(LrScheduleKind::kConstant, 0.05, 100, 10, 0.1);
  ASSERT_TRUE(schedule.ok());
  for (uint64_t t : {0, 1, 99, 100, 100000}) {
    EXPECT_EQ(schedule->Rate(t), 0.05) << t;
  }
}

TEST(LrScheduleTest, PolyIsSquareRootOfRemainingFraction) {
  const auto schedule =
      LrSchedule::Create(LrScheduleKind::kPoly, 0.1, 100, 1, 1);
  ASSERT_TRUE(schedule.ok());
  EXPECT_DOUBLE_EQ(schedule->Rate(0), 0.1);
  EXPECT_DOUBLE_EQ(schedule->Rate(75), 0.1 * 0.5);  // sqrt(0.25)
  EXPECT_DOUBLE_EQ(schedule->Rate(36), 0.1 * 0.8);  // sqrt(0.64)
  EXPECT_DOUBLE_EQ(schedule->Rate(50), 0.1 * std::sqrt(0.5));
  EXPECT_EQ(schedule->Rate(100), 0.0);
  EXPECT_EQ(schedule->Rate(1000), 0.0);
}

TEST(LrScheduleTest, StepMultipliesByGammaEveryInterval) {
  const auto schedule =
      LrSchedule::Create(LrScheduleKind::kStep, 1.0, 0, 10, 0.5);
  ASSERT_TRUE(schedule.ok());
  EXPECT_EQ(schedule->Rate(0), 1.0);
  EXPECT_EQ(schedule->Rate(9), 1.0);
  EXPECT_EQ(schedule->Rate(10), 0.5);
  EXPECT_EQ(schedule->Rate(19), 0.5);
  EXPECT_EQ(schedule->Rate(20), 0.25);
  EXPECT_EQ(schedule->Rate(35), 0.125);
}

TEST(LrScheduleTest, RejectsSchedulesThatCannotBeComputed) {
  EXPECT_FALSE(LrSchedule::Create(LrScheduleKind::kPoly, 0.1, 0, 1, 1).ok());
  EXPECT_FALSE(LrSchedule::Create(LrScheduleKind::kStep, 0.1, 10, 0, 0.1).ok());
  EXPECT_FALSE(LrSchedule::Create(LrScheduleKind::kStep, 0.1, 10, 5, NAN).ok());
  EXPECT_FALSE(
      LrSchedule::Create(LrScheduleKind::kConstant, -1.0, 10, 5, 1).ok());
  EXPECT_FALSE(
      LrSchedule::Create(LrScheduleKind::kConstant, INFINITY, 10, 5, 1).ok());
}

}  // namespace
}  // namespace tern
