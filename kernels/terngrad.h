// TernGrad kernels over raw spans (Wen et al., "TernGrad: Ternary Gradients
// to Reduce Communication in Distributed Deep Learning", NIPS 2017): the
// chunk statistics and scaler of the worker, ternarize-and-pack, the
// server's integer sums, and the packing of those sums for the pull. The
// byte layouts are the ones proto/tern/v1/payload.proto documents; the
// per-element math is in kernels/ternary_math.h.
//
// All functions are pure and thread-compatible: they touch only their
// arguments. Functions returning absl::Status validate bytes that came from
// the network and never read past a span; functions returning void have
// preconditions on sizes (checked, they abort on our own bugs) but not on
// values. Element counts are at most kMaxTernaryElements and summand counts
// N are in [1, kMaxSummands]; sizes computed from larger counts are
// meaningless.
#ifndef TERN_KERNELS_TERNGRAD_H_
#define TERN_KERNELS_TERNGRAD_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/philox.h"
#include "kernels/payload.h"
#include "kernels/ternary_math.h"

namespace tern::kernels {

// First and second moments and the largest magnitude of a chunk, from one
// pass over it. Non-finite elements (NaN, +-Inf) are counted and left out of
// the moments, so the scaler stays finite; the worker decides what a
// non-finite gradient means (DESIGN section 7).
//
// The moments are of g - shift, with shift the chunk's first value (0 if
// that is not finite): E[g^2] - E[g]^2 in floats cancels badly when |mean|
// is large next to sigma (a constant chunk would get sigma ~ 1e-4 |mean|
// instead of 0), while the shifted sums stay small (the "shifted data"
// algorithm, Chan, Golub & LeVeque 1983).
//
// Summation order is fixed, so the result is bit-identical on every CPU
// (and on the GPU kernels, which follow the same order): elements are cut
// into blocks of kStatsBlockSize; inside a block element i goes to float
// lane i % kStatsLanes (d = g - shift; sum += d; then sum_squares += d * d
// with the product rounded on its own); each block's lanes are then added,
// lane 0 first, to double totals.
struct ChunkStats {
  uint64_t count = 0;      // finite elements, the ones the moments cover
  uint64_t nonfinite = 0;  // NaN and infinite elements
  float shift = 0.0f;
  double shifted_sum = 0.0;          // sum of (g - shift)
  double shifted_sum_squares = 0.0;  // sum of (g - shift)^2
  float max_abs = 0.0f;  // over the finite elements; 0 when there are none

  double mean() const;
  // Population standard deviation over the finite elements.
  double stddev() const;
};

ChunkStats ComputeStats(absl::Span<const float> values);

// The worker's local scaler s = min(c * sigma, max|g|) (Wen et al. 2017,
// Sec. 3.3: clipping at c standard deviations, c = 2.5 by default).
// clip == 0 disables clipping: s = max|g|.
float LocalScaler(const ChunkStats& stats, float clip);

// Bytes of a packed ternary chunk: ceil(n / 4) for kTernary2Bit,
// ceil(n / 5) for kTernaryBase3, 0 for any other layout.
size_t PackedTernaryBytes(uint64_t num_elements, Layout layout);

// Ternarizes `values` with `scaler`, clipped at ClipBound(clip_bound,
// scaler) (Ternarize() in ternary_math.h, element i drawing from (stream,
// i)), and packs the codes into `out` in `layout` (kTernary2Bit or
// kTernaryBase3). Requires out.size() == PackedTernaryBytes(values.size(),
// layout). A scaler that is not a positive finite number, or a clip bound
// that is not positive, yields all-zero codes.
void QuantizePack(absl::Span<const float> values, float clip_bound,
                  float scaler, const RandomStream& stream, Layout layout,
                  absl::Span<uint8_t> out);

// Clipping at the scaler itself (ClipRule::kShared, or a worker's own
// scaler): QuantizePack(values, scaler, scaler, stream, layout, out).
inline void QuantizePack(absl::Span<const float> values, float scaler,
                         const RandomStream& stream, Layout layout,
                         absl::Span<uint8_t> out) {
  QuantizePack(values, scaler, scaler, stream, layout, out);
}

// Checks a packed chunk of `num_elements` codes as UnpackTernary does (its
// length, every code, the padding) without writing the codes anywhere: a
// server checks a whole push before it adds any chunk of it.
absl::Status CheckTernaryCodes(absl::Span<const uint8_t> packed,
                               uint64_t num_elements, Layout layout);

// The codes in {-1, 0, +1} of a packed chunk of `num_elements` values.
// Validates the length, every code and the padding; on error `codes` is
// unspecified.
absl::Status UnpackTernary(absl::Span<const uint8_t> packed,
                           uint64_t num_elements, Layout layout,
                           absl::Span<int8_t> codes);

// sums[i] += code[i] for one worker's packed push: the server-side
// reduction. Validates all of `packed` first; on error nothing is added.
absl::Status AccumulateTernary(absl::Span<const uint8_t> packed,
                               uint64_t num_elements, Layout layout,
                               absl::Span<int32_t> sums);

// sums[i] = code[i]: AccumulateTernary into sums that were all zero,
// without needing them zeroed first. Validates all of `packed` first; on
// error nothing is written.
absl::Status AssignTernary(absl::Span<const uint8_t> packed,
                           uint64_t num_elements, Layout layout,
                           absl::Span<int32_t> sums);

// out[i] = code[i] * scaler (DecodeValue with N = 1): a push read back, e.g.
// by a WeightGrad local server that applies each gradient on its own. On
// error `out` is unspecified.
absl::Status DecodeTernary(absl::Span<const uint8_t> packed,
                           uint64_t num_elements, Layout layout, float scaler,
                           absl::Span<float> out);

// Bits per element of LAYOUT_SUM_BITS: ceil(log2(2N + 1)).
uint32_t SumBits(uint32_t num_summands);

// Digits per 64-bit word of LAYOUT_SUM_RADIX: the largest k with
// (2N + 1)^k <= 2^64.
uint32_t SumRadixDigitsPerWord(uint32_t num_summands);

// Bytes of `num_elements` packed sums of `num_summands` codes in `layout`
// (kSumBits or kSumRadix; 0 for any other layout, kSumHuffman included,
// whose size depends on the sums: PackSumsHuffman in sum_huffman.h).
size_t PackedSumBytes(uint64_t num_elements, uint32_t num_summands,
                      Layout layout);

// Packs sums in [-N, N] (N = num_summands) into `out` in `layout`.
// Requires out.size() == PackedSumBytes(sums.size(), N, layout) and every
// sum in range (the server only adds validated codes).
void PackSums(absl::Span<const int32_t> sums, uint32_t num_summands,
              Layout layout, absl::Span<uint8_t> out);

// The sums of a packed pull in any sum layout (kSumHuffman too). Validates
// the length, every field, word or code, and the padding; on error `sums`
// is unspecified.
absl::Status UnpackSums(absl::Span<const uint8_t> packed, uint64_t num_elements,
                        uint32_t num_summands, Layout layout,
                        absl::Span<int32_t> sums);

// out[i] = DecodeValue(sum[i], DecodeFactor(scaler, N)): the average of the
// N workers' ternary gradients. Validates like UnpackSums; on error `out`
// is unspecified.
absl::Status DecodeSums(absl::Span<const uint8_t> packed, uint64_t num_elements,
                        uint32_t num_summands, Layout layout, float scaler,
                        absl::Span<float> out);

}  // namespace tern::kernels

#endif  // TERN_KERNELS_TERNGRAD_H_
