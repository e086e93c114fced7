#include "kernels/onebit_codec.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/float_aggregation.h"
#include "kernels/onebit.h"
#include "kernels/payload_checks.h"

namespace tern::kernels {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the uint32 group_size header is little-endian");

// data = uint32 group_size, then the sign bits.
constexpr size_t kHeaderBytes = 4;

absl::Status CheckMeans(const Payload& payload) {
  for (size_t k = 0; k < payload.scalers.size(); ++k) {
    const float value = payload.scalers[k];
    const bool positive = k % 2 == 0;
    const bool in_range = positive ? value >= 0.0f : value <= 0.0f;
    if (!std::isfinite(value) || !in_range) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "onebit payload: scaler %d (the %s value of group %d) is %g, want "
          "a finite value %s 0",
          k, positive ? "non-negative" : "negative", k / 2, value,
          positive ? ">=" : "<="));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Payload> OneBitCodec::Encode(
    absl::Span<const float> values, const EncodeContext& context) const {
  const uint64_t n = values.size();
  if (n > kMaxOneBitElements) {
    return absl::InvalidArgumentError(
        absl::StrFormat("onebit chunk of %d values is above the limit of %d", n,
                        kMaxOneBitElements));
  }
  const uint64_t group_size = OneBitGroupSize(n, context.group_size);
  if (group_size > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "onebit groups of %d values do not fit the uint32 header", group_size));
  }
  absl::Status status = CheckFiniteValues(values);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("onebit: ", status.message()));
  }
  Payload payload;
  payload.codec = CodecId::kOneBit;
  payload.layout = Layout::kSignBits;
  payload.num_elements = n;
  payload.num_summands = 1;
  payload.scalers.resize(2 * OneBitNumGroups(n, group_size));
  GroupMeans(values, group_size, sample_size_, context.stream,
             absl::MakeSpan(payload.scalers));
  absl::Span<uint8_t> data =
      ResizeData(&payload, kHeaderBytes + SignBitsBytes(n));
  const uint32_t header = static_cast<uint32_t>(group_size);
  std::memcpy(data.data(), &header, kHeaderBytes);
  PackSignBits(values, data.subspan(kHeaderBytes));
  return payload;
}

absl::Status OneBitCodec::Decode(const Payload& payload,
                                 absl::Span<float> out) const {
  absl::Status status =
      CheckPayloadHeader(payload, CodecId::kOneBit, out.size());
  if (!status.ok()) return status;
  if (payload.layout != Layout::kSignBits) {
    return absl::InvalidArgumentError(
        absl::StrFormat("onebit payload has layout %s, want SIGN_BITS",
                        LayoutName(payload.layout)));
  }
  if (payload.num_summands == 0) {
    return absl::InvalidArgumentError("onebit payload has 0 summands");
  }
  if (payload.data.size() < kHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("onebit payload has %d bytes, too few for the "
                        "group_size header",
                        payload.data.size()));
  }
  uint32_t group_size;
  std::memcpy(&group_size, payload.data.data(), kHeaderBytes);
  if (group_size == 0) {
    return absl::InvalidArgumentError("onebit payload has group_size 0");
  }
  const uint64_t want_scalers = 2 * OneBitNumGroups(out.size(), group_size);
  if (payload.scalers.size() != want_scalers) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "onebit payload of %d elements in groups of %d has %d scalers, want "
        "%d",
        out.size(), group_size, payload.scalers.size(), want_scalers));
  }
  status = CheckMeans(payload);
  if (!status.ok()) return status;
  return DecodeSignBits(DataBytes(payload).subspan(kHeaderBytes), group_size,
                        payload.scalers, out);
}

std::unique_ptr<Aggregation> OneBitCodec::NewAggregation(
    uint64_t num_elements, uint32_t num_workers,
    const AggregationContext& context) const {
  return NewReencodingAggregation(*this, num_elements, num_workers, context);
}

absl::StatusOr<std::unique_ptr<Codec>> MakeOneBitCodec(
    const CodecOptions& options) {
  for (const Layout layout : {options.push_layout, options.pull_layout}) {
    if (layout != Layout::kUnspecified && layout != Layout::kSignBits) {
      return absl::InvalidArgumentError(
          absl::StrFormat("codec onebit has no layout %s (only SIGN_BITS)",
                          LayoutName(layout)));
    }
  }
  if (options.sampled_means && options.sample_size == 0) {
    return absl::InvalidArgumentError(
        "onebit sampled means need a sample_size >= 1");
  }
  return std::unique_ptr<Codec>(std::make_unique<OneBitCodec>(
      options.sampled_means ? options.sample_size : 0));
}

}  // namespace tern::kernels
