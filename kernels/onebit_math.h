// The arithmetic of 1-bit quantization's group means (GroupMeans in
// onebit.h), written once for the CPU (onebit.cc) and the CUDA kernels
// (onebit_gpu.cu), so both produce the same bits.
//
// The means are sums divided by counts, and a GPU adds a group's values in
// whatever order its threads and atomics finish. Floating-point sums depend
// on that order; integer sums do not. So every summand v of a group is
// first turned into the fixed-point integer trunc(v * 2^s), with one shift
// s per group chosen from the group's largest magnitude m and its number of
// summands c so that c of them cannot overflow int64:
//
//   m < 2^e,  c <= 2^h,  s = 62 - h - e   =>   |sum| < c * 2^(62 - h) <= 2^62.
//
// A summand loses less than 2^-s = m * 2^(h - 62) (about 2^-40 of m for a
// group of 2^20), far below a float's rounding of the mean. The mean is
// then float(double(sum) * 2^-s / count): three IEEE operations rounded to
// nearest, the same on every device.
#ifndef TERN_KERNELS_ONEBIT_MATH_H_
#define TERN_KERNELS_ONEBIT_MATH_H_

#include <cstdint>
#include <cstring>

#include "common/philox.h"

namespace tern::kernels::onebit {

// The bits of |v|: for finite values their unsigned order is the order of
// the magnitudes, so a group's largest magnitude is an integer maximum
// (an atomicMax on the GPU).
TERN_HOST_DEVICE uint32_t MagnitudeBits(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return bits & 0x7FFFFFFFu;
}

// 2^k as a double, exact for -1022 <= k <= 1023.
TERN_HOST_DEVICE double PowerOfTwo(int k) {
  const uint64_t bits = static_cast<uint64_t>(k + 1023) << 52;
  double value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// ceil(log2(count)) for count >= 1.
TERN_HOST_DEVICE int CeilLog2(uint64_t count) {
  int h = 0;
  while (h < 64 && (uint64_t{1} << h) < count) ++h;
  return h;
}

// The shift s of a group whose largest magnitude has MagnitudeBits
// `max_bits` (a finite value) and which has `count` >= 1 summands. The
// magnitude is below 2^e with e = (biased exponent) - 126, at least -125
// for subnormals and zero; so s lies in [62 - 34 - 128, 62 + 125] for
// count <= 2^34, and 2^s and 2^-s are normal doubles.
TERN_HOST_DEVICE int FixedShift(uint32_t max_bits, uint64_t count) {
  const int biased = static_cast<int>(max_bits >> 23);
  const int e = (biased > 1 ? biased : 1) - 126;
  return 62 - CeilLog2(count) - e;
}

// trunc(v * 2^shift) for |v| <= the group's largest magnitude: the product
// is exact in double and below 2^62 in magnitude. A group that holds a NaN
// or an infinity is refused by its caller, but its sums are still formed
// (the GPU adds before it knows); converting such a product to an integer
// is undefined behaviour in C++, so anything outside int64's range,
// non-finite products included, is 0.
TERN_HOST_DEVICE int64_t ToFixed(float v, int shift) {
  const double scaled = static_cast<double>(v) * PowerOfTwo(shift);
  constexpr double kLimit = 9223372036854775808.0;  // 2^63
  return scaled < kLimit && scaled > -kLimit ? static_cast<int64_t>(scaled)
                                             : 0;
}

// The mean of `count` >= 1 summands whose fixed-point sum is `sum`.
TERN_HOST_DEVICE float FixedMean(int64_t sum, int shift, uint64_t count) {
  const double total = static_cast<double>(sum) * PowerOfTwo(-shift);
  return static_cast<float>(total / static_cast<double>(count));
}

}  // namespace tern::kernels::onebit

#endif  // TERN_KERNELS_ONEBIT_MATH_H_
