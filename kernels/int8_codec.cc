#include "kernels/int8_codec.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_format.h"
#include "kernels/float_aggregation.h"
#include "kernels/payload_checks.h"

namespace tern::kernels {
namespace {

Payload MakePayload(absl::Span<const float> values, uint32_t num_summands) {
  float max_abs = 0.0f;
  for (const float v : values) {
    if (std::isfinite(v)) max_abs = std::max(max_abs, std::fabs(v));
  }
  // A max|w| so small that max|w| / 127 underflows to 0 gives scale 0 and
  // all-zero codes: the error is then below max|w|, a few denormals.
  const float scale = max_abs / static_cast<float>(kInt8MaxCode);
  Payload payload;
  payload.codec = CodecId::kInt8;
  payload.layout = Layout::kRaw;
  payload.num_elements = values.size();
  payload.num_summands = num_summands;
  payload.scalers = {scale};
  absl::Span<uint8_t> bytes = ResizeData(&payload, values.size());
  const float max_code = static_cast<float>(kInt8MaxCode);
  for (size_t i = 0; i < values.size(); ++i) {
    const float v = values[i];
    float q = 0.0f;
    if (scale > 0.0f && std::isfinite(v)) {
      // std::round ties away from zero whatever the FPU's rounding mode is,
      // so the bytes are the same on every machine. v / scale can exceed
      // 127 by an ulp when |v| = max|w|; the clamp keeps it a valid code.
      q = std::clamp(std::round(v / scale), -max_code, max_code);
    }
    bytes[i] = static_cast<uint8_t>(static_cast<int8_t>(q));
  }
  return payload;
}

absl::Status DecodeInt8(const Payload& payload, absl::Span<float> out) {
  absl::Status status = CheckPayloadHeader(payload, CodecId::kInt8, out.size());
  if (status.ok()) status = CheckScalers(payload, 1);
  if (!status.ok()) return status;
  if (payload.layout != Layout::kRaw) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "int8 payload has layout %s, want RAW", LayoutName(payload.layout)));
  }
  if (payload.num_summands == 0) {
    return absl::InvalidArgumentError("int8 payload has 0 summands");
  }
  if (payload.data.size() != out.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("int8 payload of %d elements has %d bytes, want %d",
                        out.size(), payload.data.size(), out.size()));
  }
  const absl::Span<const uint8_t> bytes = DataBytes(payload);
  // Check every code before writing anything, so that a bad payload leaves
  // `out` as it was.
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (static_cast<int8_t>(bytes[i]) < -kInt8MaxCode) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "int8 payload element %d is -128, outside [-127, 127]", i));
    }
  }
  const float scale = payload.scalers[0];
  for (size_t i = 0; i < bytes.size(); ++i) {
    out[i] = scale * static_cast<float>(static_cast<int8_t>(bytes[i]));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Payload> Int8Codec::Encode(absl::Span<const float> values,
                                          const EncodeContext&) const {
  return MakePayload(values, 1);
}

absl::Status Int8Codec::Decode(const Payload& payload,
                               absl::Span<float> out) const {
  return DecodeInt8(payload, out);
}

std::unique_ptr<Aggregation> Int8Codec::NewAggregation(
    uint64_t num_elements, uint32_t num_workers,
    const AggregationContext& /*context*/) const {
  return NewDenseAggregation(num_elements, num_workers, DecodeInt8, MakePayload);
}

}  // namespace tern::kernels
