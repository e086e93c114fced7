// The C++ side of the 1-bit CUDA kernels (onebit_gpu.cu): tables checked on
// the host, scratch memory that grows to the largest call, errors as
// absl::Status.
#include "kernels/onebit_cuda.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "kernels/onebit.h"

namespace tern::kernels {

absl::StatusOr<std::unique_ptr<OneBitCuda>> OneBitCuda::Create(
    uint32_t sample_size) {
  TERN_ASSIGN_OR_RETURN(const Opened opened, Open());
  return absl::WrapUnique(new OneBitCuda(opened, sample_size));
}

OneBitCuda::OneBitCuda(Opened opened, uint32_t sample_size)
    : CudaContext(opened), sample_size_(sample_size) {}

template <typename T>
absl::Status OneBitCuda::Grow(DeviceArray<T>* array, size_t size) {
  if (array->size() >= size) return absl::OkStatus();
  TERN_ASSIGN_OR_RETURN(*array, DeviceArray<T>::Allocate(size));
  return absl::OkStatus();
}

float OneBitCuda::ValueAt(const float* values, const float* residual,
                          uint64_t index) {
  float value = 0.0f;
  float compensation = 0.0f;
  cudaMemcpy(&value, values + index, sizeof(float), cudaMemcpyDeviceToHost);
  if (residual != nullptr) {
    cudaMemcpy(&compensation, residual + index, sizeof(float),
               cudaMemcpyDeviceToHost);
  }
  return value + compensation;
}

absl::StatusOr<std::vector<Payload>> OneBitCuda::Encode(
    const float* values, uint64_t num_values,
    absl::Span<const CudaOneBitChunk> chunks, const RandomStream& stream) {
  return Run(values, nullptr, num_values, chunks, stream);
}

absl::StatusOr<std::vector<Payload>> OneBitCuda::EncodeCompensated(
    const float* values, float* residual, uint64_t num_values,
    absl::Span<const CudaOneBitChunk> chunks, const RandomStream& stream) {
  if (residual == nullptr && num_values != 0) {
    return absl::InvalidArgumentError("onebit error feedback: no residual");
  }
  return Run(values, residual, num_values, chunks, stream);
}

absl::StatusOr<std::vector<Payload>> OneBitCuda::Run(
    const float* values, float* residual, uint64_t num_values,
    absl::Span<const CudaOneBitChunk> chunks, const RandomStream& stream) {
  const bool feedback = residual != nullptr;
  TERN_ASSIGN_OR_RETURN(
      OneBitCudaPlan plan,
      PlanOneBitCuda(chunks, num_values, sample_size_, feedback));
  TERN_RETURN_IF_ERROR(Activate());

  const size_t num_chunks = plan.chunks.size();
  TERN_RETURN_IF_ERROR(Grow(&groups_, plan.num_groups));
  TERN_RETURN_IF_ERROR(Grow(&means_, 2 * plan.num_groups));
  TERN_RETURN_IF_ERROR(Grow(&packed_, plan.packed_bytes));
  TERN_RETURN_IF_ERROR(Grow(&first_bad_, 2));
  if (feedback) TERN_RETURN_IF_ERROR(Grow(&next_residual_, num_values));

  // Tables in, accumulators cleared: all on the stream, in order.
  TERN_ASSIGN_OR_RETURN(
      const std::vector<void*> tables,
      UploadTables(
          {{plan.chunks.data(), num_chunks * sizeof(cuda::OneBitChunk)},
           {plan.element_first_cta.data(), num_chunks * sizeof(uint32_t)},
           {plan.draw_first_cta.data(), num_chunks * sizeof(uint32_t)}}));
  if (plan.num_groups != 0) {
    TERN_RETURN_IF_ERROR(CudaStatus(
        cudaMemsetAsync(groups_.data(), 0,
                        plan.num_groups * sizeof(cuda::OneBitGroupSums),
                        stream_),
        "cudaMemsetAsync (group sums)"));
  }
  TERN_RETURN_IF_ERROR(CudaStatus(
      cudaMemsetAsync(first_bad_.data(), 0xFF, 2 * sizeof(unsigned long long),
                      stream_),
      "cudaMemsetAsync (error words)"));

  const cuda::OneBitInputs in{values,
                              residual,
                              static_cast<const cuda::OneBitChunk*>(tables[0]),
                              static_cast<uint32_t>(num_chunks),
                              stream.seed,
                              stream.step,
                              stream.worker};
  const cuda::OneBitGrid elements{static_cast<const uint32_t*>(tables[1]),
                                  plan.element_ctas};
  const cuda::OneBitGrid draws{static_cast<const uint32_t*>(tables[2]),
                               plan.draw_ctas};
  TERN_RETURN_IF_ERROR(CudaStatus(
      cuda::LaunchOneBitGroupMax(in, elements, groups_.data(),
                                 first_bad_.data(), stream_),
      "LaunchOneBitGroupMax"));
  TERN_RETURN_IF_ERROR(CudaStatus(
      cuda::LaunchOneBitSampleMax(in, draws, groups_.data(), stream_),
      "LaunchOneBitSampleMax"));
  TERN_RETURN_IF_ERROR(CudaStatus(
      cuda::LaunchOneBitGroupSums(in, elements, groups_.data(), packed_.data(),
                                  stream_),
      "LaunchOneBitGroupSums"));
  TERN_RETURN_IF_ERROR(CudaStatus(
      cuda::LaunchOneBitSampleSums(in, draws, groups_.data(), stream_),
      "LaunchOneBitSampleSums"));
  TERN_RETURN_IF_ERROR(CudaStatus(
      cuda::LaunchOneBitMeans(in, plan.num_groups, groups_.data(),
                              means_.data(), stream_),
      "LaunchOneBitMeans"));
  if (feedback) {
    TERN_RETURN_IF_ERROR(CudaStatus(
        cuda::LaunchOneBitResidual(in, elements, means_.data(),
                                   next_residual_.data(),
                                   first_bad_.data() + 1, stream_),
        "LaunchOneBitResidual"));
  }

  // Only the payloads come back.
  std::vector<uint8_t> packed(plan.packed_bytes);
  std::vector<float> means(2 * plan.num_groups);
  unsigned long long first_bad[2];
  if (!packed.empty()) {
    TERN_RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(packed.data(), packed_.data(), packed.size(),
                        cudaMemcpyDeviceToHost, stream_),
        "cudaMemcpyAsync (sign bits)"));
  }
  if (!means.empty()) {
    TERN_RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(means.data(), means_.data(),
                        means.size() * sizeof(float), cudaMemcpyDeviceToHost,
                        stream_),
        "cudaMemcpyAsync (means)"));
  }
  TERN_RETURN_IF_ERROR(CudaStatus(
      cudaMemcpyAsync(first_bad, first_bad_.data(), sizeof(first_bad),
                      cudaMemcpyDeviceToHost, stream_),
      "cudaMemcpyAsync (error words)"));
  TERN_RETURN_IF_ERROR(Synchronize());

  // The chunk of a flat index, for messages (ranges do not overlap where
  // it matters: the first one containing it is named).
  const auto locate = [&](uint64_t flat, size_t* entry, uint64_t* element) {
    for (size_t i = 0; i < chunks.size(); ++i) {
      if (flat >= chunks[i].offset && flat - chunks[i].offset < chunks[i].count) {
        *entry = i;
        *element = flat - chunks[i].offset;
        return;
      }
    }
  };
  constexpr unsigned long long kNone = ~0ull;
  if (first_bad[0] != kNone) {
    size_t entry = 0;
    uint64_t element = 0;
    locate(first_bad[0], &entry, &element);
    return absl::InvalidArgumentError(absl::StrFormat(
        "onebit: chunk %d: %s %d is %g, want a finite value", chunks[entry].key,
        feedback ? "compensated value" : "element", element,
        ValueAt(values, residual, first_bad[0])));
  }
  if (feedback && first_bad[1] != kNone) {
    size_t entry = 0;
    uint64_t element = 0;
    locate(first_bad[1], &entry, &element);
    return absl::InvalidArgumentError(absl::StrFormat(
        "onebit: chunk %d: the residual of element %d overflows (value %g)",
        chunks[entry].key, element, ValueAt(values, residual, first_bad[1])));
  }

  // Success: the next residual replaces the old one, chunk by chunk.
  if (feedback) {
    for (const CudaOneBitChunk& chunk : chunks) {
      if (chunk.count == 0) continue;
      TERN_RETURN_IF_ERROR(CudaStatus(
          cudaMemcpyAsync(residual + chunk.offset,
                          next_residual_.data() + chunk.offset,
                          chunk.count * sizeof(float),
                          cudaMemcpyDeviceToDevice, stream_),
          "cudaMemcpyAsync (residual)"));
    }
    TERN_RETURN_IF_ERROR(Synchronize());
  }

  return OneBitPayloads(plan, packed, means);
}

}  // namespace tern::kernels
