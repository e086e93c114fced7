#include "kernels/payload_checks.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace tern::kernels {

absl::Status CheckPayloadHeader(const Payload& payload, CodecId codec,
                                uint64_t num_elements) {
  if (payload.codec != codec) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "payload codec is %s (%d), want %s", CodecName(payload.codec),
        static_cast<uint32_t>(payload.codec), CodecName(codec)));
  }
  if (payload.format_version != kFormatVersion) {
    return absl::InvalidArgumentError(
        absl::StrFormat("payload format version %d is not supported (want %d)",
                        payload.format_version, kFormatVersion));
  }
  if (payload.num_elements != num_elements) {
    return absl::InvalidArgumentError(
        absl::StrFormat("payload has %d elements, want %d",
                        payload.num_elements, num_elements));
  }
  return absl::OkStatus();
}

absl::Status CheckScalers(const Payload& payload, size_t count) {
  if (payload.scalers.size() != count) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "payload has %d scalers, want %d", payload.scalers.size(), count));
  }
  for (size_t i = 0; i < count; ++i) {
    const float scaler = payload.scalers[i];
    if (!std::isfinite(scaler) || scaler < 0.0f) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "payload scaler %d is %g, want a finite value >= 0", i, scaler));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckIsPush(const Payload& payload) {
  if (payload.num_summands != 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("push has %d summands, want 1", payload.num_summands));
  }
  return absl::OkStatus();
}

}  // namespace tern::kernels
