#include "core/wire.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace tern::core {
namespace {

// The highest enum numbers the kernels know (kernels/payload.h).
constexpr int kMaxCodec = static_cast<int>(kernels::CodecId::kInt8);
constexpr int kMaxLayout = static_cast<int>(kernels::kLastLayout);

}  // namespace

absl::StatusOr<kernels::CodecId> CodecFromWire(int value) {
  if (value < 0 || value > kMaxCodec) {
    return absl::InvalidArgumentError(absl::StrCat("unknown codec ", value));
  }
  return static_cast<kernels::CodecId>(value);
}

absl::StatusOr<kernels::Layout> LayoutFromWire(int value) {
  if (value < 0 || value > kMaxLayout) {
    return absl::InvalidArgumentError(absl::StrCat("unknown layout ", value));
  }
  return static_cast<kernels::Layout>(value);
}

absl::StatusOr<kernels::Payload> PayloadFromWire(
    const tern::v1::Payload& wire) {
  kernels::Payload payload;
  TERN_ASSIGN_OR_RETURN(payload.codec, CodecFromWire(wire.codec()));
  TERN_ASSIGN_OR_RETURN(payload.layout, LayoutFromWire(wire.layout()));
  payload.format_version = wire.format_version();
  payload.num_elements = wire.num_elements();
  payload.num_summands = wire.num_summands();
  payload.scalers.assign(wire.scalers().begin(), wire.scalers().end());
  payload.data = wire.data();
  return payload;
}

absl::StatusOr<kernels::Payload> PayloadFromWire(tern::v1::Payload&& wire) {
  std::string data = std::move(*wire.mutable_data());
  absl::StatusOr<kernels::Payload> payload =
      PayloadFromWire(static_cast<const tern::v1::Payload&>(wire));
  if (payload.ok()) payload->data = std::move(data);
  return payload;
}

void PayloadHeaderToWire(const kernels::Payload& payload,
                         tern::v1::Payload* out) {
  out->set_codec(static_cast<tern::v1::Codec>(payload.codec));
  out->set_layout(static_cast<tern::v1::Layout>(payload.layout));
  out->set_format_version(payload.format_version);
  out->set_num_elements(payload.num_elements);
  out->set_num_summands(payload.num_summands);
  out->mutable_scalers()->Assign(payload.scalers.begin(),
                                 payload.scalers.end());
}

void PayloadToWire(const kernels::Payload& payload, tern::v1::Payload* out) {
  PayloadHeaderToWire(payload, out);
  out->set_data(payload.data);
}

void PayloadToWire(kernels::Payload&& payload, tern::v1::Payload* out) {
  PayloadHeaderToWire(payload, out);
  *out->mutable_data() = std::move(payload.data);
}

uint64_t PayloadBytes(const tern::v1::Payload& wire) {
  return wire.data().size() + sizeof(float) * wire.scalers_size();
}

uint64_t PayloadBytes(const kernels::Payload& payload) {
  return payload.data.size() + sizeof(float) * payload.scalers.size();
}

}  // namespace tern::core
