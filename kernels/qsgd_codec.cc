#include "kernels/qsgd_codec.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/float_aggregation.h"
#include "kernels/payload_checks.h"
#include "kernels/qsgd.h"

namespace tern::kernels {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the uint32 header fields are little-endian");

// data = uint32 bucket_size, uint32 levels s, then the level fields.
constexpr size_t kHeaderBytes = 8;

}  // namespace

absl::StatusOr<Payload> QsgdCodec::Encode(absl::Span<const float> values,
                                          const EncodeContext& context) const {
  const uint64_t n = values.size();
  if (n > kMaxQsgdElements) {
    return absl::InvalidArgumentError(
        absl::StrFormat("qsgd chunk of %d values is above the limit of %d", n,
                        kMaxQsgdElements));
  }
  Payload payload;
  payload.codec = CodecId::kQsgd;
  payload.layout = Layout::kQsgdLevels;
  payload.num_elements = n;
  payload.num_summands = 1;
  payload.scalers.resize(QsgdNumBuckets(n, bucket_size_));
  absl::Status status =
      BucketNorms(values, bucket_size_, absl::MakeSpan(payload.scalers));
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("qsgd: ", status.message()));
  }
  absl::Span<uint8_t> data =
      ResizeData(&payload, kHeaderBytes + QsgdPackedBytes(n, levels_));
  const uint32_t header[2] = {bucket_size_, levels_};
  std::memcpy(data.data(), header, kHeaderBytes);
  QuantizePackQsgd(values, bucket_size_, payload.scalers, levels_,
                   context.stream, data.subspan(kHeaderBytes));
  return payload;
}

absl::Status QsgdCodec::Decode(const Payload& payload,
                               absl::Span<float> out) const {
  absl::Status status = CheckPayloadHeader(payload, CodecId::kQsgd, out.size());
  if (!status.ok()) return status;
  if (payload.layout != Layout::kQsgdLevels) {
    return absl::InvalidArgumentError(
        absl::StrFormat("qsgd payload has layout %s, want QSGD_LEVELS",
                        LayoutName(payload.layout)));
  }
  if (payload.num_summands == 0) {
    return absl::InvalidArgumentError("qsgd payload has 0 summands");
  }
  if (payload.data.size() < kHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("qsgd payload has %d bytes, too few for the "
                        "bucket_size and levels header",
                        payload.data.size()));
  }
  uint32_t header[2];
  std::memcpy(header, payload.data.data(), kHeaderBytes);
  return DecodeQsgd(DataBytes(payload).subspan(kHeaderBytes), header[0],
                    header[1], payload.scalers, out);
}

std::unique_ptr<Aggregation> QsgdCodec::NewAggregation(
    uint64_t num_elements, uint32_t num_workers,
    const AggregationContext& context) const {
  return NewReencodingAggregation(*this, num_elements, num_workers, context);
}

absl::StatusOr<std::unique_ptr<Codec>> MakeQsgdCodec(
    const CodecOptions& options) {
  for (const Layout layout : {options.push_layout, options.pull_layout}) {
    if (layout != Layout::kUnspecified && layout != Layout::kQsgdLevels) {
      return absl::InvalidArgumentError(
          absl::StrFormat("codec qsgd has no layout %s (only QSGD_LEVELS)",
                          LayoutName(layout)));
    }
  }
  if (options.qsgd_levels < 1 || options.qsgd_levels > kMaxQsgdLevels) {
    return absl::InvalidArgumentError(
        absl::StrFormat("qsgd levels is %d, want 1 to %d", options.qsgd_levels,
                        kMaxQsgdLevels));
  }
  if (options.qsgd_bucket < 1) {
    return absl::InvalidArgumentError("qsgd bucket size is 0, want >= 1");
  }
  return std::unique_ptr<Codec>(
      std::make_unique<QsgdCodec>(options.qsgd_levels, options.qsgd_bucket));
}

}  // namespace tern::kernels
