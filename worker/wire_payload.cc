#include "worker/wire_payload.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace tern::worker {

void ToWire(kernels::Payload payload, tern::v1::Payload* out) {
  out->set_codec(static_cast<tern::v1::Codec>(payload.codec));
  out->set_layout(static_cast<tern::v1::Layout>(payload.layout));
  out->set_format_version(payload.format_version);
  out->set_num_elements(payload.num_elements);
  out->set_num_summands(payload.num_summands);
  out->mutable_scalers()->Assign(payload.scalers.begin(),
                                 payload.scalers.end());
  *out->mutable_data() = std::move(payload.data);
}

absl::StatusOr<kernels::Payload> FromWire(const tern::v1::Payload& wire) {
  if (wire.codec() < static_cast<int>(kernels::CodecId::kUnspecified) ||
      wire.codec() > static_cast<int>(kernels::CodecId::kInt8)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown codec number ", wire.codec()));
  }
  if (wire.layout() < static_cast<int>(kernels::Layout::kUnspecified) ||
      wire.layout() > static_cast<int>(kernels::Layout::kQsgdLevels)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown layout number ", wire.layout()));
  }
  kernels::Payload payload;
  payload.codec = static_cast<kernels::CodecId>(wire.codec());
  payload.layout = static_cast<kernels::Layout>(wire.layout());
  payload.format_version = wire.format_version();
  payload.num_elements = wire.num_elements();
  payload.num_summands = wire.num_summands();
  payload.scalers.assign(wire.scalers().begin(), wire.scalers().end());
  payload.data = wire.data();
  return payload;
}

uint64_t PayloadBytes(const tern::v1::Payload& wire) {
  return wire.data().size() + sizeof(float) * wire.scalers_size();
}

}  // namespace tern::worker
