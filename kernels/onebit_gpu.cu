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
#include "kernels/onebit_tile_cuda.h"
#include "kernels/ternary_math.h"
#include "kernels/terngrad_tile_cuda.h"

namespace tern::kernels::cuda {
namespace {

using onebit_tile::DrawTile;
using onebit_tile::ElementTile;
using onebit_tile::RunSums;

constexpr uint32_t kFullMask = 0xFFFFFFFFu;

// The chunk-level accumulators of one launch, through atomics.
struct DeviceSink {
  OneBitGroupSums* groups;  // the chunk's first group
  unsigned long long* first_bad;

  __device__ void Max(uint64_t g, uint32_t max_bits) const {
    if (max_bits != 0) atomicMax(&groups[g].max_bits, max_bits);
  }
  __device__ void Sums(uint64_t g, const RunSums& sums) const {
    OneBitGroupSums* group = &groups[g];
    if (sums.positive != 0) {
      atomicAdd(&group->positive, static_cast<unsigned long long>(sums.positive));
    }
    if (sums.negative != 0) {
      atomicAdd(&group->negative, static_cast<unsigned long long>(sums.negative));
    }
    if (sums.positives != 0) atomicAdd(&group->positives, sums.positives);
  }
  __device__ void Bad(uint64_t flat) const { atomicMin(first_bad, flat); }
};

// Largest magnitudes written by an earlier launch: read through L2.
struct MaxBitsOf {
  const OneBitGroupSums* groups;  // the chunk's first group
  __device__ uint32_t operator()(uint64_t g) const {
    return __ldcg(&groups[g].max_bits);
  }
};

__device__ __forceinline__ unsigned long long WarpSum(unsigned long long x) {
  for (uint32_t delta = 16; delta > 0; delta /= 2) {
    x += __shfl_xor_sync(kFullMask, x, delta);
  }
  return x;
}

__device__ __forceinline__ RunSums WarpReduce(RunSums sums) {
  sums.positive = static_cast<int64_t>(
      WarpSum(static_cast<unsigned long long>(sums.positive)));
  sums.negative = static_cast<int64_t>(
      WarpSum(static_cast<unsigned long long>(sums.negative)));
  sums.positives = __reduce_add_sync(kFullMask, sums.positives);
  return sums;
}

// The chunk of this CTA and the CTA's number within it.
__device__ __forceinline__ const OneBitChunk& ChunkOfCta(
    const OneBitInputs& in, const OneBitGrid& grid, uint64_t* cta) {
  const uint32_t c = tile::FindChunk(grid.first_cta, in.num_chunks, blockIdx.x);
  *cta = blockIdx.x - grid.first_cta[c];
  return in.chunks[c];
}

__device__ __forceinline__ bool IsLane0() { return threadIdx.x % 32 == 0; }

// ---------------------------------------------------------------------------
// Element passes

__global__ void __launch_bounds__(kOneBitThreads)
    GroupMaxKernel(OneBitInputs in, OneBitGrid grid, OneBitGroupSums* groups,
                   unsigned long long* first_bad) {
  uint64_t cta;
  const OneBitChunk chunk = ChunkOfCta(in, grid, &cta);
  ElementTile t;
  if (!onebit_tile::LocateElements(chunk, cta, threadIdx.x, &t)) return;
  if (!onebit_tile::TakesPart(t)) return;
  const DeviceSink sink{groups + chunk.first_group, first_bad};
  onebit_tile::MaxRun run = onebit_tile::GroupMaxThread(in, chunk, t, sink);
  if (t.warp_in_one_group) {
    // Warp-uniform: every lane has the warp's group.
    if (onebit_tile::IsSampled(chunk, run.group)) return;
    run.max_bits = __reduce_max_sync(kFullMask, run.max_bits);
    if (!IsLane0()) return;
  }
  if (!onebit_tile::IsSampled(chunk, run.group)) sink.Max(run.group, run.max_bits);
}

__global__ void __launch_bounds__(kOneBitThreads)
    GroupSumsKernel(OneBitInputs in, OneBitGrid grid, OneBitGroupSums* groups,
                    uint8_t* packed) {
  uint64_t cta;
  const OneBitChunk chunk = ChunkOfCta(in, grid, &cta);
  ElementTile t;
  if (!onebit_tile::LocateElements(chunk, cta, threadIdx.x, &t)) return;
  if (!onebit_tile::TakesPart(t)) return;
  const DeviceSink sink{groups + chunk.first_group, nullptr};
  uint32_t byte = 0;
  onebit_tile::SumRun run = onebit_tile::GroupSumsThread(
      in, chunk, t, MaxBitsOf{groups + chunk.first_group}, sink, &byte);
  if (t.n != 0) packed[chunk.packed_offset + t.first / 8] = byte;
  if (t.warp_in_one_group) {
    if (!run.exact) return;  // warp-uniform
    run.sums = WarpReduce(run.sums);
    if (!IsLane0()) return;
  }
  if (run.exact) sink.Sums(run.group, run.sums);
}

__global__ void __launch_bounds__(kOneBitThreads)
    ResidualKernel(OneBitInputs in, OneBitGrid grid, const float* means,
                   float* next_residual, unsigned long long* first_bad) {
  uint64_t cta;
  const OneBitChunk chunk = ChunkOfCta(in, grid, &cta);
  ElementTile t;
  if (!onebit_tile::LocateElements(chunk, cta, threadIdx.x, &t)) return;
  const DeviceSink sink{nullptr, first_bad};
  onebit_tile::ResidualThread(in, chunk, t, means + 2 * chunk.first_group,
                              next_residual, sink);
}

// ---------------------------------------------------------------------------
// Draw passes

__global__ void __launch_bounds__(kOneBitThreads)
    SampleMaxKernel(OneBitInputs in, OneBitGrid grid, OneBitGroupSums* groups) {
  uint64_t cta;
  const OneBitChunk chunk = ChunkOfCta(in, grid, &cta);
  DrawTile t;
  if (!onebit_tile::LocateDraws(chunk, cta, threadIdx.x, &t)) return;
  const DeviceSink sink{groups + chunk.first_group, nullptr};
  uint32_t max_bits = onebit_tile::SampleMaxThread(in, chunk, t, sink);
  if (!t.warp_in_one_group) return;
  max_bits = __reduce_max_sync(kFullMask, max_bits);
  if (IsLane0()) sink.Max(t.warp_group, max_bits);
}

__global__ void __launch_bounds__(kOneBitThreads)
    SampleSumsKernel(OneBitInputs in, OneBitGrid grid,
                     OneBitGroupSums* groups) {
  uint64_t cta;
  const OneBitChunk chunk = ChunkOfCta(in, grid, &cta);
  DrawTile t;
  if (!onebit_tile::LocateDraws(chunk, cta, threadIdx.x, &t)) return;
  const DeviceSink sink{groups + chunk.first_group, nullptr};
  RunSums sums = onebit_tile::SampleSumsThread(
      in, chunk, t, MaxBitsOf{groups + chunk.first_group}, sink);
  if (!t.warp_in_one_group) return;
  sums = WarpReduce(sums);
  if (IsLane0() && !sums.Empty()) sink.Sums(t.warp_group, sums);
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
  const OneBitGroupSums sums = groups[global];
  onebit_tile::GroupMeansOf(chunk, global - chunk.first_group, sums.max_bits,
                            static_cast<int64_t>(sums.positive),
                            static_cast<int64_t>(sums.negative),
                            sums.positives, means + 2 * global);
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
