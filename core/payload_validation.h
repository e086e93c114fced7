// The one validation of a payload a peer sent, for every server (the
// shard's pushes, the LPS's gradients, the GS's round updates), before any
// of it is added to anything.
//
// ValidatePayload checks the header against what the server expects:
// codec, layout, format version, element count, summands, scalers finite
// (and, for a shared-scaler codec, the shared one), with messages that name
// the field, what came and what was expected. It reads no data bytes.
// DecodeFinite then decodes the bytes ONCE (the codec validates them while
// decoding: kernels/payload_checks plus its own layout checks) and refuses
// NaN/Inf values; a server keeps the decoded values and adds those, so no
// payload is decoded twice. Both are pure functions, safe from any thread.
#ifndef TERN_CORE_PAYLOAD_VALIDATION_H_
#define TERN_CORE_PAYLOAD_VALIDATION_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/codec.h"
#include "kernels/payload.h"

namespace tern::core {

struct PayloadExpectation {
  kernels::CodecId codec = kernels::CodecId::kUnspecified;
  // kUnspecified: any layout the codec reads (its decoder checks it).
  kernels::Layout layout = kernels::Layout::kUnspecified;
  uint64_t num_elements = 0;
  // A push or update is one peer's values: num_summands == 1.
  bool single_summand = true;
  // TernGrad: codes add up only under one scaler, so the payload must carry
  // exactly this one (and only one).
  std::optional<float> shared_scaler;
  // Who reads it, for "format version 2 is not supported (this shard reads
  // 1)".
  std::string reader = "this server";
};

// INVALID_ARGUMENT naming the first field that does not match, e.g.
// "codec fp32, but the chunk travels as terngrad", "9 elements, but the
// chunk has 7", "format version 2 is not supported (this shard reads 1)",
// "num_summands 2, but a push holds one worker's values", "scaler nan is
// not finite (...)", "scaler 0.5 differs from the shared scaler 1 of this
// step". The caller prefixes where it came from ("step 0: chunk 1 of
// worker 0: ").
absl::Status ValidatePayload(const kernels::Payload& payload,
                             const PayloadExpectation& expect);

// Decodes `payload` with `codec` into `out` (out.size() elements) and
// refuses a value that is not finite: "element 3 is nan (NaN/Inf gradients
// are refused; see server/README.md)". INVALID_ARGUMENT with the decoder's
// own message for bytes that do not decode. On error `out` is unspecified.
absl::Status DecodeFinite(const kernels::Codec& codec,
                          const kernels::Payload& payload,
                          absl::Span<float> out);

}  // namespace tern::core

#endif  // TERN_CORE_PAYLOAD_VALIDATION_H_
