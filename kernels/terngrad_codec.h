// TernGrad (Wen et al., NIPS 2017) as a Codec: a worker ternarizes each
// chunk with the scaler the shard shares (DESIGN section 3), the server sums
// the integer codes of the N workers, and the pull carries the sums in a few
// bits each plus the shared scaler.
#ifndef TERN_KERNELS_TERNGRAD_CODEC_H_
#define TERN_KERNELS_TERNGRAD_CODEC_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/codec.h"
#include "kernels/codec_options.h"

namespace tern::kernels {

struct TernGradOptions {
  // Clipping at clip * sigma for the local scaler (Sec. 3.3); 0 disables it.
  float clip = 2.5f;
  // Whose bound clips a gradient ternarized with a shared scaler: the
  // worker's own s_ik (the paper) or the shared s_k.
  ClipRule clip_rule = ClipRule::kWorker;
  // kTernary2Bit or kTernaryBase3.
  Layout push_layout = Layout::kTernary2Bit;
  // kSumBits, kSumRadix or kSumHuffman. (A run's defaults are the worker's
  // flags, worker/worker_options.h: base 3 and Huffman.)
  Layout pull_layout = Layout::kSumBits;
};

class TernGradCodec final : public Codec {
 public:
  // INVALID_ARGUMENT for a negative or non-finite clip or a layout of the
  // wrong kind.
  static absl::StatusOr<std::unique_ptr<TernGradCodec>> Create(
      const TernGradOptions& options);

  CodecId id() const override { return CodecId::kTernGrad; }
  std::string name() const override { return CodecName(CodecId::kTernGrad); }
  // Pushes that share a scaler add as integers.
  bool Summable() const override { return true; }

  const TernGradOptions& options() const { return options_; }

  // Quantizes with context.scaler when it is > 0 (the shared scaler s_k),
  // else with the local scaler s_ik = min(clip * sigma, max|g|) of `values`
  // (non-finite values left out of both; they encode as code 0). With a
  // shared scaler, ClipRule::kWorker clips at s_ik (context.clip_bound, or
  // computed here when that is NaN): p = min(|g|, s_ik) / s_k (Wen et al.
  // 2017, Sec. 3.3); ClipRule::kShared clips at s_k. The payload carries the
  // scaler used: scalers = {s}. INVALID_ARGUMENT for a non-finite context
  // scaler, a negative or infinite context clip bound, or more than
  // kMaxTernaryElements values.
  absl::StatusOr<Payload> Encode(absl::Span<const float> values,
                                 const EncodeContext& context) const override;

  // Either layout of a push (num_summands 1: out = s * code) or of a pull
  // (out = s * sum / N), whatever this codec's own options are.
  absl::Status Decode(const Payload& payload,
                      absl::Span<float> out) const override;

  // Validates each push (codec, this codec's push layout, version, element
  // count, one finite scaler >= 0 equal to the first accepted push's, the
  // bytes) and adds its codes into int32 sums. Finish packs the sums in the
  // pull layout with num_summands = num_workers and scalers = {s}.
  using Codec::NewAggregation;
  std::unique_ptr<Aggregation> NewAggregation(
      uint64_t num_elements, uint32_t num_workers,
      const AggregationContext& context) const override;

 private:
  explicit TernGradCodec(const TernGradOptions& options) : options_(options) {}

  const TernGradOptions options_;
};

}  // namespace tern::kernels

#endif  // TERN_KERNELS_TERNGRAD_CODEC_H_
