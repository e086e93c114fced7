// TernGrad on a CUDA device (Wen et al., NIPS 2017; DESIGN sections 3 and
// 6): the CUDA twins of the CPU kernels in terngrad.h, so that a worker
// whose gradients live on a GPU never copies them to the host to compress
// them. Every entry point covers all chunks of a flat device buffer in one
// kernel launch (not one per layer), and produces the same bytes and
// values as the CPU kernels for the same inputs, seed and step:
//
//   ComputeStats      per-chunk statistics (ChunkStats); the float lanes
//                     are the CPU's, the double fold above them is a fixed
//                     tree (terngrad_tile_cuda.h), so moments agree with
//                     the CPU to ~1e-16 relative and max_abs exactly.
//   QuantizePack      Ternarize and pack (TERNARY_2BIT / TERNARY_BASE3),
//                     with each chunk's clip bound, bit-identical with
//                     QuantizePack.
//   SumTernaryPushes  the integer sums of N pushes, equal to N
//                     AccumulateTernary calls on zeroed sums.
//   DecodeSums        a pull (SUM_BITS / SUM_RADIX) to floats,
//                     bit-identical with DecodeSums.
//
// Failures: a chunk table that does not fit its buffers is
// INVALID_ARGUMENT naming the entry (checked on the host before anything
// runs); bytes that fail validation (they came from the network) are
// INVALID_ARGUMENT naming the chunk (and push); an error of the CUDA runtime
// is a status naming the call and cudaGetErrorString's text
// (RESOURCE_EXHAUSTED for out of memory, UNAVAILABLE for a missing device or
// driver, INTERNAL otherwise). Kernels never read or write outside the
// ranges the table gives.
//
// Only built with --config=cuda.
#ifndef TERN_KERNELS_TERNGRAD_CUDA_H_
#define TERN_KERNELS_TERNGRAD_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/philox.h"
#include "kernels/cuda_context.h"
#include "kernels/payload.h"
#include "kernels/terngrad.h"
#include "kernels/terngrad_cuda_launch.h"

namespace tern::kernels {

// ---------------------------------------------------------------------------
// Chunk tables. Offsets and counts are in elements of the flat float (or
// int32) buffers, and in bytes of packed buffers.

// A chunk whose statistics to compute: values[offset, offset + count).
struct CudaStatsChunk {
  uint64_t offset = 0;
  uint64_t count = 0;
};

// A chunk to ternarize: values[offset, offset + count) into
// packed[packed_offset, packed_offset + PackedTernaryBytes(count, layout)),
// with the (shared) scaler and clipped at ClipBound(clip_bound, scaler) (the
// worker's own s_ik under ClipRule::kWorker; +Inf clips at the scaler),
// drawing from the stream with chunk = key.
struct CudaEncodeChunk {
  uint32_t key = 0;
  uint64_t offset = 0;
  uint64_t count = 0;
  uint64_t packed_offset = 0;
  float scaler = 0.0f;
  float clip_bound = std::numeric_limits<float>::infinity();
};

// A chunk of pushes or of a pull: `count` elements whose payload is at
// packed_offset, written to out[offset, offset + count). The scaler is the
// pull's (DecodeSums only); the key names the chunk in errors.
struct CudaSumChunk {
  uint32_t key = 0;
  uint64_t packed_offset = 0;
  uint64_t count = 0;
  uint64_t offset = 0;
  float scaler = 0.0f;
};

// A validated table as the kernels take it: one entry per chunk, and the
// CTAs each chunk owns (terngrad_cuda_launch.h). Built on the host; exposed
// so benchmarks can time the kernels alone and tests can check the
// validation without a GPU.
template <typename Entry>
struct CudaLaunchTable {
  std::vector<Entry> chunks;
  std::vector<uint32_t> first_cta;
  uint32_t num_ctas = 0;
};

absl::StatusOr<CudaLaunchTable<cuda::StatsChunk>> PlanCudaStats(
    absl::Span<const CudaStatsChunk> chunks, uint64_t num_values);

// layout: kTernary2Bit or kTernaryBase3. Output ranges must not overlap.
absl::StatusOr<CudaLaunchTable<cuda::QuantizeChunk>> PlanCudaQuantize(
    absl::Span<const CudaEncodeChunk> chunks, uint64_t num_values,
    Layout layout, uint64_t packed_size);

// Push payloads in `layout` (kTernary2Bit / kTernaryBase3) inside buffers of
// push_size bytes; sums into a buffer of num_sums.
absl::StatusOr<CudaLaunchTable<cuda::SumChunk>> PlanCudaSumPushes(
    absl::Span<const CudaSumChunk> chunks, uint64_t push_size, Layout layout,
    uint64_t num_sums);

// Pull payloads of N = num_summands in `layout` (kSumBits / kSumRadix)
// inside a buffer of packed_size bytes; values into a buffer of num_out.
absl::StatusOr<CudaLaunchTable<cuda::SumChunk>> PlanCudaDecodeSums(
    absl::Span<const CudaSumChunk> chunks, uint64_t packed_size,
    uint32_t num_summands, Layout layout, uint64_t num_out);

// ---------------------------------------------------------------------------

// The TernGrad kernels on one device, with their own stream and scratch
// memory (chunk tables, partial statistics, error words), which grow to the
// largest call and are reused.
//
// Every method enqueues its work on stream(), waits for it, and returns
// once the results are in place, so the caller may reuse or free its
// buffers at once; device inputs written on another stream must be ready
// before the call (synchronize that stream first). Pointers named values,
// packed, pushes, sums and out are device pointers.
//
// Not thread-safe: one caller at a time (a worker uses one per GPU).
// Methods make the context's device current on the calling thread.
class TernGradCuda : public CudaContext {
 public:
  // A context on the calling thread's current device. UNAVAILABLE when
  // there is no usable device.
  static absl::StatusOr<std::unique_ptr<TernGradCuda>> Create();

