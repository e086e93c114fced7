// The fp16 baseline: values travel as IEEE binary16 (LAYOUT_RAW, 2 bytes
// each, rounded to nearest even by fp16_math.h); the server decodes, adds
// in fp32 and sends back the binary16 of the fp32 average.
#ifndef TERN_KERNELS_FP16_CODEC_H_
#define TERN_KERNELS_FP16_CODEC_H_

#include <memory>
#include <string>

#include "kernels/codec.h"

namespace tern::kernels {

class Fp16Codec final : public Codec {
 public:
  CodecId id() const override { return CodecId::kFp16; }
  std::string name() const override { return CodecName(CodecId::kFp16); }
  bool Summable() const override { return false; }

  // Ignores the context. NaN and Inf are preserved; finite values beyond
  // the binary16 range become +-Inf.
  absl::StatusOr<Payload> Encode(absl::Span<const float> values,
                                 const EncodeContext& context) const override;
  absl::Status Decode(const Payload& payload,
                      absl::Span<float> out) const override;
  // Pull: binary16 of the fp32 average (pushes added in worker order), with
  // num_summands = num_workers.
  using Codec::NewAggregation;
  std::unique_ptr<Aggregation> NewAggregation(
      uint64_t num_elements, uint32_t num_workers,
      const AggregationContext& context) const override;
};

}  // namespace tern::kernels

#endif  // TERN_KERNELS_FP16_CODEC_H_
