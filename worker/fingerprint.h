// The two fingerprints a worker shows its shards at join time and every
// --check_every steps (DESIGN sections 2 and 3): the hash of the ParamSpec
// (do we train the same model?) and the checksum of the parameters (are the
// replicas still bit-identical?). Both are tern's one checksum
// (common/checksum.h, XXH3-64), which also gives their hex form,
// FormatChecksum.
#ifndef TERN_WORKER_FINGERPRINT_H_
#define TERN_WORKER_FINGERPRINT_H_

#include <cstdint>

#include "common/checksum.h"
#include "tern/v1/payload.pb.h"

namespace tern::worker {

// The checksum (common/checksum.h) of this byte sequence:
//   u64 number of tensors, then for each tensor in order:
//     u64 length of the name, the name's bytes,
//     u64 rank, one u64 per dimension (the int64 reinterpreted),
//     u64 dtype (the tern.v1.DType number),
// every u64 as 8 little-endian bytes. The lengths make the encoding
// unambiguous ("ab" + "c" differs from "a" + "bc"), so a renamed, reshaped,
// reordered, added or removed tensor changes the hash.
uint64_t ParamSpecHash(const tern::v1::ParamSpec& spec);

}  // namespace tern::worker

#endif  // TERN_WORKER_FINGERPRINT_H_
