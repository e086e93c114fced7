// 1-bit quantization with error feedback on a CUDA device (Seide et al.
// 2014; Dryden et al. 2016, Sec. 3.1): the twin of OneBitCodec::Encode
// (onebit_codec.h) and of ErrorFeedback::EncodeCompensated
// (error_feedback.h) over a flat device buffer, every chunk in the same
// launches. The payloads are the CPU codec's bytes and scalers, bit for
// bit, for the same values, group sizes, sample size, seed and step: the
// means are order-free fixed-point sums (onebit_math.h), the sign bits and
// the residual elementwise.
//
// Only the payloads cross to the host: ceil(n / 8) bytes of sign bits and
// two floats per group. The residual stays on the device, in a buffer laid
// out as the values.
//
// Failures: a chunk table that does not fit its buffers or a group size
// above the uint32 header is INVALID_ARGUMENT naming the entry (checked on
// the host first); a non-finite (compensated) value or a residual that
// would overflow is INVALID_ARGUMENT naming the chunk and element, and
// leaves the residual as it was; a CUDA runtime error is a status naming
// the call (CudaStatus in cuda_context.h).
//
// Only built with --config=cuda.
#ifndef TERN_KERNELS_ONEBIT_CUDA_H_
#define TERN_KERNELS_ONEBIT_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/philox.h"
#include "kernels/cuda_context.h"
#include "kernels/onebit_cuda_launch.h"
#include "kernels/onebit_cuda_plan.h"
#include "kernels/payload.h"

namespace tern::kernels {

// Not thread-safe: one caller at a time. Every method enqueues its work on
// stream() and waits for it; device inputs written on another stream must
// be ready before the call.
class OneBitCuda : public CudaContext {
 public:
  // sample_size as OneBitCodec's: 0 for exact means, else groups longer
  // than it are estimated from that many draws. UNAVAILABLE without a
  // device.
  static absl::StatusOr<std::unique_ptr<OneBitCuda>> Create(
      uint32_t sample_size);

  // OneBitCodec::Encode of every chunk of the device buffer values[0,
  // num_values), in the chunks' order. Chunk c draws from `stream` with
  // stream.chunk = chunks[c].key.
  absl::StatusOr<std::vector<Payload>> Encode(
      const float* values, uint64_t num_values,
      absl::Span<const CudaOneBitChunk> chunks, const RandomStream& stream);

  // ErrorFeedback::EncodeCompensated of values + residual for every chunk
  // (which must not overlap); on success residual[offset, offset + count)
  // of every chunk becomes the compensated values minus their decoded
  // payload. `residual` is a device buffer of num_values floats.
  absl::StatusOr<std::vector<Payload>> EncodeCompensated(
      const float* values, float* residual, uint64_t num_values,
      absl::Span<const CudaOneBitChunk> chunks, const RandomStream& stream);

 private:
  OneBitCuda(Opened opened, uint32_t sample_size);

  absl::StatusOr<std::vector<Payload>> Run(
      const float* values, float* residual, uint64_t num_values,
      absl::Span<const CudaOneBitChunk> chunks, const RandomStream& stream);
  // Grows `array` to at least `size` elements (typed scratch; the chunk
  // tables go through UploadTables).
  template <typename T>
  absl::Status Grow(DeviceArray<T>* array, size_t size);
  // The value at flat index `index` of values (+ residual), for messages.
  float ValueAt(const float* values, const float* residual, uint64_t index);

  const uint32_t sample_size_;
  DeviceArray<cuda::OneBitGroupSums> groups_;
  DeviceArray<float> means_;
  DeviceArray<uint8_t> packed_;
  DeviceArray<unsigned long long> first_bad_;  // values', residuals'
  DeviceArray<float> next_residual_;
};

}  // namespace tern::kernels

#endif  // TERN_KERNELS_ONEBIT_CUDA_H_
