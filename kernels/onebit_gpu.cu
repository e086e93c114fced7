// CUDA twin of onebit.cc's encoder (GroupMeans + PackSignBits), with error
// feedback: see onebit_cuda_launch.h for the passes. The sums are integers
// (onebit_math.h), so atomics may add them in any order and the means are
// still the CPU's bits.
//
// A thread owns 8 consecutive elements of a chunk (one byte of sign bits)
// or 4 consecutive draws (one Philox call). Groups are reduced over a warp
// when the warp's elements or draws all fall in one group (the common case:
// groups are rows of hundreds of values or whole chunks), so a big group
// costs one atomic per warp instead of one per element; otherwise every
// thread flushes its runs on its own.
//
// No Abseil here: nvcc compiles this file outside Bazel's toolchain
// (third_party/cuda.bzl); onebit_cuda.cc wraps it.
#include <cuda_runtime.h>

#include <cstdint>

#include "common/philox.h"
#include "kernels/onebit_cuda_launch.h"
#include "kernels/onebit_math.h"
#include "kernels/ternary_math.h"
#include "kernels/terngrad_tile_cuda.h"

namespace tern::kernels::cuda {
namespace {

constexpr uint32_t kFullMask = 0xFFFFFFFFu;

__device__ __forceinline__ uint64_t GroupLength(const OneBitChunk& chunk,
                                                uint64_t g) {
  const uint64_t begin = g * chunk.group_size;
  const uint64_t rest = chunk.count - begin;
  return rest < chunk.group_size ? rest : chunk.group_size;
}

// GroupMeans: a group is summed exactly unless the codec samples and the
// group is longer than the sample.
__device__ __forceinline__ bool IsSampled(const OneBitChunk& chunk,
                                          uint64_t g) {
  return chunk.sample_size != 0 && GroupLength(chunk, g) > chunk.sample_size;
}

__device__ __forceinline__ uint64_t NumGroups(const OneBitChunk& chunk) {
  return chunk.count / chunk.group_size +
         (chunk.count % chunk.group_size != 0 ? 1 : 0);
}

__device__ __forceinline__ float Compensated(const OneBitInputs& in,
                                             uint64_t flat) {
  const float value = in.values[flat];
  // One float addition, as ErrorFeedback::Compensate.
  return in.residual == nullptr ? value : __fadd_rn(value, in.residual[flat]);
}

// The summands' fixed-point shift and count of group g.
__device__ __forceinline__ int GroupShift(const OneBitChunk& chunk, uint64_t g,
                                          const OneBitGroupSums* groups) {
  const uint64_t count =
      IsSampled(chunk, g) ? chunk.sample_size : GroupLength(chunk, g);
  return onebit::FixedShift(__ldcg(&groups[chunk.first_group + g].max_bits),
                            count);
}

// One thread's elements: [first, first + n) of chunk c, n <= 8.
struct ElementTile {
  OneBitChunk chunk;
  uint64_t first;
  uint32_t n;
  // The group of all of the warp's elements, when they share one.
  bool warp_in_one_group;
  uint64_t warp_group;
};

// False (for the whole warp alike) when the warp has no element.
__device__ __forceinline__ bool LocateElements(const OneBitInputs& in,
                                               const OneBitGrid& grid,
                                               ElementTile* tile) {
  const uint32_t c = tile::FindChunk(grid.first_cta, in.num_chunks, blockIdx.x);
  tile->chunk = in.chunks[c];
  const uint64_t cta_first =
      uint64_t{blockIdx.x - grid.first_cta[c]} * kOneBitElementsPerCta;
  const uint64_t warp_first = cta_first + (threadIdx.x / 32) * 32 * 8;
  const uint64_t count = tile->chunk.count;
  if (warp_first >= count) return false;
  tile->first = cta_first + uint64_t{threadIdx.x} * 8;
  tile->n = tile->first >= count ? 0
            : count - tile->first >= 8
                ? 8
                : static_cast<uint32_t>(count - tile->first);
  const uint64_t warp_end = warp_first + 32 * 8;
  const uint64_t warp_last = (warp_end < count ? warp_end : count) - 1;
  const uint64_t gs = tile->chunk.group_size;
  tile->warp_group = warp_first / gs;
  tile->warp_in_one_group = warp_last / gs == tile->warp_group;
  return true;
}

__device__ __forceinline__ unsigned long long WarpSum(unsigned long long x) {
  for (uint32_t delta = 16; delta > 0; delta /= 2) {
    x += __shfl_xor_sync(kFullMask, x, delta);
  }
  return x;
}

// Fixed-point sums of one run of summands of one group.
struct RunSums {
  long long positive = 0;
  long long negative = 0;
  uint32_t positives = 0;

