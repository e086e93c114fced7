// The one checksum tern computes over bytes: the parameter checksum that
// proves replicas bit-identical (DESIGN section 3), the ParamSpec hash
// agreed at join time, and the checkpoint file's frame. It is XXH3-64
// (xxHash 0.8, seed 0, Debian's libxxhash-dev): defined on bytes, so the
// same on every process and machine, and fast enough to run over the whole
// model every --check_every steps (FNV-1a byte by byte was not). It detects
// accidental differences; it is not a cryptographic hash and does not
// resist a malicious peer.
#ifndef TERN_COMMON_CHECKSUM_H_
#define TERN_COMMON_CHECKSUM_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct XXH3_state_s;

namespace tern {

// A checksum computed in pieces: Update(a); Update(b) gives what
// Update(a + b) gives, for any split. Not thread-safe; movable.
class Checksum {
 public:
  Checksum();
  Checksum(Checksum&&) noexcept;
  Checksum& operator=(Checksum&&) noexcept;
  ~Checksum();

  void Update(const void* data, size_t size);
  void Update(absl::string_view bytes) { Update(bytes.data(), bytes.size()); }
  // Appends the 8 little-endian bytes of `value`.
  void UpdateU64(uint64_t value);

  // The checksum of everything appended so far; appending may go on.
  uint64_t value() const;

 private:
  std::unique_ptr<XXH3_state_s> state_;  // xxHash's streaming state
};

// The checksum of one buffer: Checksum c; c.Update(data, size); c.value().
uint64_t ChecksumOf(const void* data, size_t size);
inline uint64_t ChecksumOf(absl::string_view bytes) {
  return ChecksumOf(bytes.data(), bytes.size());
}

// "0x" and 16 lower-case hex digits: how checksums and spec hashes appear in
// logs, errors and the JSONL metrics ("param_checksum"). tern launch reads
// the LPSs' checksums back from their logs in this form.
std::string FormatChecksum(uint64_t checksum);

// The inverse of FormatChecksum: exactly "0x" and 16 hex digits (either
// case). INVALID_ARGUMENT quoting the text otherwise (a missing prefix, a
// wrong length, a non-hex digit), so a damaged record is refused rather
// than read as another checksum.
absl::StatusOr<uint64_t> ParseChecksum(absl::string_view text);

}  // namespace tern

#endif  // TERN_COMMON_CHECKSUM_H_
