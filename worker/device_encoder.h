// TernGrad's worker-side kernels on the device the gradients live on, so
// that a worker training on a GPU does not copy its gradients to the host to
// compress them: the chunk statistics and the quantize+pack run there, and
// only the packed bytes (2 bits or less per element) cross to the host.
// The payloads are the CPU codec's bytes for the same gradients, scalers,
// seed and step (kernels/terngrad_cuda.h), so GPU and CPU workers can train
// together.
//
// Only the CUDA implementation exists (device_encoder_cuda.cc, built with
// --config=cuda); a model on the CPU needs none.
#ifndef TERN_WORKER_DEVICE_ENCODER_H_
#define TERN_WORKER_DEVICE_ENCODER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "c10/core/Device.h"
#include "common/partitioner.h"
#include "common/philox.h"
#include "kernels/payload.h"
#include "kernels/terngrad.h"

namespace tern::worker {

// Not thread-safe; one training loop uses it. Pointers named gradients are
// the flat device buffer of ParamBuffer::GatherDeviceGradients (total
// floats); work queued on libtorch's stream is waited for first.
class DeviceEncoder {
 public:
  virtual ~DeviceEncoder() = default;

  // ComputeStats of every chunk, in order.
  virtual absl::StatusOr<std::vector<kernels::ChunkStats>> Stats(
      const float* gradients, uint64_t total,
      absl::Span<const Chunk> chunks) = 0;

  // The TernGrad push of each chunk with its scaler (scalers[i] for
  // chunks[i]), clipped at ClipBound(clip_bounds[i], scalers[i]) (the
  // worker's own s_ik under ClipRule::kWorker, +Inf under kShared), in
  // `layout`, drawing with stream.chunk = the chunk's key: what
  // TernGradCodec::Encode gives with that EncodeContext.
  virtual absl::StatusOr<std::vector<kernels::Payload>> EncodeTernGrad(
      const float* gradients, uint64_t total, absl::Span<const Chunk> chunks,
      absl::Span<const float> scalers, absl::Span<const float> clip_bounds,
      const RandomStream& stream, kernels::Layout layout) = 0;
};

// The encoder for a model on `device`: null on the CPU. On a GPU,
// FAILED_PRECONDITION when this binary has no CUDA kernels (built without
// --config=cuda) or no device can be used.
absl::StatusOr<std::unique_ptr<DeviceEncoder>> MakeDeviceEncoder(
    const c10::Device& device);

}  // namespace tern::worker

#endif  // TERN_WORKER_DEVICE_ENCODER_H_
