// Converts between tern.v1.Payload (the wire) and kernels::Payload (what the
// codecs read and write), for every role: the shard and the LPS
// (server/wire.h builds their messages on it), the global server and the
// worker. The enums share their numbers (kernels/payload.h), so the only
// check here is the range: a codec or layout number the kernels do not know
// (from a newer or broken peer) is INVALID_ARGUMENT before any cast, so it
// never becomes an out-of-range enum value. Everything else about a payload
// (format version, sizes, scalers) is kernels/payload_checks' job.
#ifndef TERN_CORE_WIRE_H_
#define TERN_CORE_WIRE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "kernels/payload.h"
#include "tern/v1/payload.pb.h"

namespace tern::core {

// INVALID_ARGUMENT "unknown codec N" / "unknown layout N" for a number
// outside the kernels' enum; the enum value otherwise.
absl::StatusOr<kernels::CodecId> CodecFromWire(int value);
absl::StatusOr<kernels::Layout> LayoutFromWire(int value);

// The data is copied: the request stays intact (its fields name the chunk
// in error messages). INVALID_ARGUMENT as CodecFromWire / LayoutFromWire.
absl::StatusOr<kernels::Payload> PayloadFromWire(const tern::v1::Payload& wire);
// The same, moving the bytes out instead of copying them: `wire` keeps its
// header fields (for error messages) and is left without data. For
// messages that are read once (a shard's pushes, a worker's pulls).
absl::StatusOr<kernels::Payload> PayloadFromWire(tern::v1::Payload&& wire);

// Writes every field of `payload` into `*out`. The rvalue overload moves the
// bytes instead of copying them (the worker's push path, where a chunk's
// encoded payload is not needed after it is on the wire).
void PayloadToWire(const kernels::Payload& payload, tern::v1::Payload* out);
void PayloadToWire(kernels::Payload&& payload, tern::v1::Payload* out);
// Every field but the data (which a caller writes on its own, as
// server/push_reply_bytes.h writes it straight into an answer's bytes).
void PayloadHeaderToWire(const kernels::Payload& payload,
                         tern::v1::Payload* out);

// The codec payload bytes of a payload: its data plus 4 bytes per scaler,
// without protobuf framing (what the metrics call push/pull bytes).
uint64_t PayloadBytes(const tern::v1::Payload& wire);
uint64_t PayloadBytes(const kernels::Payload& payload);

}  // namespace tern::core

#endif  // TERN_CORE_WIRE_H_
