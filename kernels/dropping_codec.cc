#include "kernels/dropping_codec.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "kernels/float_aggregation.h"
#include "kernels/index_packing.h"
#include "kernels/sparse_select.h"

namespace tern::kernels {
namespace {

class DroppingCodec final : public Codec {
 public:
  explicit DroppingCodec(const CodecOptions& options)
      : drop_ratio_(options.drop_ratio),
        sample_size_(options.sample_size),
        global_(options.drop_scope == DropScope::kGlobal),
        survivors_(options.drop_survivors) {}

  CodecId id() const override { return CodecId::kDropping; }
  std::string name() const override { return CodecName(CodecId::kDropping); }
  bool Summable() const override { return false; }
  bool UsesErrorFeedback() const override { return true; }

  absl::StatusOr<Payload> Encode(absl::Span<const float> values,
                                 const EncodeContext& context) const override {
    // INDEX_2BIT's indices have 30 bits: checked before any value is read.
    if (survivors_ == DropSurvivors::k2Bit &&
        values.size() >= kMaxIndex2BitElements) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "dropping chunk of %d values is too long for 2-bit survivors: "
          "indices have 30 bits, so a chunk must have fewer than %d",
          values.size(), kMaxIndex2BitElements));
    }
    absl::Status status = CheckSparseInput(values, CodecId::kDropping);
    if (!status.ok()) return status;
    if (!std::isfinite(context.threshold)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "dropping threshold %g is not finite", context.threshold));
    }
    float threshold = context.threshold;
    if (!global_ || !(threshold > 0.0f)) {
      const absl::Span<const float> chunks[] = {values};
      threshold = SampledMagnitudeThreshold(chunks, drop_ratio_, sample_size_,
                                            context.stream);
    }
    Payload payload;
    payload.codec = CodecId::kDropping;
    payload.layout = layout();
    payload.num_elements = values.size();
    payload.num_summands = 1;
    if (survivors_ == DropSurvivors::k1Bit) {
      // One group: the survivors' two means over the whole chunk.
      PackIndexSignMeans(values, threshold, -threshold,
                         SparseGroupSize(0, values.size()), &payload);
      return payload;
    }
    if (survivors_ == DropSurvivors::k2Bit) {
      PackIndex2Bit(values, threshold, &payload);
      return payload;
    }
    std::vector<uint32_t> indices;
    std::vector<float> kept;
    for (size_t i = 0; i < values.size(); ++i) {
      const float value = values[i];
      // Zeros decode to zero anyway; sending them would only cost bytes.
      if (value != 0.0f && std::fabs(value) >= threshold) {
        indices.push_back(static_cast<uint32_t>(i));
        kept.push_back(value);
      }
    }
    PackIndexValue(indices, kept, &payload);
    return payload;
  }

  absl::Status Decode(const Payload& payload,
                      absl::Span<float> out) const override {
    return DecodeSparsePayload(payload, CodecId::kDropping, layout(), out);
  }

  using Codec::NewAggregation;
  std::unique_ptr<Aggregation> NewAggregation(
      uint64_t num_elements, uint32_t num_workers,
      const AggregationContext& context) const override {
    return NewReencodingAggregation(*this, num_elements, num_workers, context);
  }

 private:
  Layout layout() const { return DroppingLayout(survivors_); }

  const float drop_ratio_;
  const uint32_t sample_size_;
  const bool global_;
  const DropSurvivors survivors_;
};

}  // namespace

Layout DroppingLayout(DropSurvivors survivors) {
  switch (survivors) {
    case DropSurvivors::kValues:
      return Layout::kIndexValue;
    case DropSurvivors::k1Bit:
      return Layout::kIndexSign;
    case DropSurvivors::k2Bit:
      return Layout::kIndex2Bit;
  }
  return Layout::kUnspecified;
}

absl::StatusOr<std::unique_ptr<Codec>> MakeDroppingCodec(
    const CodecOptions& options) {
  if (!(options.drop_ratio >= 0.0f && options.drop_ratio < 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("dropping drop_ratio is %g, want a value in [0, 1)",
                        options.drop_ratio));
  }
  if (options.sample_size < 1) {
    return absl::InvalidArgumentError("dropping sample_size is 0, want >= 1");
  }
  if (options.drop_scope != DropScope::kGlobal &&
      options.drop_scope != DropScope::kPerTensor) {
    return absl::InvalidArgumentError(
        absl::StrFormat("dropping drop_scope %d is unknown",
                        static_cast<uint32_t>(options.drop_scope)));
  }
  const Layout layout = DroppingLayout(options.drop_survivors);
  if (layout == Layout::kUnspecified) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "dropping drop_survivors %d is unknown, want 0 (values), 1 (1bit) or "
        "2 (2bit)",
        static_cast<uint32_t>(options.drop_survivors)));
  }
  absl::Status status = CheckSparseLayouts(options, CodecId::kDropping, layout);
  if (!status.ok()) return status;
  return std::unique_ptr<Codec>(std::make_unique<DroppingCodec>(options));
}

}  // namespace tern::kernels
