// CUDA twin of the sampled threshold selection (sparse_select.cc) and of
// the dropping / adaptive encoders' selection of kept elements. The
// per-element and per-selection arithmetic is sparse_select_math.h's
// (shared with the host tests); this file does the parallel parts: the
// sample gather, the histograms of the radix select, and an
// order-preserving compaction (tile counts, one scan, scatter).
//
// No Abseil here: nvcc compiles this file outside Bazel's toolchain
// (third_party/cuda.bzl); sparse_cuda.cc wraps it.
#include <cuda_runtime.h>

#include <cstdint>

#include "common/philox.h"
#include "kernels/sparse_cuda_launch.h"
#include "kernels/sparse_select_math.h"

namespace tern::kernels::cuda {
namespace {

constexpr uint32_t kFullMask = 0xFFFFFFFFu;
// One CTA selects small samples and scans the tile counts.
constexpr uint32_t kSelectThreads = 1024;
constexpr uint32_t kScanThreads = 1024;
// Keys per CTA of a grid-wide histogram pass (at most kMaxHistogramCtas
// CTAs; each loops over the rest).
constexpr uint32_t kHistogramKeysPerCta = 16 * kSparseThreads;
constexpr uint32_t kMaxHistogramCtas = 1024;

using sparse::kRadixBins;
using sparse::kRadixPasses;

// The exclusive prefix sum of `value` over the CTA's threads (kThreads, a
// multiple of 32, at most 1024), and the CTA's total in *total. All threads
// must call it; it may be called again right away.
template <uint32_t kThreads>
__device__ uint32_t BlockExclusiveSum(uint32_t value, uint32_t* total) {
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps");
  constexpr uint32_t kWarps = kThreads / 32;
  __shared__ uint32_t warp_sums[kWarps];
  const uint32_t lane = threadIdx.x % 32;
  const uint32_t warp = threadIdx.x / 32;
  uint32_t inclusive = value;
#pragma unroll
  for (uint32_t delta = 1; delta < 32; delta *= 2) {
    const uint32_t other = __shfl_up_sync(kFullMask, inclusive, delta);
    if (lane >= delta) inclusive += other;
  }
  if (lane == 31) warp_sums[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    uint32_t sum = lane < kWarps ? warp_sums[lane] : 0u;
#pragma unroll
    for (uint32_t delta = 1; delta < 32; delta *= 2) {
      const uint32_t other = __shfl_up_sync(kFullMask, sum, delta);
      if (lane >= delta) sum += other;
    }
    if (lane < kWarps) warp_sums[lane] = sum;  // inclusive over warps
  }
  __syncthreads();
  const uint32_t before = warp == 0 ? 0u : warp_sums[warp - 1];
  *total = warp_sums[kWarps - 1];
  __syncthreads();  // everyone has read warp_sums before a next call
  return before + inclusive - value;
}

// ---------------------------------------------------------------------------
// The sample.

// One thread per Philox call: draws 2t and 2t + 1 (DrawIndices' word use).
__global__ void __launch_bounds__(kSparseThreads)
    GatherSampleKernel(const float* values, const sparse::SampleChunk* chunks,
                       uint32_t num_chunks, uint64_t total, uint32_t num_keys,
                       bool drawn, RandomStream stream, bool signed_keys,
                       uint32_t* keys) {
  const uint64_t t = uint64_t{blockIdx.x} * kSparseThreads + threadIdx.x;
  const uint64_t first = 2 * t;
  if (first >= num_keys) return;
  PhiloxCounter words{};
  if (drawn) words = RandomWords(stream, static_cast<uint32_t>(t));
  for (uint32_t r = 0; r < 2; ++r) {
    const uint64_t j = first + r;
    if (j >= num_keys) break;
    const uint64_t index =
        drawn ? sparse::DrawIndex(
                    sparse::DrawWord(words, static_cast<uint32_t>(j)), total)
              : j;
    const sparse::SampleChunk chunk =
        chunks[sparse::FindSampleChunk(chunks, num_chunks, index)];
    const float value = __ldg(values + chunk.offset + (index - chunk.first));
    keys[j] = signed_keys ? sparse::SignedKey(value)
                          : sparse::MagnitudeKey(value);
  }
}

// ---------------------------------------------------------------------------
// Radix select.

// Small samples: every pass in one CTA, the histograms in shared memory.
__global__ void __launch_bounds__(kSelectThreads)
    SelectOneCtaKernel(const uint32_t* keys, uint32_t num_keys,
                       sparse::RadixSelect* selects, uint32_t num_selects,
                       float* thresholds) {
  __shared__ uint32_t histograms[kMaxSelects][kRadixBins];
  __shared__ sparse::RadixSelect state[kMaxSelects];
  if (threadIdx.x < num_selects) state[threadIdx.x] = selects[threadIdx.x];
  for (uint32_t pass = 0; pass < kRadixPasses; ++pass) {
    for (uint32_t i = threadIdx.x; i < kMaxSelects * kRadixBins;
         i += kSelectThreads) {
      histograms[i / kRadixBins][i % kRadixBins] = 0;
    }
    __syncthreads();  // zeroed, and the previous step is visible
    for (uint64_t j = threadIdx.x; j < num_keys; j += kSelectThreads) {
      const uint32_t key = __ldg(keys + j);
      for (uint32_t s = 0; s < num_selects; ++s) {
        if (sparse::IsCandidate(state[s], key)) {
          atomicAdd(&histograms[s][sparse::RadixDigit(key, pass)], 1u);
        }
      }
    }
    __syncthreads();
    if (threadIdx.x < num_selects) {
      sparse::RadixSelectStep(&state[threadIdx.x], pass,
                              histograms[threadIdx.x]);
    }
    __syncthreads();
  }
  if (threadIdx.x < num_selects) {
    selects[threadIdx.x] = state[threadIdx.x];
    sparse::StoreThreshold(state[threadIdx.x], thresholds);
  }
}

// Large samples, pass `pass`: the candidates' digits of every selection,
// per CTA in shared memory, then added to the pass's histograms.
__global__ void __launch_bounds__(kSparseThreads)
    HistogramKernel(const uint32_t* keys, uint32_t num_keys,
                    const sparse::RadixSelect* selects, uint32_t num_selects,
                    uint32_t pass, uint32_t* histograms) {
  __shared__ uint32_t local[kMaxSelects][kRadixBins];
  __shared__ sparse::RadixSelect state[kMaxSelects];
  for (uint32_t i = threadIdx.x; i < kMaxSelects * kRadixBins;
       i += kSparseThreads) {
    local[i / kRadixBins][i % kRadixBins] = 0;
  }
  if (threadIdx.x < num_selects) state[threadIdx.x] = selects[threadIdx.x];
  __syncthreads();
  const uint64_t stride = uint64_t{gridDim.x} * kSparseThreads;
  for (uint64_t j = uint64_t{blockIdx.x} * kSparseThreads + threadIdx.x;
       j < num_keys; j += stride) {
    const uint32_t key = __ldg(keys + j);
    for (uint32_t s = 0; s < num_selects; ++s) {
      if (sparse::IsCandidate(state[s], key)) {
        atomicAdd(&local[s][sparse::RadixDigit(key, pass)], 1u);
      }
    }
  }
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < num_selects * kRadixBins;
       i += kSparseThreads) {
    const uint32_t count = local[i / kRadixBins][i % kRadixBins];
    if (count != 0) atomicAdd(&histograms[i], count);
  }
}

// Large samples, after pass `pass`'s histograms: one thread per selection.
__global__ void PickKernel(sparse::RadixSelect* selects, uint32_t num_selects,
                           uint32_t pass, const uint32_t* histograms,
                           float* thresholds) {
  const uint32_t s = threadIdx.x;
  if (s >= num_selects) return;
  sparse::RadixSelect state = selects[s];
  sparse::RadixSelectStep(&state, pass, histograms + s * kRadixBins);
  selects[s] = state;
  if (pass + 1 == kRadixPasses) sparse::StoreThreshold(state, thresholds);
}

// ---------------------------------------------------------------------------
// Compaction.

// Step 3: kept elements per tile (any order inside the tile: coalesced),
// and the first non-finite element.
__global__ void __launch_bounds__(kSparseThreads)
    KeepCountsKernel(const float* values, uint64_t n, const float* thresholds,
                     uint32_t* tile_counts, SparseSummary* summary) {
  const float positive = thresholds[0];
  const float negative = thresholds[1];
  const uint64_t base = uint64_t{blockIdx.x} * kSparseTileElements;
  uint32_t count = 0;
#pragma unroll
  for (uint32_t k = 0; k < kSparseItemsPerThread; ++k) {
    const uint64_t i = base + k * kSparseThreads + threadIdx.x;
    if (i >= n) break;
    const float value = __ldg(values + i);
    if (!sparse::IsFinite(value)) {
      atomicMin(&summary->first_nonfinite, static_cast<unsigned long long>(i));
    }
    count += sparse::KeepKind(value, positive, negative) != sparse::kNotKept;
  }
  uint32_t total;
  BlockExclusiveSum<kSparseThreads>(count, &total);
  if (threadIdx.x == 0) tile_counts[blockIdx.x] = total;
}

// Step 4, one CTA: tile offsets, in runs of kScanThreads tiles.
__global__ void __launch_bounds__(kScanThreads)
    ScanTilesKernel(const uint32_t* tile_counts, uint64_t num_tiles,
                    uint32_t* tile_offsets, SparseSummary* summary) {
  uint32_t carry = 0;  // < 2^31: fewer kept elements than elements
  for (uint64_t base = 0; base < num_tiles; base += kScanThreads) {
    const uint64_t i = base + threadIdx.x;
    const uint32_t count = i < num_tiles ? tile_counts[i] : 0u;
    uint32_t total;
    const uint32_t before = BlockExclusiveSum<kScanThreads>(count, &total);
    if (i < num_tiles) tile_offsets[i] = carry + before;
    carry += total;
  }
  if (threadIdx.x == 0) summary->kept = carry;
}

// Step 5: thread t of a tile owns its elements [8t, 8t + 8), so the CTA's
// exclusive sum of per-thread counts puts them in index order.
template <bool kPairs>
__global__ void __launch_bounds__(kSparseThreads)
    KeepScatterKernel(const float* values, uint64_t n, const float* thresholds,
                      const uint32_t* tile_offsets, uint32_t* out,
                      float* kept) {
  const float positive = thresholds[0];
  const float negative = thresholds[1];
  const uint64_t first = uint64_t{blockIdx.x} * kSparseTileElements +
                         uint64_t{threadIdx.x} * kSparseItemsPerThread;
  float v[kSparseItemsPerThread];
  uint32_t kinds[kSparseItemsPerThread];
  uint32_t count = 0;
#pragma unroll
  for (uint32_t k = 0; k < kSparseItemsPerThread; ++k) {
    const uint64_t i = first + k;
    v[k] = i < n ? __ldg(values + i) : 0.0f;
    kinds[k] = i < n ? sparse::KeepKind(v[k], positive, negative)
                     : sparse::kNotKept;
    count += kinds[k] != sparse::kNotKept;
  }
  uint32_t total;
  uint64_t at = tile_offsets[blockIdx.x] +
                BlockExclusiveSum<kSparseThreads>(count, &total);
#pragma unroll
  for (uint32_t k = 0; k < kSparseItemsPerThread; ++k) {
    if (kinds[k] == sparse::kNotKept) continue;
    const uint32_t index = static_cast<uint32_t>(first + k);  // < 2^31
    if (kPairs) {
      out[2 * at] = index;
      out[2 * at + 1] = __float_as_uint(v[k]);
    } else {
      out[at] = sparse::KeptWord(index, kinds[k]);
      kept[at] = v[k];
    }
    ++at;
  }
}

// One thread per group: its kept words are a contiguous run (sorted by
// index), summed in index order like the CPU's loop.
__global__ void __launch_bounds__(kSparseThreads)
    GroupMeansKernel(const uint32_t* words, const float* kept,
                     const SparseSummary* summary, uint64_t num_groups,
                     uint32_t group_size, float* scalers) {
  const uint64_t g = uint64_t{blockIdx.x} * kSparseThreads + threadIdx.x;
  if (g >= num_groups) return;
  const uint64_t count = summary->kept;
  const uint64_t begin = sparse::LowerBoundWord(words, count, g * group_size);
  const uint64_t end =
      sparse::LowerBoundWord(words, count, (g + 1) * group_size);
  sparse::KeptMeans(words, kept, begin, end, &scalers[2 * g],
                    &scalers[2 * g + 1]);
}

uint32_t CtasFor(uint64_t items, uint64_t per_cta) {
  return static_cast<uint32_t>((items + per_cta - 1) / per_cta);
}

}  // namespace

