// One CUDA thread's work in the 1-bit encoder (onebit_gpu.cu), as
// __host__ __device__ code: where a thread's elements or draws lie, which
// group each belongs to, the runs it accumulates and hands to a Sink, and
// the last run it returns for the kernel to reduce over its warp. The
// kernels add only the CUDA parts (the CTA's chunk, warp reductions,
// atomics); onebit_tile_test.cc runs the same functions over an emulated
// grid on the host and compares with the CPU codec, so the decomposition
// is tested on machines without a GPU.
//
// A Sink has Max(g, max_bits), Sums(g, const RunSums&) and Bad(flat):
// group g of the chunk gets a larger magnitude or a run's sums; the
// compensated value at flat index `flat` is not finite. The device's sink
// uses atomics, the host emulation plain arithmetic: the group sums are
// integers, so the order of the runs does not matter (onebit_math.h).
#ifndef TERN_KERNELS_ONEBIT_TILE_CUDA_H_
#define TERN_KERNELS_ONEBIT_TILE_CUDA_H_

#include <cstdint>

#include "common/philox.h"
#include "kernels/onebit_math.h"
#include "kernels/ternary_math.h"

namespace tern::kernels::cuda {

// The tables and accumulators of the 1-bit kernels (onebit_cuda_launch.h),
// plain C++ so that the host emulation can use them.

inline constexpr uint32_t kOneBitThreads = 256;
// A thread's elements make one byte of sign bits.
inline constexpr uint64_t kOneBitElementsPerCta = uint64_t{kOneBitThreads} * 8;
// A thread's draws are the four words of one Philox call.
inline constexpr uint64_t kOneBitDrawsPerCta = uint64_t{kOneBitThreads} * 4;

struct OneBitChunk {
  uint64_t offset;         // first element in values (and residual)
  uint64_t count;          // elements
  uint64_t group_size;     // >= 1 (OneBitGroupSize)
  uint64_t first_group;    // its first group in the group arrays
  uint64_t packed_offset;  // first byte of its sign bits
  uint32_t key;            // RandomStream::chunk of its draws
  uint32_t sample_size;    // 0, or groups longer than this are sampled
};

// One group's accumulators, zero before the first pass.
struct OneBitGroupSums {
  unsigned long long positive;  // int64 fixed-point sums, two's complement
  unsigned long long negative;
  uint32_t max_bits;   // onebit::MagnitudeBits of the largest summand
  uint32_t positives;  // non-negative summands (< 2^32: a group's length
                       // fits the uint32 header)
};

// The grid of a pass: its CTA table.
struct OneBitGrid {
  const uint32_t* first_cta;  // device, num_chunks entries
  uint32_t num_ctas;
};

// The inputs every pass reads. residual may be null (no compensation).
struct OneBitInputs {
  const float* values;
  const float* residual;
  const OneBitChunk* chunks;  // device
  uint32_t num_chunks;
  uint64_t seed;
  uint32_t step;
  uint32_t worker;
};

}  // namespace tern::kernels::cuda

namespace tern::kernels::onebit_tile {

using cuda::OneBitChunk;
using cuda::OneBitInputs;

inline constexpr uint32_t kWarp = 32;
inline constexpr uint32_t kElementsPerThread = 8;
inline constexpr uint32_t kDrawsPerThread = 4;

TERN_HOST_DEVICE uint64_t NumGroups(const OneBitChunk& chunk) {
  return chunk.count / chunk.group_size +
         (chunk.count % chunk.group_size != 0 ? 1 : 0);
}

// Group g < NumGroups(chunk).
TERN_HOST_DEVICE uint64_t GroupLength(const OneBitChunk& chunk, uint64_t g) {
  const uint64_t rest = chunk.count - g * chunk.group_size;
  return rest < chunk.group_size ? rest : chunk.group_size;
}

// GroupMeans: a group is summed exactly unless the codec samples and the
// group is longer than the sample.
TERN_HOST_DEVICE bool IsSampled(const OneBitChunk& chunk, uint64_t g) {
  return chunk.sample_size != 0 && GroupLength(chunk, g) > chunk.sample_size;
}

// The number of summands of group g: its length, or the sample's.
TERN_HOST_DEVICE uint64_t SummandCount(const OneBitChunk& chunk, uint64_t g) {
  return IsSampled(chunk, g) ? chunk.sample_size : GroupLength(chunk, g);
}

// The (compensated) value at a flat index: one float addition, as
// ErrorFeedback::Compensate.
TERN_HOST_DEVICE float Compensated(const OneBitInputs& in, uint64_t flat) {
  const float value = in.values[flat];
  if (in.residual == nullptr) return value;
#if defined(__CUDA_ARCH__)
  return __fadd_rn(value, in.residual[flat]);
#else
  return value + in.residual[flat];
#endif
}

// Fixed-point sums of one run of summands of one group.
struct RunSums {
  int64_t positive = 0;
  int64_t negative = 0;
  uint32_t positives = 0;

