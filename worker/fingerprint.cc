#include "worker/fingerprint.h"

#include "absl/strings/str_format.h"

namespace tern::worker {

void Fnv1a64::Update(const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint64_t state = state_;
  for (size_t i = 0; i < size; ++i) {
    state ^= bytes[i];
    state *= kPrime;
  }
  state_ = state;
}

void Fnv1a64::UpdateU64(uint64_t value) {
  unsigned char bytes[8];
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<unsigned char>(value >> (8 * i));
  Update(bytes, sizeof(bytes));
}

uint64_t ParamSpecHash(const tern::v1::ParamSpec& spec) {
  Fnv1a64 hash;
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

std::string FormatChecksum(uint64_t checksum) {
  return absl::StrFormat("0x%016x", checksum);
}

}  // namespace tern::worker