cudaError_t LaunchGatherSample(const float* values,
                               const sparse::SampleChunk* chunks,
                               uint32_t num_chunks, uint64_t total,
                               uint32_t num_keys, bool drawn,
                               const RandomStream& stream, bool signed_keys,
                               uint32_t* keys, cudaStream_t cuda_stream) {
  if (num_keys == 0) return cudaSuccess;
  const uint64_t threads = (uint64_t{num_keys} + 1) / 2;
  GatherSampleKernel<<<CtasFor(threads, kSparseThreads), kSparseThreads, 0,
                       cuda_stream>>>(values, chunks, num_chunks, total,
                                      num_keys, drawn, stream, signed_keys,
                                      keys);
  return cudaGetLastError();
}

cudaError_t LaunchRadixSelect(const uint32_t* keys, uint32_t num_keys,
                              sparse::RadixSelect* selects,
                              uint32_t num_selects, uint32_t* histograms,
                              float* thresholds, cudaStream_t cuda_stream) {
  if (num_selects == 0 || num_selects > kMaxSelects) {
    return cudaErrorInvalidValue;
  }
  if (num_keys <= kSingleCtaSelectKeys) {
    SelectOneCtaKernel<<<1, kSelectThreads, 0, cuda_stream>>>(
        keys, num_keys, selects, num_selects, thresholds);
    return cudaGetLastError();
  }
  uint32_t ctas = CtasFor(num_keys, kHistogramKeysPerCta);
  if (ctas > kMaxHistogramCtas) ctas = kMaxHistogramCtas;
  for (uint32_t pass = 0; pass < kRadixPasses; ++pass) {
    uint32_t* pass_histograms =
        histograms + uint64_t{pass} * num_selects * kRadixBins;
    HistogramKernel<<<ctas, kSparseThreads, 0, cuda_stream>>>(
        keys, num_keys, selects, num_selects, pass, pass_histograms);
    cudaError_t error = cudaGetLastError();
    if (error != cudaSuccess) return error;
    PickKernel<<<1, 32, 0, cuda_stream>>>(selects, num_selects, pass,
                                          pass_histograms, thresholds);
    error = cudaGetLastError();
    if (error != cudaSuccess) return error;
  }
  return cudaSuccess;
}

