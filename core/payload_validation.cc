#include "core/payload_validation.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/payload_checks.h"

namespace tern::core {
namespace {

constexpr absl::string_view kNonFinite =
    "(NaN/Inf gradients are refused; see server/README.md)";

constexpr absl::string_view kTooLarge =
    "(the magnitude rule: no value or scaler a peer sends may exceed 1e30 in "
    "magnitude, far beyond any sane run; see global/README.md)";

}  // namespace

bool WithinMagnitude(float value) {
  // False for NaN too: every comparison with NaN is false.
  return std::fabs(value) <= kMaxMagnitude;
}

absl::Status CheckMagnitude(absl::string_view what, float value) {
  if (WithinMagnitude(value)) return absl::OkStatus();
  if (!std::isfinite(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is ", value, " ", kNonFinite));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      what, " is ", value, ", beyond ", kMaxMagnitude, " ", kTooLarge));
}

absl::Status ValidatePayload(const kernels::Payload& payload,
                             const PayloadExpectation& expect) {
  auto invalid = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(parts...));
  };
  if (payload.codec != expect.codec) {
    return invalid("codec ", kernels::CodecName(payload.codec),
                   ", but the chunk travels as ",
                   kernels::CodecName(expect.codec));
  }
  if (expect.layout != kernels::Layout::kUnspecified &&
      payload.layout != expect.layout) {
    return invalid("layout ", kernels::LayoutName(payload.layout),
                   ", but the run pushes ", kernels::LayoutName(expect.layout));
  }
  if (payload.format_version != kernels::kFormatVersion) {
    return invalid("format version ", payload.format_version,
                   " is not supported (", expect.reader, " reads ",
                   kernels::kFormatVersion, ")");
  }
  if (payload.num_elements != expect.num_elements) {
    return invalid(payload.num_elements, " elements, but the chunk has ",
                   expect.num_elements);
  }
  if (expect.single_summand && payload.num_summands != 1) {
    return invalid("num_summands ", payload.num_summands,
                   ", but a push holds one worker's values");
  }
  for (const float scaler : payload.scalers) {
    if (!std::isfinite(scaler)) {
      return invalid("scaler ", scaler, " is not finite ", kNonFinite);
    }
    // A scaler is a magnitude of the values it scales: the same bound.
    if (absl::Status status = CheckMagnitude("scaler", scaler); !status.ok()) {
      return status;
    }
  }
  if (expect.shared_scaler.has_value()) {
    const float shared = *expect.shared_scaler;
    if (payload.scalers.size() != 1 || payload.scalers[0] != shared) {
      return invalid("scaler ",
                     payload.scalers.empty()
                         ? std::string("(none)")
                         : absl::StrCat(payload.scalers[0]),
                     " differs from the shared scaler ", shared,
                     " of this step");
    }
    // A shared scaler is a magnitude: one, finite, >= 0 (the kernels' own
    // header rule, kernels/payload_checks.h).
    if (absl::Status status = kernels::CheckScalers(payload, 1);
        !status.ok()) {
      return status;
    }
  }
  return absl::OkStatus();
}

absl::Status DecodeFinite(const kernels::Codec& codec,
                          const kernels::Payload& payload,
                          absl::Span<float> out) {
  if (absl::Status status = codec.Decode(payload, out); !status.ok()) {
    return absl::InvalidArgumentError(status.message());
  }
  for (size_t j = 0; j < out.size(); ++j) {
    if (!WithinMagnitude(out[j])) {
      return CheckMagnitude(absl::StrCat("element ", j), out[j]);
    }
  }
  return absl::OkStatus();
}

}  // namespace tern::core
