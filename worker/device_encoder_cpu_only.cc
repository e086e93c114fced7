// MakeDeviceEncoder in a build without CUDA kernels (no --config=cuda).
#include "absl/strings/str_cat.h"
#include "worker/device_encoder.h"

namespace tern::worker {

absl::StatusOr<std::unique_ptr<DeviceEncoder>> MakeDeviceEncoder(
    const c10::Device& device) {
  if (device.is_cpu()) return nullptr;
  return absl::FailedPreconditionError(absl::StrCat(
      "--device=", device.str(),
      ": this tern was built without CUDA kernels; build it with "
      "--config=cuda against a CUDA libtorch (README, 'GPU workers')"));
}

}  // namespace tern::worker
