// The host entry points of the sparse-selection CUDA kernels
// (sparse_gpu.cu): plain functions that enqueue kernels on a stream and
// return the first launch error. No Abseil here (nvcc compiles the .cu file
// outside Bazel's toolchain); sparse_cuda.h plans the tables, owns the
// memory and turns errors into absl::Status.
//
// A threshold is two steps, all on the device (no copy to the host between
// them):
//   1. GatherSample: the keys (sparse_select_math.h) of the sample, drawn
//      exactly as DrawIndices in sparse_select.cc, or of every value when
//      the input is no larger than the sample;
//   2. RadixSelect: the order statistic of each selection, written to the
//      two-float threshold array the encoders read.
// An encode is then three launches, an order-preserving compaction:
//   3. KeepCounts: per tile, how many elements are kept, and the first
//      non-finite element (the CPU encoders reject those);
//   4. one CTA scans the tile counts into tile offsets and the kept total;
//   5. KeepScatter: each tile writes its kept elements in index order at
//      its offset, as INDEX_VALUE pairs or as INDEX_SIGN words plus values,
// and, for INDEX_SIGN, a sixth: GroupMeans, one thread per group.
//
// Preconditions (the wrapper checks them; kernels trust them): pointers are
// device pointers, tables lie inside their buffers, encodes have fewer than
// 2^31 elements.
#ifndef TERN_KERNELS_SPARSE_CUDA_LAUNCH_H_
#define TERN_KERNELS_SPARSE_CUDA_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/philox.h"
#include "kernels/sparse_select_math.h"

namespace tern::kernels::cuda {

inline constexpr uint32_t kSparseThreads = 256;
// A compaction thread's elements: consecutive ones, so a CTA's kept
// elements come out in index order after one scan of per-thread counts.
inline constexpr uint32_t kSparseItemsPerThread = 8;
inline constexpr uint64_t kSparseTileElements =
    uint64_t{kSparseThreads} * kSparseItemsPerThread;
// Samples up to this many keys are selected by one CTA in one launch;
// larger ones (an input used whole) by grid-wide histograms, two launches
// per pass.
inline constexpr uint32_t kSingleCtaSelectKeys = 1u << 16;
// Selections per RadixSelect launch: the magnitude, or the two classes.
inline constexpr uint32_t kMaxSelects = 2;

// Compaction tiles of n elements.
constexpr uint64_t SparseTiles(uint64_t n) {
  return (n + kSparseTileElements - 1) / kSparseTileElements;
}

// Histogram words RadixSelect needs for num_selects selections.
constexpr uint64_t RadixHistogramWords(uint32_t num_selects) {
  return uint64_t{sparse::kRadixPasses} * num_selects * sparse::kRadixBins;
}

// What an encode reports back. first_nonfinite is all ones before the
// launches.
struct SparseSummary {
  unsigned long long first_nonfinite;
  unsigned long long kept;
};

// keys[j] for j < num_keys: the key (signed_keys ? SignedKey :
// MagnitudeKey) of value SampleIndex(stream, j, total) of the chunks'
// concatenation when `drawn`, of value j otherwise (num_keys == total).
// chunks: a nonempty table (sparse_cuda_plan.h) covering total values.
cudaError_t LaunchGatherSample(const float* values,
                               const sparse::SampleChunk* chunks,
                               uint32_t num_chunks, uint64_t total,
                               uint32_t num_keys, bool drawn,
                               const RandomStream& stream, bool signed_keys,
                               uint32_t* keys, cudaStream_t cuda_stream);

// Runs selects[0, num_selects) (num_selects <= kMaxSelects, each started by
// sparse::StartSelect) over keys[0, num_keys) and stores each result with
// sparse::StoreThreshold into thresholds[0, 2). histograms:
// RadixHistogramWords(num_selects) words, zero before the launch (unused
// for num_keys <= kSingleCtaSelectKeys).
cudaError_t LaunchRadixSelect(const uint32_t* keys, uint32_t num_keys,
                              sparse::RadixSelect* selects,
                              uint32_t num_selects, uint32_t* histograms,
                              float* thresholds, cudaStream_t cuda_stream);

// Steps 3 to 5 over values[0, n), 0 < n < 2^31, keeping sparse::KeepKind(
// v, thresholds[0], thresholds[1]) != kNotKept. tile_counts and
// tile_offsets: SparseTiles(n) words of scratch. summary: first_nonfinite
// all ones before the launch; gets the first non-finite index (if any) and
// the kept count. With pairs, out[2k] and out[2k + 1] are the k-th kept
// element's index and float bits (2n words); otherwise out[k] is its
// INDEX_SIGN word and kept[k] its value (n words each).
cudaError_t LaunchKeep(const float* values, uint64_t n,
                       const float* thresholds, uint32_t* tile_counts,
                       uint32_t* tile_offsets, SparseSummary* summary,
                       bool pairs, uint32_t* out, float* kept,
                       cudaStream_t cuda_stream);

// scalers[2g], scalers[2g + 1] = sparse::KeptMeans of group g of
// group_size (>= 1) elements, for the NumGroups(n, group_size) groups, from
// the summary->kept words and values LaunchKeep wrote.
cudaError_t LaunchGroupMeans(const uint32_t* words, const float* kept,
                             const SparseSummary* summary, uint64_t n,
                             uint32_t group_size, float* scalers,
                             cudaStream_t cuda_stream);

}  // namespace tern::kernels::cuda

#endif  // TERN_KERNELS_SPARSE_CUDA_LAUNCH_H_
