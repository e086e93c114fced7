#include "common/checksum.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
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

absl::StatusOr<uint64_t> ParseChecksum(absl::string_view text) {
  constexpr size_t kDigits = 16;
  const auto malformed = [text](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("checksum '", absl::CEscape(text), "' ", why,
                     " (expected \"0x\" and 16 hex digits)"));
  };
  if (!absl::StartsWith(text, "0x")) return malformed("lacks the 0x prefix");
  const absl::string_view digits = text.substr(2);
  if (digits.size() != kDigits) {
    return malformed(absl::StrCat("has ", digits.size(), " digits"));
  }
  uint64_t value = 0;
  for (const char c : digits) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) {
      return malformed("has a character that is not a hex digit");
    }
    const int digit =
        absl::ascii_isdigit(static_cast<unsigned char>(c))
            ? c - '0'
            : absl::ascii_tolower(static_cast<unsigned char>(c)) - 'a' + 10;
    value = (value << 4) | static_cast<uint64_t>(digit);
  }
  return value;
}

}  // namespace tern
