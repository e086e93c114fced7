#include "kernels/threshold_codec.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "kernels/float_aggregation.h"
#include "kernels/index_packing.h"

namespace tern::kernels {
namespace {

class ThresholdCodec final : public Codec {
 public:
  explicit ThresholdCodec(float tau) : tau_(tau) {}

  CodecId id() const override { return CodecId::kThreshold; }
  std::string name() const override { return CodecName(CodecId::kThreshold); }
  bool Summable() const override { return false; }
  bool UsesErrorFeedback() const override { return true; }

  absl::StatusOr<Payload> Encode(
      absl::Span<const float> values,
      const EncodeContext& /*context*/) const override {
    absl::Status status = CheckSparseInput(values, CodecId::kThreshold);
    if (!status.ok()) return status;
    std::vector<uint32_t> words;
    for (size_t i = 0; i < values.size(); ++i) {
      const float value = values[i];
      if (value >= tau_ || value <= -tau_) {
        words.push_back(IndexSignWord(static_cast<uint32_t>(i), value < 0.0f));
      }
    }
    Payload payload;
    payload.codec = CodecId::kThreshold;
    payload.layout = Layout::kIndexSign;
    payload.num_elements = values.size();
    payload.num_summands = 1;
    // One group: the scalers (tau, -tau) once, none for an empty chunk.
    std::vector<float> scalers;
    if (!values.empty()) scalers = {tau_, -tau_};
    PackIndexSign(SparseGroupSize(0, values.size()), words, scalers, &payload);
    return payload;
  }

  absl::Status Decode(const Payload& payload,
                      absl::Span<float> out) const override {
    return DecodeSparsePayload(payload, CodecId::kThreshold, Layout::kIndexSign,
                               out);
  }

  using Codec::NewAggregation;
  std::unique_ptr<Aggregation> NewAggregation(
      uint64_t num_elements, uint32_t num_workers,
      const AggregationContext& context) const override {
    return NewReencodingAggregation(*this, num_elements, num_workers, context);
  }

 private:
  const float tau_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Codec>> MakeThresholdCodec(
    const CodecOptions& options) {
  if (!std::isfinite(options.tau) || !(options.tau > 0.0f)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "threshold tau is %g, want a finite value > 0", options.tau));
  }
  absl::Status status =
      CheckSparseLayouts(options, CodecId::kThreshold, Layout::kIndexSign);
  if (!status.ok()) return status;
  return std::unique_ptr<Codec>(std::make_unique<ThresholdCodec>(options.tau));
}

}  // namespace tern::kernels
