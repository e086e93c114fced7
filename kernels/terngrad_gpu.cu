// CUDA twin of terngrad_cpu.cc: the worker-side TernGrad kernels (Wen et
// al., NIPS 2017) over a flat gradient buffer on the device, one launch for
// all chunks. The per-thread work is in terngrad_tile_cuda.h (shared with
// the host tests); this file maps CTAs to chunks and does the cooperative
// parts (the statistics' tree across threads and CTAs).
//
// No Abseil here: nvcc compiles this file outside Bazel's toolchain
// (third_party/cuda.bzl); terngrad_cuda.cc wraps it.
#include <cuda_runtime.h>

#include <cstdint>

#include "common/philox.h"
#include "kernels/payload.h"
#include "kernels/ternary_math.h"
#include "kernels/terngrad_cuda_launch.h"
#include "kernels/terngrad_tile_cuda.h"

namespace tern::kernels::cuda {
namespace {

constexpr uint32_t kFullMask = 0xFFFFFFFFu;

// Rows of each stats block staged at a time for a misaligned chunk.
constexpr uint32_t kStageRows = 8;

using tile::StatsNode;

__device__ __forceinline__ StatsNode ShuffleDown(const StatsNode& node,
                                                 uint32_t delta) {
  StatsNode other;
  other.sum = __shfl_down_sync(kFullMask, node.sum, delta);
  other.sum_squares = __shfl_down_sync(kFullMask, node.sum_squares, delta);
  other.nonfinite = __shfl_down_sync(
      kFullMask, static_cast<unsigned long long>(node.nonfinite), delta);
  other.max_abs = __shfl_down_sync(kFullMask, node.max_abs, delta);
  return other;
}

// Partials are written by one CTA and read by another: through L2, never a
// possibly stale L1 line.
__device__ __forceinline__ StatsNode LoadNodeL2(const StatsNode* at) {
  StatsNode node;
  node.sum = __ldcg(&at->sum);
  node.sum_squares = __ldcg(&at->sum_squares);
  node.nonfinite =
      __ldcg(reinterpret_cast<const unsigned long long*>(&at->nonfinite));
  node.max_abs = __ldcg(&at->max_abs);
  return node;
}

__device__ __forceinline__ void StoreNodeL2(StatsNode* at,
                                            const StatsNode& node) {
  __stcg(&at->sum, node.sum);
  __stcg(&at->sum_squares, node.sum_squares);
  __stcg(reinterpret_cast<unsigned long long*>(&at->nonfinite),
         static_cast<unsigned long long>(node.nonfinite));
  __stcg(&at->max_abs, node.max_abs);
}

// One CTA: kStatsBlocksPerCta stats blocks of one chunk, four threads per
// block (tile::AccumulateStatsQuarter). The block nodes are folded over the
// lower levels of the tree inside the CTA; the last CTA of a chunk to
// finish folds the CTAs' nodes (the upper levels) and writes the result
// ("threadfence reduction": no second launch, counters reset to zero).
__global__ void __launch_bounds__(kStatsThreads)
    ChunkStatsKernel(const float* values, const StatsChunk* chunks,
                     const uint32_t* first_cta, uint32_t num_chunks,
                     StatsNode* partials, uint32_t* counters,
                     StatsResult* results) {
  static_assert(kStatsBlocksPerCta == 32, "one warp folds the CTA's blocks");
  __shared__ StatsNode block_nodes[kStatsBlocksPerCta];
  __shared__ bool is_last;

  const uint32_t c = tile::FindChunk(first_cta, num_chunks, blockIdx.x);
  const StatsChunk chunk = chunks[c];
  const uint32_t chunk_first_cta = first_cta[c];
  const uint32_t chunk_ctas =
      (c + 1 < num_chunks ? first_cta[c + 1] : gridDim.x) - chunk_first_cta;
  const uint32_t cta = blockIdx.x - chunk_first_cta;
  const float* data = values + chunk.offset;
  const float shift = tile::StatsShift(__ldg(data));

  const uint64_t num_blocks =
      (chunk.count + kStatsBlockSize - 1) / kStatsBlockSize;
  const uint32_t block_in_cta = threadIdx.x / tile::kStatsThreadsPerBlock;
  const uint32_t q = threadIdx.x % tile::kStatsThreadsPerBlock;
  const uint64_t first_block = uint64_t{cta} * kStatsBlocksPerCta;
  const uint64_t block = first_block + block_in_cta;
  const uint64_t begin = block * kStatsBlockSize;
  const uint32_t len =
      block < num_blocks
          ? static_cast<uint32_t>(chunk.count - begin < kStatsBlockSize
                                      ? chunk.count - begin
                                      : kStatsBlockSize)
          : 0u;
  tile::StatsQuarter acc;
  if (tile::IsAligned(data, 16)) {
    tile::AccumulateStatsQuarter(data + begin, len, q, shift, &acc);
  } else {
    // A misaligned chunk (a model's flat buffer puts tensors anywhere):
    // eight rows of each of the CTA's blocks at a time go through shared
    // memory with coalesced loads, then each thread adds its lanes of them
    // in the same order as above.
    __shared__ __align__(
        16) float rows[kStatsBlocksPerCta * kStageRows * kStatsLanes];
    constexpr uint32_t kBlockRows = kStageRows * kStatsLanes;
    constexpr uint32_t kPerThread =
        kStatsBlocksPerCta * kBlockRows / kStatsThreads;
    tile::ClearStatsQuarter(&acc);
    // Rows of the CTA's first block, its longest.
    const uint64_t cta_rest = chunk.count - first_block * kStatsBlockSize;
    const uint32_t num_rows = static_cast<uint32_t>(
        ((cta_rest < kStatsBlockSize ? cta_rest : kStatsBlockSize) +
         kStatsLanes - 1) /
        kStatsLanes);
    for (uint32_t r0 = 0; r0 < num_rows; r0 += kStageRows) {
      __syncthreads();  // the previous rows have been added
#pragma unroll
      for (uint32_t k = 0; k < kPerThread; ++k) {
        const uint32_t i = k * kStatsThreads + threadIdx.x;
        const uint64_t e = (first_block + i / kBlockRows) * kStatsBlockSize +
                           r0 * kStatsLanes + i % kBlockRows;
        rows[i] = e < chunk.count ? __ldg(data + e) : 0.0f;
      }
      __syncthreads();
      tile::AddStatsRows(rows + block_in_cta * kBlockRows, r0, kStageRows, len,
                         q, shift, &acc);
    }
  }

  // Every thread of a block's group gathers all 16 lanes (the group is
  // four adjacent lanes of one warp) and computes the same block node.
  const uint32_t lane = threadIdx.x % 32;
  const uint32_t group_lead = lane & ~(tile::kStatsThreadsPerBlock - 1);
  float lane_sum[kStatsLanes];
  float lane_sum_squares[kStatsLanes];
#pragma unroll
  for (uint32_t src = 0; src < tile::kStatsThreadsPerBlock; ++src) {
#pragma unroll
    for (uint32_t j = 0; j < tile::kStatsLanesPerThread; ++j) {
      lane_sum[src * tile::kStatsLanesPerThread + j] =
          __shfl_sync(kFullMask, acc.sum[j], group_lead + src);
      lane_sum_squares[src * tile::kStatsLanesPerThread + j] =
          __shfl_sync(kFullMask, acc.sum_squares[j], group_lead + src);
    }
  }
  float max_abs = acc.max_abs;
  uint32_t nonfinite = acc.nonfinite;
#pragma unroll
  for (uint32_t delta = 1; delta < tile::kStatsThreadsPerBlock; delta *= 2) {
    max_abs = fmaxf(max_abs, __shfl_xor_sync(kFullMask, max_abs, delta));
    nonfinite += __shfl_xor_sync(kFullMask, nonfinite, delta);
  }
  if (q == 0 && block < num_blocks) {
    block_nodes[block_in_cta] =
        tile::StatsBlockNode(lane_sum, lane_sum_squares, max_abs, nonfinite);
  }
  __syncthreads();

  // Lower levels of the tree: the CTA's blocks are the aligned run
  // [32 * cta, 32 * cta + 32) of the chunk's blocks.
  const uint32_t present = static_cast<uint32_t>(
      num_blocks - first_block < kStatsBlocksPerCta ? num_blocks - first_block
                                                    : kStatsBlocksPerCta);
  if (threadIdx.x < 32) {
    StatsNode node = lane < present ? block_nodes[lane] : StatsNode{};
#pragma unroll
    for (uint32_t stride = 1; stride < 32; stride *= 2) {
      const StatsNode other = ShuffleDown(node, stride);
      if (lane % (2 * stride) == 0 && lane + stride < present) {
        tile::CombineStatsNodes(&node, other);
      }
    }
    if (lane == 0) {
      if (chunk_ctas == 1) {
        results[c] = StatsResult{node, shift};
      } else {
        StoreNodeL2(&partials[blockIdx.x], node);
        __threadfence();
        const uint32_t ticket = atomicAdd(&counters[c], 1u);
        is_last = ticket == chunk_ctas - 1;
      }
    }
  }
  if (chunk_ctas == 1) return;
  __syncthreads();
  if (!is_last) return;

  // Upper levels, over the chunk's CTA nodes, in place.
  __threadfence();
  StatsNode* nodes = partials + chunk_first_cta;
  for (uint32_t stride = 1; stride < chunk_ctas; stride *= 2) {
    for (uint64_t i = uint64_t{threadIdx.x} * 2 * stride;
         i + stride < chunk_ctas; i += uint64_t{blockDim.x} * 2 * stride) {
      StatsNode left = LoadNodeL2(&nodes[i]);
      tile::CombineStatsNodes(&left, LoadNodeL2(&nodes[i + stride]));
      StoreNodeL2(&nodes[i], left);
    }
    __threadfence();
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    results[c] = StatsResult{LoadNodeL2(&nodes[0]), shift};
    counters[c] = 0;  // ready for the next launch
  }
}

// One thread per tile (16 elements for 2-bit, 20 for base-3). A chunk
// that starts off a 16-byte boundary is read through shared memory
// (tile::StageIn) instead of with float4 loads.
template <Layout kLayout>
__global__ void __launch_bounds__(kThreads)
    QuantizePackKernel(const float* values, const QuantizeChunk* chunks,
                       const uint32_t* first_cta, uint32_t num_chunks,
                       uint64_t seed, uint32_t step, uint32_t worker,
                       uint8_t* packed) {
  constexpr bool kBase3 = kLayout == Layout::kTernaryBase3;
  constexpr uint32_t kElements =
      kBase3 ? tile::kBase3Elements : tile::kTwoBitElements;
  __shared__ __align__(16) float stage[kThreads * kElements];
  const uint32_t c = tile::FindChunk(first_cta, num_chunks, blockIdx.x);
  const QuantizeChunk chunk = chunks[c];
  const uint32_t cta = blockIdx.x - first_cta[c];
  const uint64_t t = uint64_t{cta} * kThreads + threadIdx.x;
  const uint64_t first = t * kElements;
  const float* chunk_values = values + chunk.offset;
  float v[kElements];
  if (tile::IsAligned(chunk_values, 16)) {
    if (first >= chunk.count) return;
    tile::LoadFloats<kElements>(chunk_values, first, chunk.count, v);
  } else {
    tile::StageIn<kThreads, kElements>(
        stage, chunk_values, uint64_t{cta} * kThreads * kElements, chunk.count);
    __syncthreads();
    if (first >= chunk.count) return;
    const float4* mine =
        reinterpret_cast<const float4*>(stage + threadIdx.x * kElements);
#pragma unroll
    for (uint32_t j = 0; j < kElements / 4; ++j) {
      const float4 quad = mine[j];
      v[4 * j] = quad.x;
      v[4 * j + 1] = quad.y;
      v[4 * j + 2] = quad.z;
      v[4 * j + 3] = quad.w;
    }
  }
  RandomStream stream;
  stream.seed = seed;
  stream.step = step;
  stream.chunk = chunk.key;
  stream.worker = worker;
  const uint32_t word =
      kBase3 ? tile::Base3Word(v, first, chunk.count, chunk.bound, chunk.scaler,
                               stream)
             : tile::TwoBitWord(v, first, chunk.count, chunk.bound,
                                chunk.scaler, stream);
  const uint64_t bytes =
      kBase3 ? tile::Base3Bytes(chunk.count) : tile::TwoBitBytes(chunk.count);
  tile::StoreWordLE(packed + chunk.packed_offset, 4 * t, bytes, word);
}

}  // namespace

cudaError_t LaunchChunkStats(const float* values, const StatsChunk* chunks,
                             const uint32_t* first_cta, uint32_t num_chunks,
                             uint32_t num_ctas, tile::StatsNode* partials,
                             uint32_t* counters, StatsResult* results,
                             cudaStream_t stream) {
  if (num_ctas == 0) return cudaSuccess;
  ChunkStatsKernel<<<num_ctas, kStatsThreads, 0, stream>>>(
      values, chunks, first_cta, num_chunks, partials, counters, results);
  return cudaGetLastError();
}

cudaError_t LaunchQuantizePack(const float* values, const QuantizeChunk* chunks,
                               const uint32_t* first_cta, uint32_t num_chunks,
                               uint32_t num_ctas, uint64_t seed, uint32_t step,
                               uint32_t worker, Layout layout, uint8_t* packed,
                               cudaStream_t stream) {
  if (num_ctas == 0) return cudaSuccess;
  if (layout == Layout::kTernary2Bit) {
    QuantizePackKernel<Layout::kTernary2Bit><<<num_ctas, kThreads, 0, stream>>>(
        values, chunks, first_cta, num_chunks, seed, step, worker, packed);
  } else if (layout == Layout::kTernaryBase3) {
    QuantizePackKernel<Layout::kTernaryBase3>
        <<<num_ctas, kThreads, 0, stream>>>(
            values, chunks, first_cta, num_chunks, seed, step, worker, packed);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace tern::kernels::cuda
