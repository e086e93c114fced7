// The two fingerprints a worker shows its shards at join time and every
// --check_every steps (DESIGN sections 2 and 3): the hash of the ParamSpec
// (do we train the same model?) and the checksum of the parameters (are the
// replicas still bit-identical?). Both are FNV-1a 64 (Fowler, Noll, Vo;
// offset basis 0xcbf29ce484222325, prime 0x100000001b3), chosen because it
// is byte-order defined, trivial to re-implement in any language a tool
// might be written in, and good enough to detect accidental differences
// (it is not a cryptographic hash: it does not resist a malicious peer).
#ifndef TERN_WORKER_FINGERPRINT_H_
#define TERN_WORKER_FINGERPRINT_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "tern/v1/payload.pb.h"

namespace tern::worker {

// An incremental FNV-1a 64 hash: Update(a); Update(b) equals Update(a + b).
class Fnv1a64 {
 public:
  static constexpr uint64_t kOffsetBasis = 0xcbf29ce484222325ull;
  static constexpr uint64_t kPrime = 0x100000001b3ull;

  void Update(const void* data, size_t size);
  void Update(absl::string_view bytes) { Update(bytes.data(), bytes.size()); }
  // Appends the 8 little-endian bytes of `value`.
  void UpdateU64(uint64_t value);

  uint64_t value() const { return state_; }

 private:
  uint64_t state_ = kOffsetBasis;
};

// FNV-1a 64 over this byte sequence:
//   u64 number of tensors, then for each tensor in order:
//     u64 length of the name, the name's bytes,
//     u64 rank, one u64 per dimension (the int64 reinterpreted),
//     u64 dtype (the tern.v1.DType number),
// every u64 as 8 little-endian bytes. The lengths make the encoding
// unambiguous ("ab" + "c" differs from "a" + "bc"), so a renamed, reshaped,
// reordered, added or removed tensor changes the hash.
uint64_t ParamSpecHash(const tern::v1::ParamSpec& spec);

// "0x" and 16 lower-case hex digits: how checksums appear in logs and in the
// JSONL metrics ("param_checksum").
std::string FormatChecksum(uint64_t checksum);

}  // namespace tern::worker

#endif  // TERN_WORKER_FINGERPRINT_H_
