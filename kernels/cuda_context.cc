#include "kernels/cuda_context.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace tern::kernels {
namespace {

size_t AlignUp(size_t bytes) { return (bytes + 15) / 16 * 16; }

}  // namespace

absl::Status CudaStatus(cudaError_t error, absl::string_view call) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string message = absl::StrFormat(
      "%s: %s (%s)", call, cudaGetErrorString(error), cudaGetErrorName(error));
  switch (error) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorInvalidDevice:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // not sticky, but leave no error behind
    return 0;
  }
  return count;
}

// ---------------------------------------------------------------------------

absl::StatusOr<CudaContext::Opened> CudaContext::Open() {
  if (CudaDeviceCount() == 0) {
    return absl::UnavailableError("no CUDA device (cudaGetDeviceCount)");
  }
  Opened opened;
  TERN_RETURN_IF_ERROR(
      CudaStatus(cudaGetDevice(&opened.device), "cudaGetDevice"));
  // A blocking stream: work on the legacy default stream is ordered before
  // ours.
  TERN_RETURN_IF_ERROR(
      CudaStatus(cudaStreamCreate(&opened.stream), "cudaStreamCreate"));
  return opened;
}

CudaContext::CudaContext(Opened opened)
    : device_(opened.device), stream_(opened.stream) {}

// Subclasses' methods wait for their work, so nothing is in flight here.
CudaContext::~CudaContext() { cudaStreamDestroy(stream_); }

absl::Status CudaContext::Activate() const {
  return CudaStatus(cudaSetDevice(device_), "cudaSetDevice");
}

absl::Status CudaContext::Synchronize() {
  return CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

absl::Status CudaContext::Reserve(DeviceScratch* scratch, size_t bytes,
                                  bool zeroed) {
  if (scratch->size >= bytes) return absl::OkStatus();
  const size_t size = std::max(bytes, scratch->size * 2);
  scratch->data.reset();
  scratch->size = 0;
  void* data = nullptr;
  TERN_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&data, size), "cudaMalloc"));
  scratch->data.reset(data);
  if (zeroed) {
    TERN_RETURN_IF_ERROR(CudaStatus(cudaMemset(data, 0, size), "cudaMemset"));
  }
  scratch->size = size;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<void*>> CudaContext::UploadTables(
    std::initializer_list<std::pair<const void*, size_t>> parts) {
  // Every call waits for its stream before returning, except one that
  // failed half way: wait here too, so no copy from the staging (and no
  // kernel reading the tables) is still in flight when they are rewritten.
  TERN_RETURN_IF_ERROR(Synchronize());
  size_t total = 0;
  for (const auto& part : parts) total += AlignUp(part.second);
  if (pinned_.size < total) {
    const size_t size = std::max(total, pinned_.size * 2);
    pinned_.data.reset();
    pinned_.size = 0;
    void* data = nullptr;
    TERN_RETURN_IF_ERROR(
        CudaStatus(cudaMallocHost(&data, size), "cudaMallocHost"));
    pinned_.data.reset(data);
    pinned_.size = size;
  }
  TERN_RETURN_IF_ERROR(Reserve(&tables_, total));
  auto* staging = static_cast<uint8_t*>(pinned_.data.get());
  auto* device = static_cast<uint8_t*>(tables_.data.get());
  std::vector<void*> addresses;
  size_t at = 0;
  for (const auto& part : parts) {
    if (part.second > 0) std::memcpy(staging + at, part.first, part.second);
    addresses.push_back(device + at);
    at += AlignUp(part.second);
  }
  if (total > 0) {
    TERN_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(device, staging, total,
                                   cudaMemcpyHostToDevice, stream_),
                   "cudaMemcpyAsync (chunk tables)"));
  }
  return addresses;
}

}  // namespace tern::kernels
