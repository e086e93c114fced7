// The fp32 baseline: values travel as raw IEEE float32 (LAYOUT_RAW), and
// the server averages them in fp32.
#ifndef TERN_KERNELS_FP32_CODEC_H_
#define TERN_KERNELS_FP32_CODEC_H_

#include <memory>
#include <string>

#include "kernels/codec.h"

namespace tern::kernels {

class Fp32Codec final : public Codec {
 public:
  CodecId id() const override { return CodecId::kFp32; }
  std::string name() const override { return CodecName(CodecId::kFp32); }
  bool Summable() const override { return false; }

  // Ignores the context: nothing is random or scaled.
  absl::StatusOr<Payload> Encode(absl::Span<const float> values,
                                 const EncodeContext& context) const override;
  // The same bytes written into `out`, whose buffer is reused: no fresh
  // pages when the caller keeps the payload from one step to the next.
  absl::Status EncodeInto(absl::Span<const float> values,
                          const EncodeContext& context,
                          Payload* out) const override;
  // A push decodes to the worker's values, a pull to the average.
  absl::Status Decode(const Payload& payload,
                      absl::Span<float> out) const override;
  // Pull: the fp32 average of the pushes, added in worker order, with
  // num_summands = num_workers.
  using Codec::NewAggregation;
  std::unique_ptr<Aggregation> NewAggregation(
      uint64_t num_elements, uint32_t num_workers,
      const AggregationContext& context) const override;
};

}  // namespace tern::kernels

#endif  // TERN_KERNELS_FP32_CODEC_H_