  ~TernGradCuda();
  TernGradCuda(const TernGradCuda&) = delete;
  TernGradCuda& operator=(const TernGradCuda&) = delete;

  // ComputeStats() of each chunk of values[0, num_values).
  absl::StatusOr<std::vector<ChunkStats>> ComputeStats(
      const float* values, uint64_t num_values,
      absl::Span<const CudaStatsChunk> chunks);

  // QuantizePack() of each chunk into `packed` (packed_size bytes). Chunk c
  // draws from `stream` with stream.chunk = chunks[c].key.
  absl::Status QuantizePack(const float* values, uint64_t num_values,
                            absl::Span<const CudaEncodeChunk> chunks,
                            const RandomStream& stream, Layout layout,
                            uint8_t* packed, uint64_t packed_size);

  // For each chunk, sums[offset + i] = the sum over the pushes of code i,
  // the pushes being device buffers of push_size bytes each holding the
  // chunk's payload at packed_offset. Validates every push like
  // AccumulateTernary; on error the sums are unspecified.
  absl::Status SumTernaryPushes(absl::Span<const uint8_t* const> pushes,
                                uint64_t push_size,
                                absl::Span<const CudaSumChunk> chunks,
                                Layout layout, int32_t* sums,
                                uint64_t num_sums);

  // DecodeSums() of each chunk's pull (N = num_summands, the chunk's
  // scaler) into out[offset, offset + count). Validates like DecodeSums; on
  // error the output is unspecified.
  absl::Status DecodeSums(const uint8_t* packed, uint64_t packed_size,
                          absl::Span<const CudaSumChunk> chunks,
                          uint32_t num_summands, Layout layout, float* out,
                          uint64_t num_out);

 private:
  explicit TernGradCuda(Opened opened);

  // Zeroes num_words error words on the stream; returns their address.
  absl::StatusOr<uint32_t*> ClearErrors(size_t num_words);
  // Copies num_words error words back and waits for the stream.
  absl::StatusOr<std::vector<uint32_t>> FetchErrors(size_t num_words);

  DeviceScratch partials_;
  DeviceScratch counters_;  // zero between calls (the stats kernel resets
                            // the ones it uses)
  DeviceScratch results_;
  DeviceScratch errors_;
};

}  // namespace tern::kernels

#endif  // TERN_KERNELS_TERNGRAD_CUDA_H_
