#include "kernels/onebit_math.h"

#include <cstdint>
#include <limits>

#include "gtest/gtest.h"

namespace tern::kernels::onebit {
namespace {

TEST(OneBitMathTest, ToFixedTruncatesTheScaledValue) {
  EXPECT_EQ(ToFixed(1.5f, 4), 24);
  EXPECT_EQ(ToFixed(-1.75f, 1), -3);  // trunc(-3.5)
  EXPECT_EQ(ToFixed(0.0f, 100), 0);
  // The largest summand of a group of 2^20 at its group's shift.
  const float largest = 3.0f;
  const int shift = FixedShift(MagnitudeBits(largest), uint64_t{1} << 20);
  EXPECT_EQ(ToFixed(largest, shift), int64_t{3} << (shift));
  EXPECT_LT(ToFixed(largest, shift), int64_t{1} << 62);
}

// A group holding a NaN or an infinity is refused, but its sums are formed
// first (the GPU adds before it knows); the conversion must stay defined.
class ToFixedOutOfRangeTest : public ::testing::TestWithParam<float> {};

TEST_P(ToFixedOutOfRangeTest, IsZero) {
  const float v = GetParam();
  // The shift a group with this value as its largest magnitude would get.
  const int shift = FixedShift(MagnitudeBits(v), 1000);
  EXPECT_EQ(ToFixed(v, shift), 0);
  EXPECT_EQ(ToFixed(v, 0), 0);
}

INSTANTIATE_TEST_SUITE_P(
    NonFinite, ToFixedOutOfRangeTest,
    ::testing::Values(std::numeric_limits<float>::quiet_NaN(),
                      -std::numeric_limits<float>::quiet_NaN(),
                      std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()));

TEST(OneBitMathTest, ToFixedOfAValueAboveItsGroupsLargestIsZero) {
  // Not a group's own value: 2^64 does not fit int64 at shift 0.
  EXPECT_EQ(ToFixed(18446744073709551616.0f, 0), 0);
  EXPECT_EQ(ToFixed(-18446744073709551616.0f, 0), 0);
  EXPECT_EQ(ToFixed(1.0f, 62), int64_t{1} << 62);
}

}  // namespace
}  // namespace tern::kernels::onebit
