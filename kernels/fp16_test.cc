// binary16 conversion: every half exactly, rounding checked at every
// midpoint against a reference that searches the table of halves, and
// against the CPU's own F16C conversion where it has one.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/fp16_math.h"
#include "kernels/kernel_util.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TERN_TEST_F16C 1
#else
#define TERN_TEST_F16C 0
#endif

namespace tern::kernels {
namespace {

bool IsNanHalf(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x3FF); }

// The value of a finite half from its fields, in double.
double HalfValue(uint16_t h) {
  const int exponent = (h >> 10) & 0x1F;
  const int mantissa = h & 0x3FF;
  const double magnitude = exponent == 0
                               ? std::ldexp(mantissa, -24)
                               : std::ldexp(1024 + mantissa, exponent - 25);
  return (h & 0x8000) ? -magnitude : magnitude;
}

// Nearest half by search, ties to the even bit pattern.
uint16_t ReferenceToHalf(float x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(x));
  if (std::isinf(x) || a >= 65520.0) return sign | 0x7C00;
  // Non-negative finite halves are ordered like their bit patterns.
  uint16_t lo = 0, hi = 0x7BFF;
  while (lo < hi) {  // largest pattern with value <= a
    const uint16_t mid = static_cast<uint16_t>((lo + hi + 1) / 2);
    if (HalfValue(mid) <= a)
      lo = mid;
    else
      hi = mid - 1;
  }
  const uint16_t up = static_cast<uint16_t>(lo + 1);  // 0x7C00 is 2^16 here
  const double below = a - HalfValue(lo);
  const double above = (up == 0x7C00 ? 65536.0 : HalfValue(up)) - a;
  uint16_t nearest =
      below < above ? lo : (above < below ? up : (lo % 2 ? up : lo));
  return sign | nearest;
}

// Where rounding can go wrong: each half, the midpoints between
// neighbours, and one float either side of them, with both signs.
std::vector<float> InterestingFloats() {
  std::vector<float> xs;
  for (uint32_t h = 0; h <= 0x7BFF; ++h) {
    const float v = static_cast<float>(HalfValue(static_cast<uint16_t>(h)));
    const float next =
        h == 0x7BFF ? 65536.0f : static_cast<float>(HalfValue(h + 1));
    const float mid = static_cast<float>((double{v} + next) / 2);
    for (const float x :
         {v, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
      xs.push_back(x);
      xs.push_back(-x);
    }
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (const float x :
       {0.0f, inf, 65519.996f, 65520.0f, 1e30f,
        std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
        std::numeric_limits<float>::denorm_min(), 2.98e-8f,
        2.9802322e-8f /* 2^-25 */}) {
    xs.push_back(x);
    xs.push_back(-x);
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 1000000; ++i) {
    float x;
    const uint32_t bits = rng();
    std::memcpy(&x, &bits, 4);
    if (!std::isnan(x)) xs.push_back(x);
  }
  return xs;
}

TEST(Fp16Test, EveryHalfConvertsExactlyAndBack) {
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    const float f = HalfToFloat(h);
    if (IsNanHalf(h)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << bits;
      // Sign and payload survive; the quiet bit is set.
      ASSERT_EQ(FloatToHalf(f), h | 0x200) << std::hex << bits;
      continue;
    }
    if ((h & 0x7C00) == 0x7C00) {
      ASSERT_TRUE(std::isinf(f));
    } else {
      ASSERT_EQ(static_cast<double>(f), HalfValue(h)) << std::hex << bits;
    }
    ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0);
    ASSERT_EQ(FloatToHalf(f), h) << std::hex << bits;
  }
}

TEST(Fp16Test, RoundsToNearestEvenLikeTheReference) {
  for (const float x : InterestingFloats()) {
    ASSERT_EQ(FloatToHalf(x), ReferenceToHalf(x)) << x;
  }
}

TEST(Fp16Test, KnownRoundings) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);            // tie goes to even: Inf
  EXPECT_EQ(FloatToHalf(1.0f + 1.0f / 2048), 0x3C00);  // tie, down to even
  EXPECT_EQ(FloatToHalf(1.0f + 3.0f / 2048), 0x3C02);  // tie, up to even
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // tie, to zero
  EXPECT_EQ(FloatToHalf(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7C00);
  const uint16_t nan = FloatToHalf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(IsNanHalf(nan));
  // A NaN whose payload is only in the low bits stays a NaN, not Inf.
  float low_nan;
  const uint32_t low_nan_bits = 0x7F800001u;
  std::memcpy(&low_nan, &low_nan_bits, 4);
  EXPECT_TRUE(IsNanHalf(FloatToHalf(low_nan)));
}

#if TERN_TEST_F16C

__attribute__((target("f16c"))) uint16_t HardwareToHalf(float x) {
  return static_cast<uint16_t>(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
}

__attribute__((target("f16c"))) float HardwareToFloat(uint16_t h) {
  return _cvtsh_ss(h);
}

TEST(Fp16Test, MatchesF16cBitForBit) {
  if (!CpuHasF16c()) GTEST_SKIP() << "no F16C on this CPU";
  std::vector<float> xs = InterestingFloats();
  // NaNs with assorted payloads and signs too.
  for (const uint32_t bits : {0x7FC00000u, 0xFFC00000u, 0x7F800001u,
                              0x7FBFFFFFu, 0xFF812345u, 0x7FFFE000u}) {
    float x;
    std::memcpy(&x, &bits, 4);
    xs.push_back(x);
  }
  for (const float x : xs) {
    ASSERT_EQ(FloatToHalf(x), HardwareToHalf(x)) << x;
  }
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const float ours = HalfToFloat(static_cast<uint16_t>(bits));
    const float theirs = HardwareToFloat(static_cast<uint16_t>(bits));
    ASSERT_EQ(std::memcmp(&ours, &theirs, 4), 0) << std::hex << bits;
  }
}

#endif  // TERN_TEST_F16C

}  // namespace
}  // namespace tern::kernels
