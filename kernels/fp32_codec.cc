#include "kernels/fp32_codec.h"

#include <cstring>

#include "absl/strings/str_format.h"
#include "kernels/float_aggregation.h"
#include "kernels/payload_checks.h"

namespace tern::kernels {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "LAYOUT_RAW is little-endian; this copy assumes the host is");

// Writes the header and the raw bytes into `payload`, reusing its data's
// capacity. One pass over the bytes: assign() copies them straight in,
// where resize() and a memcpy would first zero-fill the whole buffer.
void FillPayload(absl::Span<const float> values, uint32_t num_summands,
                 Payload* payload) {
  payload->codec = CodecId::kFp32;
  payload->layout = Layout::kRaw;
  payload->format_version = kFormatVersion;
  payload->num_elements = values.size();
  payload->num_summands = num_summands;
  payload->scalers.clear();
  payload->data.assign(reinterpret_cast<const char*>(values.data()),
                       values.size() * sizeof(float));
}

Payload MakePayload(absl::Span<const float> values, uint32_t num_summands) {
  Payload payload;
  FillPayload(values, num_summands, &payload);
  return payload;
}

absl::Status DecodeFp32(const Payload& payload, absl::Span<float> out) {
  absl::Status status = CheckPayloadHeader(payload, CodecId::kFp32, out.size());
  if (status.ok()) status = CheckScalers(payload, 0);
  if (!status.ok()) return status;
  if (payload.layout != Layout::kRaw) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "fp32 payload has layout %s, want RAW", LayoutName(payload.layout)));
  }
  if (payload.num_summands == 0) {
    return absl::InvalidArgumentError("fp32 payload has 0 summands");
  }
  if (payload.data.size() != out.size() * sizeof(float)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "fp32 payload of %d elements has %d bytes, want %d", out.size(),
        payload.data.size(), out.size() * sizeof(float)));
  }
  if (!out.empty()) {
    std::memcpy(out.data(), payload.data.data(), payload.data.size());
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Payload> Fp32Codec::Encode(absl::Span<const float> values,
                                          const EncodeContext&) const {
  return MakePayload(values, 1);
}

absl::Status Fp32Codec::EncodeInto(absl::Span<const float> values,
                                   const EncodeContext&, Payload* out) const {
  FillPayload(values, 1, out);
  return absl::OkStatus();
}

absl::Status Fp32Codec::Decode(const Payload& payload,
                               absl::Span<float> out) const {
  return DecodeFp32(payload, out);
}

std::unique_ptr<Aggregation> Fp32Codec::NewAggregation(
    uint64_t num_elements, uint32_t num_workers,
    const AggregationContext& /*context*/) const {
  return NewDenseAggregation(num_elements, num_workers, DecodeFp32, MakePayload);
}

}  // namespace tern::kernels
