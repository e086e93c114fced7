#include "core/straggler_watch.h"

#include "gtest/gtest.h"

namespace tern::core {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1000);

TEST(StragglerWatchTest, DueOnceWarnAfterPastTheFirstArrival) {
  StragglerWatch watch(absl::Seconds(10));
  EXPECT_FALSE(watch.Due(kStart + absl::Seconds(60)));  // nobody arrived
  watch.Arrive(kStart);
  watch.Arrive(kStart + absl::Seconds(5));  // the clock stays at the first
  EXPECT_FALSE(watch.Due(kStart + absl::Seconds(9)));
  EXPECT_TRUE(watch.Due(kStart + absl::Seconds(10)));
  EXPECT_EQ(watch.Waited(kStart + absl::Seconds(12)), absl::Seconds(12));
  EXPECT_FALSE(watch.Due(kStart + absl::Seconds(20)));  // once per barrier
  watch.Reset();
  EXPECT_FALSE(watch.Due(kStart + absl::Seconds(30)));
  watch.Arrive(kStart + absl::Seconds(30));
  EXPECT_TRUE(watch.Due(kStart + absl::Seconds(41)));
}

TEST(StragglerWatchTest, ANonPositiveWarnAfterIsNeverDue) {
  StragglerWatch watch(absl::ZeroDuration());
  watch.Arrive(kStart);
  EXPECT_FALSE(watch.Due(kStart + absl::Hours(1)));
}

}  // namespace
}  // namespace tern::core
