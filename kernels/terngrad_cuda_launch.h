// The host entry points of the TernGrad CUDA kernels (terngrad_gpu.cu,
// terngrad_sums_gpu.cu): plain functions that enqueue one kernel on a
// stream and return the launch's cudaError_t. nvcc compiles the .cu files
// outside Bazel's C++ toolchain, so nothing here uses Abseil; the C++
// wrapper in terngrad_cuda.h builds and validates the chunk tables, owns
// the device memory and turns errors into absl::Status.
//
// Every launch covers all chunks of a flat buffer at once (DESIGN section 2:
// a chunk is the unit of scalers and statistics; one launch per layer would
// be hundreds of tiny kernels per step). Chunk c owns the CTAs
// [first_cta[c], first_cta[c + 1]) (the last up to num_ctas); first_cta is
// non-decreasing with first_cta[0] == 0, an empty chunk owns none. A CTA
// finds its chunk with a warp-wide search of first_cta.
//
// Preconditions (the wrapper checks them; a kernel trusts them): all
// pointers are device pointers; every chunk's input and output ranges lie
// inside their buffers; output ranges do not overlap; counts are at most
// kMaxTernaryElements.
#ifndef TERN_KERNELS_TERNGRAD_CUDA_LAUNCH_H_
#define TERN_KERNELS_TERNGRAD_CUDA_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/payload.h"
#include "kernels/terngrad_tile_cuda.h"

namespace tern::kernels::cuda {

// Threads per CTA and elements per CTA of each kernel.
inline constexpr uint32_t kStatsThreads = 128;
inline constexpr uint32_t kStatsBlocksPerCta =
    kStatsThreads / tile::kStatsThreadsPerBlock;
inline constexpr uint64_t kStatsElementsPerCta =
    uint64_t{kStatsBlocksPerCta} * kStatsBlockSize;
inline constexpr uint32_t kThreads = 256;
inline constexpr uint32_t kRadixThreads = 128;

// Elements per CTA of QuantizePack and SumTernary for a push layout.
constexpr uint64_t TernaryElementsPerCta(Layout layout) {
  return uint64_t{kThreads} * (layout == Layout::kTernaryBase3
                                   ? tile::kBase3Elements
                                   : tile::kTwoBitElements);
}

// Elements per CTA of DecodeSums; radix_digits is
// SumRadixDigitsPerWord(N) for kSumRadix.
constexpr uint64_t DecodeElementsPerCta(Layout layout, uint32_t radix_digits) {
  return layout == Layout::kSumRadix
             ? uint64_t{kRadixThreads} * radix_digits
             : uint64_t{kThreads} * tile::kSumBitsElements;
}

// ---------------------------------------------------------------------------
// Chunk statistics: per chunk, the moments and the largest magnitude of
// values[offset, offset + count), in the order terngrad_tile_cuda.h defines.

struct StatsChunk {
  uint64_t offset;  // first element in the flat buffer
  uint64_t count;   // > 0 (empty chunks own no CTA)
};

struct StatsResult {
  tile::StatsNode node;
  float shift;
};

// partials: num_ctas nodes (scratch). counters: num_chunks words that are
// zero before the launch; the kernel leaves them zero again. results:
// num_chunks entries; entries of empty chunks are not written.
cudaError_t LaunchChunkStats(const float* values, const StatsChunk* chunks,
                             const uint32_t* first_cta, uint32_t num_chunks,
                             uint32_t num_ctas, tile::StatsNode* partials,
                             uint32_t* counters, StatsResult* results,
                             cudaStream_t stream);

// ---------------------------------------------------------------------------
// Ternarize and pack (QuantizePack in terngrad.h) into one packed buffer.

struct QuantizeChunk {
  uint64_t offset;  // first element in the flat buffer
  uint64_t count;
  uint64_t packed_offset;  // first byte of the chunk's payload
  float scaler;
  float bound;   // ClipBound(clip bound, scaler): Ternarize's clip
  uint32_t key;  // RandomStream::chunk
};

// layout: kTernary2Bit or kTernaryBase3. Chunk c draws from
// RandomStream{seed, step, chunks[c].key, worker}.
cudaError_t LaunchQuantizePack(const float* values, const QuantizeChunk* chunks,
                               const uint32_t* first_cta, uint32_t num_chunks,
                               uint32_t num_ctas, uint64_t seed, uint32_t step,
                               uint32_t worker, Layout layout, uint8_t* packed,
                               cudaStream_t stream);

// ---------------------------------------------------------------------------
// Sums of N pushes, and decoding pulled sums.

struct SumChunk {
  uint64_t packed_offset;  // first byte of the chunk's payload
  uint64_t count;
  uint64_t offset;  // first element in the sums / output buffer
  float scaler;     // decode only
};

// sums[offset + i] = sum over w of code_w(i) (overwriting), the code read
// from pushes[w] + packed_offset in `layout` (kTernary2Bit or
// kTernaryBase3). pushes: a device array of num_pushes device pointers.
// errors: num_pushes * num_chunks words, zero before the launch; errors
// [w * num_chunks + c] gets tile::kError* bits for push w of chunk c.
cudaError_t LaunchSumTernary(const uint8_t* const* pushes, uint32_t num_pushes,
                             const SumChunk* chunks, const uint32_t* first_cta,
                             uint32_t num_chunks, uint32_t num_ctas,
                             Layout layout, int32_t* sums, uint32_t* errors,
                             cudaStream_t stream);

// out[offset + i] = DecodeValue(sum_i, DecodeFactor(scaler, N)) for the
// sums in `layout` (kSumBits or kSumRadix) at packed + packed_offset.
// errors: num_chunks words, zero before the launch.
cudaError_t LaunchDecodeSums(const uint8_t* packed, const SumChunk* chunks,
                             const uint32_t* first_cta, uint32_t num_chunks,
                             uint32_t num_ctas, uint32_t num_summands,
                             Layout layout, float* out, uint32_t* errors,
                             cudaStream_t stream);

}  // namespace tern::kernels::cuda

#endif  // TERN_KERNELS_TERNGRAD_CUDA_LAUNCH_H_
