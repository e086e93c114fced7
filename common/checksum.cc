#include "common/checksum.h"

#include "absl/strings/str_format.h"

// The state's definition, so that it is allocated like any other object.
#define XXH_STATIC_LINKING_ONLY
#include "xxhash.h"

namespace tern {

Checksum::Checksum() : state_(std::make_unique<XXH3_state_t>()) {
  XXH3_64bits_reset(state_.get());
}

Checksum::Checksum(Checksum&&) noexcept = default;
Checksum& Checksum::operator=(Checksum&&) noexcept = default;
Checksum::~Checksum() = default;

void Checksum::Update(const void* data, size_t size) {
  // XXH3 reads nothing for size 0, but a null pointer is its error case.
  if (size == 0) return;
  XXH3_64bits_update(state_.get(), data, size);
}

void Checksum::UpdateU64(uint64_t value) {
  unsigned char bytes[8];
  for (int i = 0; i < 8; ++i) {
    bytes[i] = static_cast<unsigned char>(value >> (8 * i));
  }
  Update(bytes, sizeof(bytes));
}

uint64_t Checksum::value() const { return XXH3_64bits_digest(state_.get()); }

uint64_t ChecksumOf(const void* data, size_t size) {
  return XXH3_64bits(size == 0 ? "" : data, size);
}

std::string FormatChecksum(uint64_t checksum) {
  return absl::StrFormat("0x%016x", checksum);
}

}  // namespace tern
