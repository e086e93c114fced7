// Converts between tern.v1.Payload (the wire) and kernels::Payload (what
// the codecs read and write). The enums share their numbers
// (kernels/payload.h); a number the kernels do not know is refused here,
// before any codec sees it.
#ifndef TERN_WORKER_WIRE_PAYLOAD_H_
#define TERN_WORKER_WIRE_PAYLOAD_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "kernels/payload.h"
#include "tern/v1/payload.pb.h"

namespace tern::worker {

// Moves `payload`'s bytes into `*out` (no copy of the data).
void ToWire(kernels::Payload payload, tern::v1::Payload* out);

// INVALID_ARGUMENT when the codec or layout number is outside the known
// range. The data is copied (the proto stays intact for error messages).
absl::StatusOr<kernels::Payload> FromWire(const tern::v1::Payload& wire);

// Codec payload bytes of a payload: its data plus 4 bytes per scaler (the
// "push_bytes"/"pull_bytes" of the metrics).
uint64_t PayloadBytes(const tern::v1::Payload& wire);

}  // namespace tern::worker

#endif  // TERN_WORKER_WIRE_PAYLOAD_H_
