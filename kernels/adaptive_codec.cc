#include "kernels/adaptive_codec.h"

#include <cmath>
#include <string>

#include "absl/strings/str_format.h"
#include "kernels/float_aggregation.h"
#include "kernels/index_packing.h"
#include "kernels/sparse_select.h"

namespace tern::kernels {
namespace {

class AdaptiveCodec final : public Codec {
 public:
  AdaptiveCodec(float proportion, uint32_t sample_size)
      : proportion_(proportion), sample_size_(sample_size) {}

  CodecId id() const override { return CodecId::kAdaptive; }
  std::string name() const override { return CodecName(CodecId::kAdaptive); }
  bool Summable() const override { return false; }
  bool UsesErrorFeedback() const override { return true; }

  absl::StatusOr<Payload> Encode(absl::Span<const float> values,
                                 const EncodeContext& context) const override {
    absl::Status status = CheckSparseInput(values, CodecId::kAdaptive);
    if (!status.ok()) return status;
    // The thresholds are the chunk's, the means the group's (section 3.3:
    // "we apply adaptive quantization column-wise" for the reconstruction).
    const SignedThresholds thresholds = SampledSignedThresholds(
        values, proportion_, sample_size_, context.stream);
    Payload payload;
    payload.codec = CodecId::kAdaptive;
    payload.layout = Layout::kIndexSign;
    payload.num_elements = values.size();
    payload.num_summands = 1;
    PackIndexSignMeans(values, thresholds.positive, thresholds.negative,
                       SparseGroupSize(context.group_size, values.size()),
                       &payload);
    return payload;
  }

  absl::Status Decode(const Payload& payload,
                      absl::Span<float> out) const override {
    return DecodeSparsePayload(payload, CodecId::kAdaptive, Layout::kIndexSign,
                               out);
  }

  using Codec::NewAggregation;
  std::unique_ptr<Aggregation> NewAggregation(
      uint64_t num_elements, uint32_t num_workers,
      const AggregationContext& context) const override {
    return NewReencodingAggregation(*this, num_elements, num_workers, context);
  }

 private:
  const float proportion_;
  const uint32_t sample_size_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Codec>> MakeAdaptiveCodec(
    const CodecOptions& options) {
  if (!(options.proportion > 0.0f && options.proportion <= 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("adaptive proportion is %g, want a value in (0, 1]",
                        options.proportion));
  }
  if (options.sample_size < 1) {
    return absl::InvalidArgumentError("adaptive sample_size is 0, want >= 1");
  }
  absl::Status status =
      CheckSparseLayouts(options, CodecId::kAdaptive, Layout::kIndexSign);
  if (!status.ok()) return status;
  return std::unique_ptr<Codec>(
      std::make_unique<AdaptiveCodec>(options.proportion, options.sample_size));
}

}  // namespace tern::kernels