  __device__ void Add(float value, int shift) {
    const long long fixed = onebit::ToFixed(value, shift);
    if (value >= 0.0f) {
      positive += fixed;
      ++positives;
    } else {
      negative += fixed;
    }
  }

  __device__ void FlushTo(OneBitGroupSums* group) const {
    if (positive != 0) {
      atomicAdd(&group->positive, static_cast<unsigned long long>(positive));
    }
    if (negative != 0) {
      atomicAdd(&group->negative, static_cast<unsigned long long>(negative));
    }
    if (positives != 0) atomicAdd(&group->positives, positives);
  }

  __device__ void WarpReduce() {
    positive = static_cast<long long>(
        WarpSum(static_cast<unsigned long long>(positive)));
    negative = static_cast<long long>(
        WarpSum(static_cast<unsigned long long>(negative)));
    positives = __reduce_add_sync(kFullMask, positives);
  }
};

// ---------------------------------------------------------------------------
// Element passes

__global__ void __launch_bounds__(kOneBitThreads)
    GroupMaxKernel(OneBitInputs in, OneBitGrid grid, OneBitGroupSums* groups,
                   unsigned long long* first_bad) {
  ElementTile t;
  if (!LocateElements(in, grid, &t)) return;
  // Lanes past the chunk's end join the warp's collectives only.
  if (!t.warp_in_one_group && t.n == 0) return;
  const OneBitChunk& chunk = t.chunk;
  const uint64_t gs = chunk.group_size;
  uint64_t g = t.warp_in_one_group ? t.warp_group : t.first / gs;
  uint64_t group_end = (g + 1) * gs;
  uint32_t max_bits = 0;
  for (uint32_t k = 0; k < t.n; ++k) {
    const uint64_t i = t.first + k;
    const float value = Compensated(in, chunk.offset + i);
    if (!(fabsf(value) <= kMaxFiniteFloat)) {
      atomicMin(first_bad, chunk.offset + i);
    }
    if (!t.warp_in_one_group && i >= group_end) {
      if (max_bits != 0 && !IsSampled(chunk, g)) {
        atomicMax(&groups[chunk.first_group + g].max_bits, max_bits);
      }
      g = i / gs;
      group_end = (g + 1) * gs;
      max_bits = 0;
    }
    max_bits = max(max_bits, onebit::MagnitudeBits(value));
  }
  if (t.warp_in_one_group) {
    if (IsSampled(chunk, t.warp_group)) return;
    max_bits = __reduce_max_sync(kFullMask, max_bits);
    if (threadIdx.x % 32 != 0) return;
  }
  if (max_bits != 0 && !IsSampled(chunk, g)) {
    atomicMax(&groups[chunk.first_group + g].max_bits, max_bits);
  }
}

__global__ void __launch_bounds__(kOneBitThreads)
    GroupSumsKernel(OneBitInputs in, OneBitGrid grid, OneBitGroupSums* groups,
                    uint8_t* packed) {
  ElementTile t;
  if (!LocateElements(in, grid, &t)) return;
  if (!t.warp_in_one_group && t.n == 0) return;
  const OneBitChunk& chunk = t.chunk;
  const uint64_t gs = chunk.group_size;
  uint64_t g = t.warp_in_one_group ? t.warp_group : t.first / gs;
  uint64_t group_end = (g + 1) * gs;
  bool exact = !IsSampled(chunk, g);
  int shift = exact ? GroupShift(chunk, g, groups) : 0;
  RunSums sums;
  uint32_t byte = 0;
  for (uint32_t k = 0; k < t.n; ++k) {
    const uint64_t i = t.first + k;
    const float value = Compensated(in, chunk.offset + i);
    byte |= static_cast<uint32_t>(value >= 0.0f) << k;
    if (i >= group_end) {  // only when the warp spans several groups
      if (exact) sums.FlushTo(&groups[chunk.first_group + g]);
      g = i / gs;
      group_end = (g + 1) * gs;
      exact = !IsSampled(chunk, g);
      shift = exact ? GroupShift(chunk, g, groups) : 0;
      sums = RunSums();
    }
    if (exact) sums.Add(value, shift);
  }
  if (t.n != 0) packed[chunk.packed_offset + t.first / 8] = byte;
  if (t.warp_in_one_group) {
    if (!exact) return;  // warp-uniform: the group is the warp's
    sums.WarpReduce();
    if (threadIdx.x % 32 != 0) return;
  }
  if (exact) sums.FlushTo(&groups[chunk.first_group + g]);
}

__global__ void __launch_bounds__(kOneBitThreads)
    ResidualKernel(OneBitInputs in, OneBitGrid grid, const float* means,
                   float* next_residual, unsigned long long* first_bad) {
  ElementTile t;
  if (!LocateElements(in, grid, &t)) return;
  const OneBitChunk& chunk = t.chunk;
  for (uint32_t k = 0; k < t.n; ++k) {
    const uint64_t i = t.first + k;
    const uint64_t flat = chunk.offset + i;
    const float value = Compensated(in, flat);
    const float* group_means = means + 2 * (chunk.first_group + i / chunk.group_size);
    const float decoded = value >= 0.0f ? group_means[0] : group_means[1];
    const float next = __fsub_rn(value, decoded);
    next_residual[flat] = next;
    if (!(fabsf(next) <= kMaxFiniteFloat)) atomicMin(first_bad, flat);
  }
}

// ---------------------------------------------------------------------------
// Draw passes: draw d of a chunk belongs to group d / sample_size
// (GroupMeans' numbering); a thread's four draws are one Philox call.

struct DrawTile {
  OneBitChunk chunk;
  uint64_t first;  // first draw, a multiple of 4
  PhiloxCounter words;
  uint64_t num_draws;
  bool warp_in_one_group;
  uint64_t warp_group;
};

__device__ __forceinline__ bool LocateDraws(const OneBitInputs& in,
                                            const OneBitGrid& grid,
                                            DrawTile* tile) {
  const uint32_t c = tile::FindChunk(grid.first_cta, in.num_chunks, blockIdx.x);
  tile->chunk = in.chunks[c];
  const uint64_t s = tile->chunk.sample_size;
  tile->num_draws = NumGroups(tile->chunk) * s;
  const uint64_t cta_first =
      uint64_t{blockIdx.x - grid.first_cta[c]} * kOneBitDrawsPerCta;
  const uint64_t warp_first = cta_first + (threadIdx.x / 32) * 32 * 4;
  if (warp_first >= tile->num_draws) return false;
  tile->first = cta_first + uint64_t{threadIdx.x} * 4;
  const uint64_t warp_end = warp_first + 32 * 4;
  const uint64_t warp_last =
      (warp_end < tile->num_draws ? warp_end : tile->num_draws) - 1;
  tile->warp_group = warp_first / s;
  tile->warp_in_one_group = warp_last / s == tile->warp_group;
  const RandomStream stream{in.seed, in.step, tile->chunk.key, in.worker};
  tile->words = RandomWords(stream, static_cast<uint32_t>(tile->first / 4));
  return true;
}

// The value draw d (< num_draws) picks from its sampled group g, or false
// when g is summed exactly (the short last group).
__device__ __forceinline__ bool DrawnValue(const OneBitInputs& in,
                                           const DrawTile& t, uint32_t k,
                                           uint64_t* g, float* value) {
  const uint64_t d = t.first + k;
  if (d >= t.num_draws) return false;
  *g = d / t.chunk.sample_size;
  if (!IsSampled(t.chunk, *g)) return false;
  const uint64_t length = GroupLength(t.chunk, *g);
  const uint64_t index = (uint64_t{t.words.v[k]} * length) >> 32;
  *value = Compensated(in, t.chunk.offset + *g * t.chunk.group_size + index);
  return true;
}

__global__ void __launch_bounds__(kOneBitThreads)
    SampleMaxKernel(OneBitInputs in, OneBitGrid grid, OneBitGroupSums* groups) {
  DrawTile t;
  if (!LocateDraws(in, grid, &t)) return;
  uint32_t max_bits = 0;
  for (uint32_t k = 0; k < 4; ++k) {
    uint64_t g;
    float value;
    if (!DrawnValue(in, t, k, &g, &value)) continue;
    const uint32_t bits = onebit::MagnitudeBits(value);
    if (t.warp_in_one_group) {
      max_bits = max(max_bits, bits);
    } else if (bits != 0) {
      atomicMax(&groups[t.chunk.first_group + g].max_bits, bits);
    }
  }
  if (!t.warp_in_one_group) return;
  max_bits = __reduce_max_sync(kFullMask, max_bits);
  if (threadIdx.x % 32 == 0 && max_bits != 0) {
    atomicMax(&groups[t.chunk.first_group + t.warp_group].max_bits, max_bits);
  }
}

__global__ void __launch_bounds__(kOneBitThreads)
    SampleSumsKernel(OneBitInputs in, OneBitGrid grid,
                     OneBitGroupSums* groups) {
  DrawTile t;
  if (!LocateDraws(in, grid, &t)) return;
  RunSums warp_sums;
  for (uint32_t k = 0; k < 4; ++k) {
    uint64_t g;
    float value;
    if (!DrawnValue(in, t, k, &g, &value)) continue;
    const int shift = GroupShift(t.chunk, g, groups);
    if (t.warp_in_one_group) {
      warp_sums.Add(value, shift);
    } else {
      RunSums one;
      one.Add(value, shift);
      one.FlushTo(&groups[t.chunk.first_group + g]);
    }
  }
  if (!t.warp_in_one_group) return;
  warp_sums.WarpReduce();
  if (threadIdx.x % 32 == 0) {
    warp_sums.FlushTo(&groups[t.chunk.first_group + t.warp_group]);
  }
}

// ---------------------------------------------------------------------------

__global__ void __launch_bounds__(kOneBitThreads)
    MeansKernel(OneBitInputs in, uint64_t num_groups,
                const OneBitGroupSums* groups, float* means) {
  const uint64_t global = uint64_t{blockIdx.x} * kOneBitThreads + threadIdx.x;
  if (global >= num_groups) return;
  // The last chunk whose first group is at or before this one: empty
  // chunks share their successor's first_group and come before it.
  uint32_t lo = 0;
  uint32_t hi = in.num_chunks;
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    if (in.chunks[mid].first_group <= global) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  const OneBitChunk chunk = in.chunks[lo];
  const uint64_t g = global - chunk.first_group;
  const OneBitGroupSums sums = groups[global];
  const uint64_t count =
      IsSampled(chunk, g) ? chunk.sample_size : GroupLength(chunk, g);
  const int shift = onebit::FixedShift(sums.max_bits, count);
  const uint64_t negatives = count - sums.positives;
  means[2 * global] =
      sums.positives == 0
          ? 0.0f
          : onebit::FixedMean(static_cast<long long>(sums.positive), shift,
                              sums.positives);
  means[2 * global + 1] =
      negatives == 0 ? 0.0f
                     : onebit::FixedMean(static_cast<long long>(sums.negative),
                                         shift, negatives);
}

}  // namespace

cudaError_t LaunchOneBitGroupMax(const OneBitInputs& in, OneBitGrid grid,
                                 OneBitGroupSums* groups,
                                 unsigned long long* first_bad,
                                 cudaStream_t stream) {
  if (grid.num_ctas == 0) return cudaSuccess;
  GroupMaxKernel<<<grid.num_ctas, kOneBitThreads, 0, stream>>>(in, grid, groups,
                                                               first_bad);
  return cudaGetLastError();
}

cudaError_t LaunchOneBitSampleMax(const OneBitInputs& in, OneBitGrid grid,
                                  OneBitGroupSums* groups,
                                  cudaStream_t stream) {
  if (grid.num_ctas == 0) return cudaSuccess;
  SampleMaxKernel<<<grid.num_ctas, kOneBitThreads, 0, stream>>>(in, grid,
                                                                groups);
  return cudaGetLastError();
}

cudaError_t LaunchOneBitGroupSums(const OneBitInputs& in, OneBitGrid grid,
                                  OneBitGroupSums* groups, uint8_t* packed,
                                  cudaStream_t stream) {
  if (grid.num_ctas == 0) return cudaSuccess;
  GroupSumsKernel<<<grid.num_ctas, kOneBitThreads, 0, stream>>>(in, grid, groups,
                                                                packed);
  return cudaGetLastError();
}

cudaError_t LaunchOneBitSampleSums(const OneBitInputs& in, OneBitGrid grid,
                                   OneBitGroupSums* groups,
                                   cudaStream_t stream) {
  if (grid.num_ctas == 0) return cudaSuccess;
  SampleSumsKernel<<<grid.num_ctas, kOneBitThreads, 0, stream>>>(in, grid,
                                                                 groups);
  return cudaGetLastError();
}

cudaError_t LaunchOneBitMeans(const OneBitInputs& in, uint64_t num_groups,
                              const OneBitGroupSums* groups, float* means,
                              cudaStream_t stream) {
  if (num_groups == 0) return cudaSuccess;
  const uint64_t ctas = (num_groups + kOneBitThreads - 1) / kOneBitThreads;
  MeansKernel<<<static_cast<uint32_t>(ctas), kOneBitThreads, 0, stream>>>(
      in, num_groups, groups, means);
  return cudaGetLastError();
}

cudaError_t LaunchOneBitResidual(const OneBitInputs& in, OneBitGrid grid,
                                 const float* means, float* next_residual,
                                 unsigned long long* first_bad,
                                 cudaStream_t stream) {
  if (grid.num_ctas == 0) return cudaSuccess;
  ResidualKernel<<<grid.num_ctas, kOneBitThreads, 0, stream>>>(
      in, grid, means, next_residual, first_bad);
  return cudaGetLastError();
}

}  // namespace tern::kernels::cuda
