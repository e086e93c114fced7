#include "worker/fingerprint.h"

namespace tern::worker {

uint64_t ParamSpecHash(const tern::v1::ParamSpec& spec) {
  Checksum hash;
  hash.UpdateU64(static_cast<uint64_t>(spec.tensors_size()));
  for (const tern::v1::TensorSpec& tensor : spec.tensors()) {
    hash.UpdateU64(tensor.name().size());
    hash.Update(tensor.name());
    hash.UpdateU64(static_cast<uint64_t>(tensor.shape_size()));
    for (const int64_t dim : tensor.shape()) {
      hash.UpdateU64(static_cast<uint64_t>(dim));
    }
    hash.UpdateU64(static_cast<uint64_t>(tensor.dtype()));
  }
  return hash.value();
}

}  // namespace tern::worker
