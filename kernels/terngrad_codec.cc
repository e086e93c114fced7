#include "kernels/terngrad_codec.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "kernels/payload_checks.h"
#include "kernels/sum_huffman.h"
#include "kernels/terngrad.h"

namespace tern::kernels {
namespace {

bool IsPushLayout(Layout layout) {
  return layout == Layout::kTernary2Bit || layout == Layout::kTernaryBase3;
}

bool IsPullLayout(Layout layout) {
  return layout == Layout::kSumBits || layout == Layout::kSumRadix ||
         layout == Layout::kSumHuffman;
}

class TernGradAggregation final : public Aggregation {
 public:
  TernGradAggregation(uint64_t num_elements, uint32_t num_workers,
                      Layout push_layout, Layout pull_layout)
      : num_elements_(num_elements),
        num_workers_(num_workers),
        push_layout_(push_layout),
        pull_layout_(pull_layout),
        added_(num_workers, false) {}

  absl::Status Add(uint32_t worker, const Payload& push) override {
    if (worker >= num_workers_) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "worker %d is out of range: %d workers", worker, num_workers_));
    }
    if (added_[worker]) {
      return absl::AlreadyExistsError(
          absl::StrFormat("worker %d already pushed", worker));
    }
    absl::Status status =
        CheckPayloadHeader(push, CodecId::kTernGrad, num_elements_);
    if (status.ok()) status = CheckIsPush(push);
    if (status.ok()) status = CheckScalers(push, 1);
    if (!status.ok()) return status;
    if (push.layout != push_layout_) {
      return absl::InvalidArgumentError(
          absl::StrFormat("push has layout %s, want %s",
                          LayoutName(push.layout), LayoutName(push_layout_)));
    }
    // Codes only add up under one scaler (Wen et al. 2017, Algorithm 1:
    // scaler sharing), so every push must carry the shared one.
    const float scaler = push.scalers[0];
    if (scaler_.has_value() && scaler != *scaler_) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "push scaler %.9g differs from the shared scaler %.9g", scaler,
          *scaler_));
    }
    // The first push's codes are the sums so far: written, not added to
    // zeros, so its memory needs no zero-fill first.
    if (num_added_ == 0) {
      if (sums_ == nullptr) sums_.reset(new int32_t[num_elements_]);
      status =
          AssignTernary(DataBytes(push), num_elements_, push.layout, Sums());
    } else {
      status = AccumulateTernary(DataBytes(push), num_elements_, push.layout,
                                 Sums());
    }
    if (!status.ok()) return status;
    added_[worker] = true;
    ++num_added_;
    scaler_ = scaler;
    return absl::OkStatus();
  }

  absl::StatusOr<Payload> Finish() override {
    if (finished_) return AlreadyFinished();
    if (num_workers_ == 0 || num_workers_ > kMaxSummands) {
      return absl::FailedPreconditionError(
          absl::StrFormat("%d workers: TernGrad sums need 1 to %d",
                          num_workers_, kMaxSummands));
    }
    if (num_added_ < num_workers_) {
      return absl::FailedPreconditionError(
          absl::StrFormat("%d of %d pushes added", num_added_, num_workers_));
    }
    Payload pull;
    pull.codec = CodecId::kTernGrad;
    pull.layout = pull_layout_;
    pull.num_elements = num_elements_;
    pull.num_summands = num_workers_;
    pull.scalers = {*scaler_};
    if (pull_layout_ == Layout::kSumHuffman) {
      pull.data = PackSumsHuffman(Sums(), num_workers_);
    } else {
      PackSums(Sums(), num_workers_, pull_layout_,
               ResizeData(&pull, PackedSumBytes(num_elements_, num_workers_,
                                                pull_layout_)));
    }
    sums_.reset();
    finished_ = true;
    return pull;
  }

 private:
  absl::Span<int32_t> Sums() { return {sums_.get(), num_elements_}; }

  const uint64_t num_elements_;
  const uint32_t num_workers_;
  const Layout push_layout_;
  const Layout pull_layout_;

  std::vector<bool> added_;
  uint32_t num_added_ = 0;
  std::optional<float> scaler_;  // the first accepted push's
  // num_elements_ sums, allocated (uninitialized) by the first push.
  std::unique_ptr<int32_t[]> sums_;
  bool finished_ = false;        // Finish moved the pull out
};

}  // namespace

