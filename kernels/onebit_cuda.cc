// The C++ side of the 1-bit CUDA kernels (onebit_gpu.cu): tables checked on
// the host, scratch memory that grows to the largest call, errors as
// absl::Status.
#include "kernels/onebit_cuda.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "kernels/onebit.h"

namespace tern::kernels {
namespace {

// The grid's x dimension holds at most 2^31 - 1 CTAs.
constexpr uint64_t kMaxCtas = std::numeric_limits<int32_t>::max();

uint64_t CeilDiv(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

// Appends chunk i's first CTA and adds its `ctas`; false past kMaxCtas.
bool AddCtas(uint64_t ctas, std::vector<uint32_t>* first_cta,
             uint64_t* total) {
  first_cta->push_back(static_cast<uint32_t>(*total));
  *total += ctas;
  return *total <= kMaxCtas;
}

}  // namespace

absl::StatusOr<OneBitCudaPlan> PlanOneBitCuda(
    absl::Span<const CudaOneBitChunk> chunks, uint64_t num_values,
    uint32_t sample_size, bool disjoint) {
  OneBitCudaPlan plan;
  uint64_t element_ctas = 0;
  uint64_t draw_ctas = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const CudaOneBitChunk& chunk = chunks[i];
    if (chunk.count > num_values || chunk.offset > num_values - chunk.count) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "onebit chunk table entry %d (key %d): values [%d, %d + %d) are "
          "outside the buffer of %d",
          i, chunk.key, chunk.offset, chunk.offset, chunk.count, num_values));
    }
    if (chunk.count > kMaxOneBitElements) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "onebit chunk table entry %d (key %d) of %d values is above the "
          "limit of %d",
          i, chunk.key, chunk.count, kMaxOneBitElements));
    }
    const uint64_t group_size = OneBitGroupSize(chunk.count, chunk.group_size);
    if (group_size > std::numeric_limits<uint32_t>::max()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "onebit chunk table entry %d (key %d): groups of %d values do not "
          "fit the uint32 header",
          i, chunk.key, group_size));
    }
    const uint64_t groups = OneBitNumGroups(chunk.count, group_size);
    // Draws exist when a group is longer than the sample (GroupMeans).
    const bool sampled = sample_size != 0 && group_size > sample_size;
    cuda::OneBitChunk entry;
    entry.offset = chunk.offset;
    entry.count = chunk.count;
    entry.group_size = group_size;
    entry.first_group = plan.num_groups;
    entry.packed_offset = plan.packed_bytes;
    entry.key = chunk.key;
    entry.sample_size = sample_size;
    plan.chunks.push_back(entry);
    plan.num_groups += groups;
    plan.packed_bytes += SignBitsBytes(chunk.count);
    if (!AddCtas(CeilDiv(chunk.count, cuda::kOneBitElementsPerCta),
                 &plan.element_first_cta, &element_ctas) ||
        !AddCtas(sampled ? CeilDiv(groups * sample_size,
                                   cuda::kOneBitDrawsPerCta)
                         : 0,
                 &plan.draw_first_cta, &draw_ctas)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "onebit chunk table of %d entries needs more than %d CTAs",
          chunks.size(), kMaxCtas));
    }
  }
  plan.element_ctas = static_cast<uint32_t>(element_ctas);
  plan.draw_ctas = static_cast<uint32_t>(draw_ctas);
  if (disjoint) {
    std::vector<size_t> order(chunks.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return chunks[a].offset < chunks[b].offset;
    });
    uint64_t end = 0;
    size_t previous = 0;
    for (size_t k = 0; k < order.size(); ++k) {
      const CudaOneBitChunk& chunk = chunks[order[k]];
      if (chunk.count == 0) continue;
      if (k > 0 && chunk.offset < end) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "onebit chunk table entries %d and %d overlap in the residual",
            previous, order[k]));
      }
      end = chunk.offset + chunk.count;
      previous = order[k];
    }
  }
  return plan;
}

