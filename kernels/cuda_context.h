// What every family of CUDA kernels here needs around its launches
// (terngrad_cuda.h, onebit_cuda.h, sparse_cuda.h): CUDA runtime errors as
// absl::Status, device arrays, and a context that owns a stream on one
// device, scratch memory that grows to the largest call, and the upload of
// chunk tables through pinned staging.
//
// Only built with --config=cuda.
#ifndef TERN_KERNELS_CUDA_CONTEXT_H_
#define TERN_KERNELS_CUDA_CONTEXT_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace tern::kernels {

// OK for cudaSuccess; otherwise a status whose message names `call` and
// the runtime's description of `error`.
absl::Status CudaStatus(cudaError_t error, absl::string_view call);

// How many CUDA devices this process can use: 0 when there is none or no
// driver (those are not errors here: callers fall back to the CPU, tests
// skip).
int CudaDeviceCount();

// Device memory for `size` elements of T, freed by the destructor.
// Move-only; not thread-safe.
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;

  static absl::StatusOr<DeviceArray> Allocate(size_t size) {
    DeviceArray array;
    array.size_ = size;
    if (size == 0) return array;
    void* data = nullptr;
    absl::Status status =
        CudaStatus(cudaMalloc(&data, size * sizeof(T)), "cudaMalloc");
    if (!status.ok()) return status;
    array.data_.reset(static_cast<T*>(data));
    return array;
  }

  // Allocates and copies `host` in (synchronously).
  static absl::StatusOr<DeviceArray> FromHost(absl::Span<const T> host) {
    absl::StatusOr<DeviceArray> array = Allocate(host.size());
    if (!array.ok()) return array.status();
    absl::Status status = array->CopyFromHost(host);
    if (!status.ok()) return status;
    return array;
  }

  T* data() const { return data_.get(); }
  size_t size() const { return size_; }

  // Synchronous copies of all size() elements; `host` must have size()
  // elements (INVALID_ARGUMENT otherwise).
  absl::Status CopyFromHost(absl::Span<const T> host) {
    if (host.size() != size_) return SizeMismatch(host.size());
    if (size_ == 0) return absl::OkStatus();
    return CudaStatus(cudaMemcpy(data(), host.data(), size_ * sizeof(T),
                                 cudaMemcpyHostToDevice),
                      "cudaMemcpy (host to device)");
  }
  absl::Status CopyToHost(absl::Span<T> host) const {
    if (host.size() != size_) return SizeMismatch(host.size());
    if (size_ == 0) return absl::OkStatus();
    return CudaStatus(cudaMemcpy(host.data(), data(), size_ * sizeof(T),
                                 cudaMemcpyDeviceToHost),
                      "cudaMemcpy (device to host)");
  }
  absl::StatusOr<std::vector<T>> ToHost() const {
    std::vector<T> host(size_);
    absl::Status status = CopyToHost(absl::MakeSpan(host));
    if (!status.ok()) return status;
    return host;
  }

 private:
  struct Free {
    void operator()(T* data) const { cudaFree(data); }
  };
  absl::Status SizeMismatch(size_t host_size) const;

  std::unique_ptr<T, Free> data_;
  size_t size_ = 0;
};

template <typename T>
absl::Status DeviceArray<T>::SizeMismatch(size_t host_size) const {
  return absl::InvalidArgumentError(
      "DeviceArray copy: the host span has " + std::to_string(host_size) +
      " elements, the device array " + std::to_string(size_));
}

// ---------------------------------------------------------------------------

// The base of the kernel contexts (TernGradCuda, OneBitCuda, SparseCuda): a
// blocking stream on the device that was current when it was opened, so
// work on the legacy default stream (e.g. a cudaMemcpy that filled the
// inputs) is ordered before its own. Not thread-safe; move-free.
class CudaContext {
 public:
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }

 protected:
  struct FreeDevice {
    void operator()(void* data) const { cudaFree(data); }
  };
  struct FreePinned {
    void operator()(void* data) const { cudaFreeHost(data); }
  };
  // Bytes that grow to the largest call and are reused.
  template <typename Free>
  struct Scratch {
    std::unique_ptr<void, Free> data;
    size_t size = 0;
  };
  using DeviceScratch = Scratch<FreeDevice>;

  // A device and a new stream on it, for a subclass's constructor.
  // UNAVAILABLE when there is no usable device.
  struct Opened {
    int device = 0;
    cudaStream_t stream = nullptr;
  };
  static absl::StatusOr<Opened> Open();

  explicit CudaContext(Opened opened);

  // Makes the context's device current on the calling thread.
  absl::Status Activate() const;
  absl::Status Synchronize();
  // Grows `scratch` to at least `bytes` (zero-filled when `zeroed`),
  // geometrically so that a slowly growing workload reallocates rarely.
  absl::Status Reserve(DeviceScratch* scratch, size_t bytes,
                       bool zeroed = false);
  // Copies `parts` (host bytes) through pinned staging into the table
  // scratch, each at an offset aligned to 16 bytes, and returns the device
  // address of each.
  absl::StatusOr<std::vector<void*>> UploadTables(
      std::initializer_list<std::pair<const void*, size_t>> parts);

  const int device_;
  const cudaStream_t stream_;

 private:
  DeviceScratch tables_;
  Scratch<FreePinned> pinned_;  // host staging for the tables
};

}  // namespace tern::kernels

#endif  // TERN_KERNELS_CUDA_CONTEXT_H_