absl::StatusOr<std::unique_ptr<TernGradCodec>> TernGradCodec::Create(
    const TernGradOptions& options) {
  if (!std::isfinite(options.clip) || options.clip < 0.0f) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "terngrad clip is %g, want a finite value >= 0", options.clip));
  }
  if (options.clip_rule != ClipRule::kWorker &&
      options.clip_rule != ClipRule::kShared) {
    return absl::InvalidArgumentError(
        absl::StrFormat("terngrad clip_rule %d is unknown",
                        static_cast<uint32_t>(options.clip_rule)));
  }
  if (!IsPushLayout(options.push_layout)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "terngrad push layout %s, want TERNARY_2BIT or TERNARY_BASE3",
        LayoutName(options.push_layout)));
  }
  if (!IsPullLayout(options.pull_layout)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "terngrad pull layout %s, want SUM_BITS, SUM_RADIX or SUM_HUFFMAN",
        LayoutName(options.pull_layout)));
  }
  return std::unique_ptr<TernGradCodec>(new TernGradCodec(options));
}

absl::StatusOr<Payload> TernGradCodec::Encode(
    absl::Span<const float> values, const EncodeContext& context) const {
  if (values.size() > kMaxTernaryElements) {
    return absl::InvalidArgumentError(
        absl::StrFormat("terngrad chunk of %d values is above the limit of %d",
                        values.size(), kMaxTernaryElements));
  }
  float scaler = context.scaler;
  if (!std::isfinite(scaler)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("terngrad scaler %g is not finite", scaler));
  }
  // The bound this worker's gradient is clipped at (Wen et al. 2017, Sec.
  // 3.3): its own s_ik, below or at the shared s_k; +Inf clips at s_k.
  float clip_bound = std::numeric_limits<float>::infinity();
  if (!(scaler > 0.0f)) {
    scaler = LocalScaler(ComputeStats(values), options_.clip);
  } else if (options_.clip_rule == ClipRule::kWorker) {
    clip_bound = context.clip_bound;
    if (std::isnan(clip_bound)) {
      clip_bound = LocalScaler(ComputeStats(values), options_.clip);
    } else if (!(clip_bound >= 0.0f) || std::isinf(clip_bound)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "terngrad clip bound %g is not a finite value >= 0", clip_bound));
    }
  }
  Payload payload;
  payload.codec = CodecId::kTernGrad;
  payload.layout = options_.push_layout;
  payload.num_elements = values.size();
  payload.num_summands = 1;
  payload.scalers = {scaler};
  QuantizePack(values, clip_bound, scaler, context.stream, options_.push_layout,
               ResizeData(&payload, PackedTernaryBytes(values.size(),
                                                       options_.push_layout)));
  return payload;
}

absl::Status TernGradCodec::Decode(const Payload& payload,
                                   absl::Span<float> out) const {
  absl::Status status =
      CheckPayloadHeader(payload, CodecId::kTernGrad, out.size());
  if (status.ok()) status = CheckScalers(payload, 1);
  if (!status.ok()) return status;
  const float scaler = payload.scalers[0];
  if (IsPushLayout(payload.layout)) {
    status = CheckIsPush(payload);
    if (!status.ok()) return status;
    return DecodeTernary(DataBytes(payload), payload.num_elements,
                         payload.layout, scaler, out);
  }
  if (IsPullLayout(payload.layout)) {
    return DecodeSums(DataBytes(payload), payload.num_elements,
                      payload.num_summands, payload.layout, scaler, out);
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "terngrad payload has layout %s", LayoutName(payload.layout)));
}

std::unique_ptr<Aggregation> TernGradCodec::NewAggregation(
    uint64_t num_elements, uint32_t num_workers,
    const AggregationContext& /*context*/) const {
  return std::make_unique<TernGradAggregation>(
      num_elements, num_workers, options_.push_layout, options_.pull_layout);
}

}  // namespace tern::kernels
