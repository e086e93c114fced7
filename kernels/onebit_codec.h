// 1-bit SGD (Seide et al., Interspeech 2014; Dryden et al., MLHPC 2016,
// Sec. 3.1) as a Codec: one sign bit per element and two reconstruction
// values per group ("column"), in LAYOUT_SIGN_BITS. The quantization error
// is large and biased; error feedback (kernels/error_feedback.h on workers,
// AggregationContext::residual on shards) carries it into the next step,
// which is what makes the scheme converge. The codec itself is stateless.
#ifndef TERN_KERNELS_ONEBIT_CODEC_H_
#define TERN_KERNELS_ONEBIT_CODEC_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/codec.h"
#include "kernels/codec_options.h"

namespace tern::kernels {

class OneBitCodec final : public Codec {
 public:
  // sample_size == 0: exact means. Otherwise each group's means come from
  // sample_size draws when the group is longer than that (GroupMeans() in
  // onebit.h).
  explicit OneBitCodec(uint32_t sample_size) : sample_size_(sample_size) {}

  CodecId id() const override { return CodecId::kOneBit; }
  std::string name() const override { return CodecName(CodecId::kOneBit); }
  bool Summable() const override { return false; }
  bool UsesErrorFeedback() const override { return true; }

  // Groups of OneBitGroupSize(values.size(), context.group_size) elements;
  // sampled draws from context.stream. Ignores context.scaler and
  // context.threshold. INVALID_ARGUMENT naming the element for a non-finite
  // value, and for chunks above kMaxOneBitElements or groups the uint32
  // header cannot hold.
  absl::StatusOr<Payload> Encode(absl::Span<const float> values,
                                 const EncodeContext& context) const override;

  // A push or a pull (num_summands >= 1: a pull carries the average, which
  // is not divided again). Validates codec, layout SIGN_BITS, version,
  // element count, the header's group_size >= 1, 2 finite scalers per
  // group with the non-negative value >= 0 and the negative one <= 0, the
  // exact data length and zero padding.
  absl::Status Decode(const Payload& payload,
                      absl::Span<float> out) const override;

  // NewReencodingAggregation: decode, average in worker order, re-encode
  // (with the shard's residual) in groups of context.group_size.
  using Codec::NewAggregation;
  std::unique_ptr<Aggregation> NewAggregation(
      uint64_t num_elements, uint32_t num_workers,
      const AggregationContext& context) const override;

 private:
  const uint32_t sample_size_;
};

// The registry's factory: options.sampled_means picks sampled means with
// options.sample_size draws (which must then be >= 1). INVALID_ARGUMENT
// for a push or pull layout other than kUnspecified and kSignBits.
absl::StatusOr<std::unique_ptr<Codec>> MakeOneBitCodec(
    const CodecOptions& options);

}  // namespace tern::kernels

#endif  // TERN_KERNELS_ONEBIT_CODEC_H_
