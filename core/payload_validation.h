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
// values outside the magnitude rule (below); a server keeps the decoded
// values and adds those, so no payload is decoded twice. All are pure
// functions, safe from any thread.
//
// The magnitude rule (issue 14): every value a peer's payload decodes to,
// and every scaler it carries, must be finite and at most kMaxMagnitude =
// 1e30 in magnitude, so that no single peer can overflow what a server sums
// or applies and destroy the other peers' model. Why 1e30: a sane run's
// gradients, weights and updates stay many orders of magnitude below it
// (training has diverged long before), so it refuses nothing real; and
// FLT_MAX / 1e30 = 3.4e8, so a server may add up to 3.4e8 accepted values
// into one float without overflow, more than any sum tern forms (the shard
// adds one value per worker, the GS at most K * (max_lag + 2) per element,
// which it bounds at start). The LPS holds its weights and velocities to
// the same bound (server/WEIGHTGRAD.md); global/README.md states the rule
// for users.
#ifndef TERN_CORE_PAYLOAD_VALIDATION_H_
#define TERN_CORE_PAYLOAD_VALIDATION_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kernels/codec.h"
#include "kernels/payload.h"

namespace tern::core {

// The largest magnitude of any value or scaler a server accepts from a peer
// (the magnitude rule above).
inline constexpr float kMaxMagnitude = 1e30f;

// True when `value` is finite and |value| <= kMaxMagnitude.
bool WithinMagnitude(float value);

// OK when WithinMagnitude(value); else INVALID_ARGUMENT with `what` (e.g.
// "element 3", "scaler") naming it: "element 3 is nan (NaN/Inf gradients
// are refused; ...)" or "element 3 is 3e+38, beyond 1e+30 (the magnitude
// rule: ...)".
absl::Status CheckMagnitude(absl::string_view what, float value);

// The index of the first value that is not WithinMagnitude, or
// values.size() when every one is. Scans 16 values per step with SSE2 on
// x86-64 (a branch per value took as long as the fp32 decode's copy before
// it, bench/README.md); the answer is the same either way.
size_t FirstBeyondMagnitude(absl::Span<const float> values);

struct PayloadExpectation {
  kernels::CodecId codec = kernels::CodecId::kUnspecified;
  // kUnspecified: any layout the codec reads (its decoder checks it).
  kernels::Layout layout = kernels::Layout::kUnspecified;
  uint64_t num_elements = 0;
  // A push or update is one peer's values: num_summands == 1.
  bool single_summand = true;
  // What the peer sends, and who it is, for "num_summands 2, but a push
  // holds one worker's values" ("an update ... one data center's").
  std::string message = "a push";
  std::string sender = "worker";
  // TernGrad: codes add up only under one scaler, so the payload must carry
  // exactly this one (and only one).
  std::optional<float> shared_scaler;
  // Who reads it, for "format version 2 is not supported (this shard reads
  // 1)".
  std::string reader = "this server";
};

// INVALID_ARGUMENT naming the first field that does not match, e.g.
// "codec fp32, but the chunk travels as terngrad", "layout RAW, but the run
// sends the chunk as TERNARY_2BIT", "9 elements, but the chunk has 7",
// "format version 2 is not supported (this shard reads 1)", "num_summands
// 2, but a push holds one worker's values", "scaler nan is not finite
// (...)", "scaler is 3.4e+38, beyond 1e+30 (the magnitude rule: ...)",
// "scaler 0.5 differs from the shared scaler 1 of this step". The caller
// prefixes where it came from ("step 0: chunk 1 of worker 0: ").
absl::Status ValidatePayload(const kernels::Payload& payload,
                             const PayloadExpectation& expect);

// Decodes `payload` with `codec` into `out` (out.size() elements) and
// refuses the first value outside the magnitude rule (CheckMagnitude:
// "element 3 is nan (...)", "element 3 is 3e+38, beyond 1e+30 (...)").
// INVALID_ARGUMENT with the decoder's own message for bytes that do not
// decode. On error `out` is unspecified.
absl::Status DecodeFinite(const kernels::Codec& codec,
                          const kernels::Payload& payload,
                          absl::Span<float> out);

}  // namespace tern::core

#endif  // TERN_CORE_PAYLOAD_VALIDATION_H_
