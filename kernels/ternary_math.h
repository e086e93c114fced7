// The per-element math of TernGrad (Wen et al., NIPS 2017), written once for
// the CPU kernels (terngrad_cpu.cc and its SIMD variants) and the CUDA
// kernels. Everything here is a pure function of its arguments, so the two
// devices produce the same bits for the same inputs.
//
// Floating-point rules that keep CPU and GPU bit-identical: every operation
// below is a single IEEE-754 float operation rounded to nearest even; there
// is no fused multiply-add (nvcc callers use __fdiv_rn/__fmul_rn or
// -fmad=false) and no reciprocal approximation.
#ifndef TERN_KERNELS_TERNARY_MATH_H_
#define TERN_KERNELS_TERNARY_MATH_H_

#include <cstdint>

#include "common/philox.h"

namespace tern::kernels {

// The largest number of ternary codes one sum may hold: sums stay exact in
// int32 and in float (|sum| <= 2^24), and 2N+1 fits the bit and radix
// layouts comfortably.
inline constexpr uint32_t kMaxSummands = uint32_t{1} << 24;

// Element i draws word i % 4 of RandomWords(stream, i / 4), and the group
// index is a uint32, so one chunk holds at most 2^34 elements.
inline constexpr uint64_t kMaxTernaryElements = uint64_t{4} << 32;

// The largest finite float, to test finiteness with one comparison (false
// for NaN and for +-Inf).
inline constexpr float kMaxFiniteFloat = 3.40282346638528859812e+38f;

// The summation order of the chunk statistics (ChunkStats in terngrad.h),
// which every device follows so the local scaler is the same bits
// everywhere: blocks of kStatsBlockSize elements, element i of a block in
// float lane i % kStatsLanes.
inline constexpr uint32_t kStatsLanes = 16;
inline constexpr uint32_t kStatsBlockSize = 4096;

// Stochastic ternarization of one element (Wen et al. 2017, Sec. 3.1, with
// the per-worker gradient clipping of Sec. 3.3):
//
//   q = sign(g) * b,   b ~ Bernoulli(p),   p = min(|g|, c) / s,
//
// s the scaler the code is decoded with (the shared s_k = max_i s_ik) and c
// the clip bound. The paper clips worker i's gradient at its own
// s_ik = min(c_0 * sigma_i, max|g_i|) before ternarizing with s_k
// (ClipRule::kWorker: c = s_ik); clipping at the shared scaler
// (ClipRule::kShared: c = s_k) is what tern did before. Either way
// E[s * q] = sign(g) * min(|g|, c). ClipBound() resolves c once per chunk.
// The Bernoulli draw compares the exact uniform u = UniformFloat(word) in
// [0, 1) with p computed as one rounded float division, so b = 1 exactly
// when u < p (and always when |g| >= c = s, where p == 1).
//
// Degenerate inputs give code 0: a NaN or infinite g (the worker checks the
// chunk's statistics before encoding and decides what a non-finite gradient
// means; the codec itself never turns garbage into +-s), a scaler that is
// not a positive finite number, and a clip bound that is not positive (or
// is NaN).
TERN_HOST_DEVICE int Ternarize(float g, float clip_bound, float scaler,
                               uint32_t word) {
  const float a = g < 0.0f ? -g : g;
  if (!(a <= kMaxFiniteFloat) || !(scaler > 0.0f) ||
      !(scaler <= kMaxFiniteFloat)) {
    return 0;
  }
  const float clipped = a < clip_bound ? a : clip_bound;
  const float p = clipped / scaler;
  if (!(UniformFloat(word) < p)) return 0;
  return g < 0.0f ? -1 : 1;
}

// Clipping at the scaler itself: Ternarize(g, scaler, scaler, word).
TERN_HOST_DEVICE int Ternarize(float g, float scaler, uint32_t word) {
  return Ternarize(g, scaler, scaler, word);
}

// The clip bound a chunk is ternarized with: min(clip_bound, scaler), so a
// bound above the scaler (or +Inf, or NaN: "none") clips at the scaler and
// p never exceeds 1.
TERN_HOST_DEVICE float ClipBound(float clip_bound, float scaler) {
  return clip_bound < scaler ? clip_bound : scaler;
}

// LAYOUT_TERNARY_2BIT field of a code: 00 = 0, 01 = +1, 10 = -1 (11 is
// invalid and never written).
TERN_HOST_DEVICE uint32_t TwoBitField(int code) {
  return code == 0 ? 0u : (code > 0 ? 1u : 2u);
}

// LAYOUT_TERNARY_BASE3 digit of a code: code + 1, in {0, 1, 2}.
TERN_HOST_DEVICE uint32_t Base3Digit(int code) {
  return static_cast<uint32_t>(code + 1);
}

// Decoding (Wen et al. 2017, Algorithm 1: the average of the N workers'
// ternary gradients with the shared scaler s): value = sum * s / N, computed
// as float(sum) * DecodeFactor(s, N). The factor is one rounded division
// done once per chunk; float(sum) is exact for |sum| <= 2^24. A push decodes
// with N = 1, where the factor is s itself.
TERN_HOST_DEVICE float DecodeFactor(float scaler, uint32_t num_summands) {
  return scaler / static_cast<float>(num_summands);
}

TERN_HOST_DEVICE float DecodeValue(int32_t sum, float factor) {
  return static_cast<float>(sum) * factor;
}

}  // namespace tern::kernels

#endif  // TERN_KERNELS_TERNARY_MATH_H_