absl::StatusOr<std::unique_ptr<OneBitCuda>> OneBitCuda::Create(
    uint32_t sample_size) {
  if (CudaDeviceCount() == 0) {
    return absl::UnavailableError("no CUDA device (cudaGetDeviceCount)");
  }
  int device = 0;
  TERN_RETURN_IF_ERROR(CudaStatus(cudaGetDevice(&device), "cudaGetDevice"));
  cudaStream_t stream = nullptr;
  // Blocking: work on the legacy default stream is ordered before ours.
  TERN_RETURN_IF_ERROR(CudaStatus(cudaStreamCreate(&stream), "cudaStreamCreate"));
  return absl::WrapUnique(new OneBitCuda(device, stream, sample_size));
}

OneBitCuda::OneBitCuda(int device, cudaStream_t stream, uint32_t sample_size)
    : device_(device), stream_(stream), sample_size_(sample_size) {}

// Every method waits for its work, so nothing is in flight here.
OneBitCuda::~OneBitCuda() { cudaStreamDestroy(stream_); }

template <typename T>
absl::Status OneBitCuda::Reserve(DeviceArray<T>* array, size_t size) {
  if (array->size() >= size) return absl::OkStatus();
  TERN_ASSIGN_OR_RETURN(*array, DeviceArray<T>::Allocate(size));
  return absl::OkStatus();
}

absl::Status OneBitCuda::Synchronize() {
  return CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
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
  TERN_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), "cudaSetDevice"));

  const size_t num_chunks = plan.chunks.size();
  TERN_RETURN_IF_ERROR(Reserve(&chunks_, num_chunks));
  TERN_RETURN_IF_ERROR(Reserve(&first_ctas_, 2 * num_chunks));
  TERN_RETURN_IF_ERROR(Reserve(&groups_, plan.num_groups));
  TERN_RETURN_IF_ERROR(Reserve(&means_, 2 * plan.num_groups));
  TERN_RETURN_IF_ERROR(Reserve(&packed_, plan.packed_bytes));
  TERN_RETURN_IF_ERROR(Reserve(&first_bad_, 2));
  if (feedback) TERN_RETURN_IF_ERROR(Reserve(&next_residual_, num_values));

  // Tables in, accumulators cleared: all on the stream, in order.
  if (num_chunks != 0) {
    TERN_RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(chunks_.data(), plan.chunks.data(),
                        num_chunks * sizeof(cuda::OneBitChunk),
                        cudaMemcpyHostToDevice, stream_),
        "cudaMemcpyAsync (chunk table)"));
    std::vector<uint32_t> first_ctas = plan.element_first_cta;
    first_ctas.insert(first_ctas.end(), plan.draw_first_cta.begin(),
                      plan.draw_first_cta.end());
    TERN_RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(first_ctas_.data(), first_ctas.data(),
                        first_ctas.size() * sizeof(uint32_t),
                        cudaMemcpyHostToDevice, stream_),
        "cudaMemcpyAsync (CTA table)"));
    // The pageable copies above return once the source is consumed, so
    // `first_ctas` may go out of scope.
  }
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
                              chunks_.data(),
                              static_cast<uint32_t>(num_chunks),
                              stream.seed,
                              stream.step,
                              stream.worker};
  const cuda::OneBitGrid elements{first_ctas_.data(), plan.element_ctas};
  const cuda::OneBitGrid draws{first_ctas_.data() + num_chunks,
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

  std::vector<Payload> payloads(num_chunks);
  for (size_t i = 0; i < num_chunks; ++i) {
    const cuda::OneBitChunk& entry = plan.chunks[i];
    Payload& payload = payloads[i];
    payload.codec = CodecId::kOneBit;
    payload.layout = Layout::kSignBits;
    payload.num_elements = entry.count;
    payload.num_summands = 1;
    const uint64_t groups = OneBitNumGroups(entry.count, entry.group_size);
    payload.scalers.assign(means.begin() + 2 * entry.first_group,
                           means.begin() + 2 * (entry.first_group + groups));
    // data = the little-endian uint32 group_size, then the sign bits.
    const uint32_t header = static_cast<uint32_t>(entry.group_size);
    payload.data.resize(4 + SignBitsBytes(entry.count));
    std::memcpy(payload.data.data(), &header, 4);
    if (entry.count != 0) {
      std::memcpy(payload.data.data() + 4, packed.data() + entry.packed_offset,
                  SignBitsBytes(entry.count));
    }
  }
  return payloads;
}

}  // namespace tern::kernels
