// IEEE-754 binary16 <-> binary32 conversion in integer arithmetic, for the
// fp16 codec on CPU and GPU alike: no hardware conversion instruction is
// assumed, so both devices produce the same bits, and the results equal
// what F16C (vcvtps2ph with round-to-nearest-even, vcvtph2ps) produces.
#ifndef TERN_KERNELS_FP16_MATH_H_
#define TERN_KERNELS_FP16_MATH_H_

#include <cstdint>
#include <cstring>

#include "common/philox.h"  // TERN_HOST_DEVICE

namespace tern::kernels {

TERN_HOST_DEVICE uint32_t FloatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
#endif
}

TERN_HOST_DEVICE float BitsToFloat(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
#endif
}

// Rounds to the nearest binary16, ties to even. Overflow goes to +-Inf
// (from 65520 up, the midpoint between 65504 and 2^16); values at or below
// half of the smallest subnormal (2^-25) go to +-0. Infinities stay
// infinite; a NaN stays a NaN with its sign and the top 10 bits of its
// payload, made quiet so a payload living only in the low bits cannot turn
// into Inf.
TERN_HOST_DEVICE uint16_t FloatToHalf(float f) {
  const uint32_t bits = FloatBits(f);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude >= 0x7F800000u) {  // Inf or NaN
    const uint32_t nan_bits =
        magnitude > 0x7F800000u ? 0x200u | ((magnitude >> 13) & 0x3FFu) : 0u;
    return static_cast<uint16_t>(sign | 0x7C00u | nan_bits);
  }
  if (magnitude >= 0x477FF000u) {  // >= 65520.0f
    return static_cast<uint16_t>(sign | 0x7C00u);
  }
  if (magnitude < 0x38800000u) {     // below 2^-14: a subnormal half or zero
    if (magnitude <= 0x33000000u) {  // <= 2^-25
      return static_cast<uint16_t>(sign);
    }
    // value = mantissa * 2^(exponent - 150) and the result counts units of
    // 2^-24, so shift the 24-bit mantissa right by 126 - exponent, which
    // is in [14, 24] here.
    const uint32_t exponent = magnitude >> 23;
    const uint32_t mantissa = (magnitude & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126u - exponent;
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1u);
    const uint32_t midpoint = 1u << (shift - 1u);
    if (rest > midpoint || (rest == midpoint && (half & 1u) != 0u)) ++half;
    // A carry into bit 10 yields the smallest normal half, as it should.
    return static_cast<uint16_t>(sign | half);
  }
  // Normal: rebias the exponent (127 -> 15) and keep 10 mantissa bits. A
  // carry from rounding moves into the exponent, which is again correct;
  // it cannot reach Inf because of the overflow test above.
  uint32_t half = (magnitude >> 13) - ((127u - 15u) << 10);
  const uint32_t rest = magnitude & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u) != 0u)) ++half;
  return static_cast<uint16_t>(sign | half);
}

// Exact: every binary16 value is a binary32 value. A NaN keeps its sign and
// payload and is made quiet, as F16C's vcvtph2ps does.
TERN_HOST_DEVICE float HalfToFloat(uint16_t half) {
  const uint32_t sign = (static_cast<uint32_t>(half) & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1Fu;
  const uint32_t mantissa = half & 0x3FFu;
  if (exponent == 0x1Fu) {
    const uint32_t quiet = mantissa != 0u ? 0x400000u : 0u;
    return BitsToFloat(sign | 0x7F800000u | quiet | (mantissa << 13));
  }
  if (exponent != 0u) {
    return BitsToFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  }
  // Zero or subnormal: mantissa * 2^-24, exact in float.
  const float magnitude =
      static_cast<float>(mantissa) * 5.9604644775390625e-08f;  // 2^-24
  return sign != 0u ? -magnitude : magnitude;
}

}  // namespace tern::kernels

#endif  // TERN_KERNELS_FP16_MATH_H_
