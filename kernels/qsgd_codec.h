// QSGD (Alistarh et al., NIPS 2017) as a Codec: s levels per sign and one
// L2 norm per bucket, stochastic and unbiased (qsgd.h), in
// LAYOUT_QSGD_LEVELS. Unbiased quantization needs no error feedback. The
// server decodes the pushes, averages them in fp32 and re-encodes the
// average with the same levels and buckets.
#ifndef TERN_KERNELS_QSGD_CODEC_H_
#define TERN_KERNELS_QSGD_CODEC_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/codec.h"
#include "kernels/codec_options.h"

namespace tern::kernels {

class QsgdCodec final : public Codec {
 public:
  // levels in [1, kMaxQsgdLevels] and bucket_size >= 1 (MakeQsgdCodec
  // checks; the constructor trusts them).
  QsgdCodec(uint32_t levels, uint32_t bucket_size)
      : levels_(levels), bucket_size_(bucket_size) {}

  CodecId id() const override { return CodecId::kQsgd; }
  std::string name() const override { return CodecName(CodecId::kQsgd); }
  bool Summable() const override { return false; }
  bool UsesErrorFeedback() const override { return false; }

  // Element i draws from (context.stream, i); the rest of the context is
  // ignored. INVALID_ARGUMENT naming the element for a non-finite value,
  // naming the bucket for a norm above the float range, and for more than
  // kMaxQsgdElements values. A bucket of zeros has norm 0 and level 0
  // everywhere.
  absl::StatusOr<Payload> Encode(absl::Span<const float> values,
                                 const EncodeContext& context) const override;

  // A push or a pull (num_summands >= 1: a pull carries the average, which
  // is not divided again), with the bucket size and levels its header
  // names, whatever this codec's own are. Validates codec, layout
  // QSGD_LEVELS, version, element count, the header (bucket_size >= 1, s in
  // [1, kMaxQsgdLevels]), one finite norm >= 0 per bucket, the exact data
  // length, every field (<= 2s) and zero padding.
  absl::Status Decode(const Payload& payload,
                      absl::Span<float> out) const override;

  // NewReencodingAggregation: decode, average in worker order, re-encode
  // with context.stream.
  using Codec::NewAggregation;
  std::unique_ptr<Aggregation> NewAggregation(
      uint64_t num_elements, uint32_t num_workers,
      const AggregationContext& context) const override;

 private:
  const uint32_t levels_;
  const uint32_t bucket_size_;
};

// The registry's factory: s = options.qsgd_levels in [1, kMaxQsgdLevels],
// buckets of options.qsgd_bucket >= 1 elements. INVALID_ARGUMENT for
// values outside those ranges and for a push or pull layout other than
// kUnspecified and kQsgdLevels.
absl::StatusOr<std::unique_ptr<Codec>> MakeQsgdCodec(
    const CodecOptions& options);

}  // namespace tern::kernels

#endif  // TERN_KERNELS_QSGD_CODEC_H_
