// MakeDeviceEncoder with the CUDA kernels (built with --config=cuda): a
// TernGradCuda context on the model's GPU.
#include <cuda_runtime_api.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/terngrad_cuda.h"
#include "torch/cuda.h"
#include "worker/device_encoder.h"

namespace tern::worker {
namespace {

class CudaEncoder final : public DeviceEncoder {
 public:
  explicit CudaEncoder(std::unique_ptr<kernels::TernGradCuda> cuda)
      : cuda_(std::move(cuda)) {}

  absl::StatusOr<std::vector<kernels::ChunkStats>> Stats(
      const float* gradients, uint64_t total,
      absl::Span<const Chunk> chunks) override {
    WaitForLibtorch();
    std::vector<kernels::CudaStatsChunk> table;
    table.reserve(chunks.size());
    for (const Chunk& chunk : chunks) {
      table.push_back({chunk.flat_offset, chunk.num_elements});
    }
    return cuda_->ComputeStats(gradients, total, table);
  }

  absl::StatusOr<std::vector<kernels::Payload>> EncodeTernGrad(
      const float* gradients, uint64_t total, absl::Span<const Chunk> chunks,
      absl::Span<const float> scalers, absl::Span<const float> clip_bounds,
      const RandomStream& stream, kernels::Layout layout) override {
    if (scalers.size() != chunks.size() ||
        clip_bounds.size() != chunks.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "EncodeTernGrad: ", scalers.size(), " scalers and ",
          clip_bounds.size(), " clip bounds for ", chunks.size(), " chunks"));
    }
    WaitForLibtorch();
    std::vector<kernels::CudaEncodeChunk> table;
    table.reserve(chunks.size());
    uint64_t packed_size = 0;
    for (size_t i = 0; i < chunks.size(); ++i) {
      table.push_back({chunks[i].key, chunks[i].flat_offset,
                       chunks[i].num_elements, packed_size, scalers[i],
                       clip_bounds[i]});
      packed_size +=
          kernels::PackedTernaryBytes(chunks[i].num_elements, layout);
    }
    if (packed_.size() < packed_size) {
      TERN_ASSIGN_OR_RETURN(packed_,
                            kernels::DeviceArray<uint8_t>::Allocate(packed_size));
    }
    TERN_RETURN_IF_ERROR(cuda_->QuantizePack(gradients, total, table, stream,
                                             layout, packed_.data(),
                                             packed_size));
    // The only copy to the host: the packed codes.
    std::string packed(packed_size, '\0');
    if (packed_size != 0) {
      TERN_RETURN_IF_ERROR(kernels::CudaStatus(
          cudaMemcpy(packed.data(), packed_.data(), packed_size,
                     cudaMemcpyDeviceToHost),
          "cudaMemcpy (packed TernGrad pushes)"));
    }
    std::vector<kernels::Payload> payloads(chunks.size());
    for (size_t i = 0; i < chunks.size(); ++i) {
      kernels::Payload& payload = payloads[i];
      payload.codec = kernels::CodecId::kTernGrad;
      payload.layout = layout;
      payload.num_elements = chunks[i].num_elements;
      payload.num_summands = 1;
      payload.scalers = {scalers[i]};
      payload.data = packed.substr(
          table[i].packed_offset,
          kernels::PackedTernaryBytes(chunks[i].num_elements, layout));
    }
    return payloads;
  }

 private:
  // The gradients were gathered by libtorch on its own stream; the kernels
  // run on the context's.
  static void WaitForLibtorch() { torch::cuda::synchronize(); }

  std::unique_ptr<kernels::TernGradCuda> cuda_;
  kernels::DeviceArray<uint8_t> packed_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceEncoder>> MakeDeviceEncoder(
    const c10::Device& device) {
  if (device.is_cpu()) return nullptr;
  if (!device.is_cuda()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no TernGrad kernels for device ", device.str()));
  }
  const int ordinal = device.has_index() ? device.index() : 0;
  if (ordinal >= kernels::CudaDeviceCount()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--device=", device.str(), ": the CUDA runtime sees ",
        kernels::CudaDeviceCount(), " device(s)"));
  }
  TERN_RETURN_IF_ERROR(
      kernels::CudaStatus(cudaSetDevice(ordinal), "cudaSetDevice"));
  absl::StatusOr<std::unique_ptr<kernels::TernGradCuda>> cuda =
      kernels::TernGradCuda::Create();
  if (!cuda.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--device=", device.str(), ": ", cuda.status().message()));
  }
  return std::make_unique<CudaEncoder>(*std::move(cuda));
}

}  // namespace tern::worker