cudaError_t LaunchKeep(const float* values, uint64_t n,
                       const float* thresholds, uint32_t* tile_counts,
                       uint32_t* tile_offsets, SparseSummary* summary,
                       bool pairs, uint32_t* out, float* kept,
                       cudaStream_t cuda_stream) {
  if (n == 0) return cudaSuccess;
  const uint64_t tiles = SparseTiles(n);
  KeepCountsKernel<<<static_cast<uint32_t>(tiles), kSparseThreads, 0,
                     cuda_stream>>>(values, n, thresholds, tile_counts,
                                    summary);
  cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) return error;
  ScanTilesKernel<<<1, kScanThreads, 0, cuda_stream>>>(tile_counts, tiles,
                                                       tile_offsets, summary);
  error = cudaGetLastError();
  if (error != cudaSuccess) return error;
  if (pairs) {
    KeepScatterKernel<true>
        <<<static_cast<uint32_t>(tiles), kSparseThreads, 0, cuda_stream>>>(
            values, n, thresholds, tile_offsets, out, kept);
  } else {
    KeepScatterKernel<false>
        <<<static_cast<uint32_t>(tiles), kSparseThreads, 0, cuda_stream>>>(
            values, n, thresholds, tile_offsets, out, kept);
  }
  return cudaGetLastError();
}

cudaError_t LaunchGroupMeans(const uint32_t* words, const float* kept,
                             const SparseSummary* summary, uint64_t n,
                             uint32_t group_size, float* scalers,
                             cudaStream_t cuda_stream) {
  if (n == 0 || group_size == 0) return cudaSuccess;
  const uint64_t groups = (n - 1) / group_size + 1;
  GroupMeansKernel<<<CtasFor(groups, kSparseThreads), kSparseThreads, 0,
                     cuda_stream>>>(words, kept, summary, groups, group_size,
                                    scalers);
  return cudaGetLastError();
}

}  // namespace tern::kernels::cuda