  TERN_HOST_DEVICE void Add(float value, int shift) {
    const int64_t fixed = onebit::ToFixed(value, shift);
    if (value >= 0.0f) {
      positive += fixed;
      ++positives;
    } else {
      negative += fixed;
    }
  }
  TERN_HOST_DEVICE bool Empty() const {
    return positive == 0 && negative == 0 && positives == 0;
  }
};

// ---------------------------------------------------------------------------
// Element passes: thread `thread` of CTA `cta` (counted within the chunk)
// owns elements [first, first + n) of the chunk, one byte of sign bits.

struct ElementTile {
  uint64_t first;
  uint32_t n;  // 0 for a thread past the chunk's end in an active warp
  // The group of all of the warp's elements, when they share one: then
  // the kernel reduces the threads' last runs over the warp.
  bool warp_in_one_group;
  uint64_t warp_group;
};

// False (for the whole warp alike) when the thread's warp has no element.
TERN_HOST_DEVICE bool LocateElements(const OneBitChunk& chunk, uint64_t cta,
                                     uint32_t thread, ElementTile* tile) {
  const uint64_t cta_first = cta * cuda::kOneBitElementsPerCta;
  const uint64_t warp_first =
      cta_first + uint64_t{thread / kWarp} * kWarp * kElementsPerThread;
  const uint64_t count = chunk.count;
  if (warp_first >= count) return false;
  tile->first = cta_first + uint64_t{thread} * kElementsPerThread;
  tile->n = tile->first >= count ? 0
            : count - tile->first >= kElementsPerThread
                ? kElementsPerThread
                : static_cast<uint32_t>(count - tile->first);
  const uint64_t warp_end = warp_first + kWarp * kElementsPerThread;
  const uint64_t warp_last = (warp_end < count ? warp_end : count) - 1;
  tile->warp_group = warp_first / chunk.group_size;
  tile->warp_in_one_group = warp_last / chunk.group_size == tile->warp_group;
  return true;
}

// Whether the thread has anything to do: a thread past the end still joins
// its warp's reductions when the warp is reduced.
TERN_HOST_DEVICE bool TakesPart(const ElementTile& t) {
  return t.n != 0 || t.warp_in_one_group;
}

// The group of the thread's first element (the warp's, when reduced).
TERN_HOST_DEVICE uint64_t FirstGroup(const OneBitChunk& chunk,
                                     const ElementTile& t) {
  return t.warp_in_one_group ? t.warp_group : t.first / chunk.group_size;
}

struct MaxRun {
  uint64_t group;
  uint32_t max_bits;
};

// Pass 1: every non-finite value to sink.Bad; the largest magnitude of
// each run of an exactly-summed group to sink.Max, except the last run,
// which is returned (the kernel reduces it over the warp, or hands it to
// the sink itself when the group is summed exactly).
template <typename Sink>
TERN_HOST_DEVICE MaxRun GroupMaxThread(const OneBitInputs& in,
                                       const OneBitChunk& chunk,
                                       const ElementTile& t, Sink& sink) {
  const uint64_t gs = chunk.group_size;
  MaxRun run{FirstGroup(chunk, t), 0};
  uint64_t group_end = (run.group + 1) * gs;
  for (uint32_t k = 0; k < t.n; ++k) {
    const uint64_t i = t.first + k;
    const float value = Compensated(in, chunk.offset + i);
    if (!(value <= kMaxFiniteFloat && value >= -kMaxFiniteFloat)) {
      sink.Bad(chunk.offset + i);
    }
    if (i >= group_end) {  // only when the warp spans several groups
      if (!IsSampled(chunk, run.group)) sink.Max(run.group, run.max_bits);
      run = MaxRun{i / gs, 0};
      group_end = (run.group + 1) * gs;
    }
    const uint32_t bits = onebit::MagnitudeBits(value);
    run.max_bits = bits > run.max_bits ? bits : run.max_bits;
  }
  return run;
}

struct SumRun {
  uint64_t group;
  bool exact;  // the group is summed over its elements, not sampled
  RunSums sums;
};

// Pass 3: the thread's byte of sign bits (to *byte; meaningful when n > 0)
// and the fixed-point sums of its runs of exactly-summed groups, all but
// the last to sink.Sums. max_bits_of(g) is group g's largest magnitude
// from passes 1 and 2.
template <typename Sink, typename MaxBitsOf>
TERN_HOST_DEVICE SumRun GroupSumsThread(const OneBitInputs& in,
                                        const OneBitChunk& chunk,
                                        const ElementTile& t,
                                        const MaxBitsOf& max_bits_of,
                                        Sink& sink, uint32_t* byte) {
  const uint64_t gs = chunk.group_size;
  SumRun run{FirstGroup(chunk, t), false, RunSums()};
  run.exact = !IsSampled(chunk, run.group);
  int shift = run.exact ? onebit::FixedShift(max_bits_of(run.group),
                                             SummandCount(chunk, run.group))
                        : 0;
  uint64_t group_end = (run.group + 1) * gs;
  uint32_t bits = 0;
  for (uint32_t k = 0; k < t.n; ++k) {
    const uint64_t i = t.first + k;
    const float value = Compensated(in, chunk.offset + i);
    bits |= static_cast<uint32_t>(value >= 0.0f) << k;
    if (i >= group_end) {
      if (run.exact) sink.Sums(run.group, run.sums);
      run = SumRun{i / gs, false, RunSums()};
      run.exact = !IsSampled(chunk, run.group);
      shift = run.exact ? onebit::FixedShift(max_bits_of(run.group),
                                             SummandCount(chunk, run.group))
                        : 0;
      group_end = (run.group + 1) * gs;
    }
    if (run.exact) run.sums.Add(value, shift);
  }
  *byte = bits;
  return run;
}

// Pass 6 (error feedback): next_residual = compensated - decoded for the
// thread's elements; a result that is not finite to sink.Bad. `means` are
// the chunk's own (two per group).
template <typename Sink>
TERN_HOST_DEVICE void ResidualThread(const OneBitInputs& in,
                                     const OneBitChunk& chunk,
                                     const ElementTile& t, const float* means,
                                     float* next_residual, Sink& sink) {
  for (uint32_t k = 0; k < t.n; ++k) {
    const uint64_t i = t.first + k;
    const uint64_t flat = chunk.offset + i;
    const float value = Compensated(in, flat);
    const float* group_means = means + 2 * (i / chunk.group_size);
    const float decoded = value >= 0.0f ? group_means[0] : group_means[1];
#if defined(__CUDA_ARCH__)
    const float next = __fsub_rn(value, decoded);
#else
    const float next = value - decoded;
#endif
    next_residual[flat] = next;
    if (!(next <= kMaxFiniteFloat && next >= -kMaxFiniteFloat)) {
      sink.Bad(flat);
    }
  }
}

// ---------------------------------------------------------------------------
// Draw passes: draw d of a chunk belongs to group d / sample_size
// (GroupMeans' numbering); a thread's four draws are one Philox call.

struct DrawTile {
  uint64_t first;      // the thread's first draw, a multiple of 4
  uint64_t num_draws;  // the chunk's: NumGroups * sample_size
  bool warp_in_one_group;
  uint64_t warp_group;
};

// False (for the whole warp alike) when the warp has no draw.
TERN_HOST_DEVICE bool LocateDraws(const OneBitChunk& chunk, uint64_t cta,
                                  uint32_t thread, DrawTile* tile) {
  const uint64_t s = chunk.sample_size;
  tile->num_draws = NumGroups(chunk) * s;
  const uint64_t cta_first = cta * cuda::kOneBitDrawsPerCta;
  const uint64_t warp_first =
      cta_first + uint64_t{thread / kWarp} * kWarp * kDrawsPerThread;
  if (warp_first >= tile->num_draws) return false;
  tile->first = cta_first + uint64_t{thread} * kDrawsPerThread;
  const uint64_t warp_end = warp_first + kWarp * kDrawsPerThread;
  const uint64_t warp_last =
      (warp_end < tile->num_draws ? warp_end : tile->num_draws) - 1;
  tile->warp_group = warp_first / s;
  tile->warp_in_one_group = warp_last / s == tile->warp_group;
  return true;
}

// Draw k (< 4) of the thread, whose Philox words are `words`: false when
// it is past the chunk's draws or its group is summed exactly (the short
// last group); else its group and the value it picks.
TERN_HOST_DEVICE bool DrawnValue(const OneBitInputs& in,
                                 const OneBitChunk& chunk, const DrawTile& t,
                                 const PhiloxCounter& words, uint32_t k,
                                 uint64_t* g, float* value) {
  const uint64_t d = t.first + k;
  if (d >= t.num_draws) return false;
  *g = d / chunk.sample_size;
  if (!IsSampled(chunk, *g)) return false;
  const uint64_t length = GroupLength(chunk, *g);
  const uint64_t index = (uint64_t{words.v[k]} * length) >> 32;
  *value = Compensated(in, chunk.offset + *g * chunk.group_size + index);
  return true;
}

TERN_HOST_DEVICE PhiloxCounter DrawWords(const OneBitInputs& in,
                                         const OneBitChunk& chunk,
                                         const DrawTile& t) {
  const RandomStream stream{in.seed, in.step, chunk.key, in.worker};
  return RandomWords(stream, static_cast<uint32_t>(t.first / 4));
}

// Pass 2: the largest drawn magnitude. Returns the thread's maximum when
// the warp lies in one group (the kernel reduces it); otherwise hands
// every draw to sink.Max and returns 0.
template <typename Sink>
TERN_HOST_DEVICE uint32_t SampleMaxThread(const OneBitInputs& in,
                                          const OneBitChunk& chunk,
                                          const DrawTile& t, Sink& sink) {
  const PhiloxCounter words = DrawWords(in, chunk, t);
  uint32_t max_bits = 0;
  for (uint32_t k = 0; k < kDrawsPerThread; ++k) {
    uint64_t g;
    float value;
    if (!DrawnValue(in, chunk, t, words, k, &g, &value)) continue;
    const uint32_t bits = onebit::MagnitudeBits(value);
    if (t.warp_in_one_group) {
      max_bits = bits > max_bits ? bits : max_bits;
    } else {
      sink.Max(g, bits);
    }
  }
  return max_bits;
}

// Pass 4: the fixed-point sums of the draws; as SampleMaxThread, the
// thread's sums come back when the warp lies in one group.
template <typename Sink, typename MaxBitsOf>
TERN_HOST_DEVICE RunSums SampleSumsThread(const OneBitInputs& in,
                                          const OneBitChunk& chunk,
                                          const DrawTile& t,
                                          const MaxBitsOf& max_bits_of,
                                          Sink& sink) {
  const PhiloxCounter words = DrawWords(in, chunk, t);
  RunSums warp_part;
  for (uint32_t k = 0; k < kDrawsPerThread; ++k) {
    uint64_t g;
    float value;
    if (!DrawnValue(in, chunk, t, words, k, &g, &value)) continue;
    const int shift = onebit::FixedShift(max_bits_of(g), chunk.sample_size);
    if (t.warp_in_one_group) {
      warp_part.Add(value, shift);
    } else {
      RunSums one;
      one.Add(value, shift);
      sink.Sums(g, one);
    }
  }
  return warp_part;
}

// Pass 5: group g's two means from its accumulated sums.
TERN_HOST_DEVICE void GroupMeansOf(const OneBitChunk& chunk, uint64_t g,
                                   uint32_t max_bits, int64_t positive_sum,
                                   int64_t negative_sum, uint32_t positives,
                                   float* out) {
  const uint64_t count = SummandCount(chunk, g);
  const int shift = onebit::FixedShift(max_bits, count);
  const uint64_t negatives = count - positives;
  out[0] = positives == 0 ? 0.0f
                          : onebit::FixedMean(positive_sum, shift, positives);
  out[1] = negatives == 0 ? 0.0f
                          : onebit::FixedMean(negative_sum, shift, negatives);
}

}  // namespace tern::kernels::onebit_tile

#endif  // TERN_KERNELS_ONEBIT_TILE_CUDA_H_
