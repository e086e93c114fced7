// int8: symmetric per-chunk linear quantization, the WeightGrad LPS's
// `--weight_codec=int8` (DESIGN section 4). The chunk's one scale is
// max|w| / 127 and each element travels as the int8 nearest to w / scale
// (LAYOUT_RAW: one signed byte per element, scalers = {scale}); decoding is
// scale * q. It is deterministic: no randomness, so every LPS and worker
// reads the same weights from the same bytes.
//
// Error bound: |decode(encode(w)) - w| <= scale / 2 (plus float rounding,
// a few ulp of max|w|) for every finite element.
#ifndef TERN_KERNELS_INT8_CODEC_H_
#define TERN_KERNELS_INT8_CODEC_H_

#include <memory>
#include <string>

#include "kernels/codec.h"

namespace tern::kernels {

// The largest code magnitude: -128 is never written, and a decoder refuses
// it (the scale is symmetric).
inline constexpr int kInt8MaxCode = 127;

class Int8Codec final : public Codec {
 public:
  CodecId id() const override { return CodecId::kInt8; }
  std::string name() const override { return CodecName(CodecId::kInt8); }
  // Codes under different scales do not add: a shard decodes, averages in
  // fp32 and re-encodes.
  bool Summable() const override { return false; }

  // Ignores the context. q = round(w / scale), halves away from zero,
  // clamped to [-127, 127]. Non-finite elements are left out of max|w| and
  // encode as 0 (as TernGrad does), so the scale stays finite; the caller
  // decides what a non-finite weight means. An all-zero chunk has scale 0.
  absl::StatusOr<Payload> Encode(absl::Span<const float> values,
                                 const EncodeContext& context) const override;
  // out = scale * q, for a push (num_summands 1) and for a pull (the
  // re-encoded average, num_summands N) alike. INVALID_ARGUMENT for a
  // header, scaler or length that does not match, or a byte of -128.
  absl::Status Decode(const Payload& payload,
                      absl::Span<float> out) const override;
  // Pull: int8 of the fp32 average (pushes added in worker order), with
  // num_summands = num_workers.
  using Codec::NewAggregation;
  std::unique_ptr<Aggregation> NewAggregation(
      uint64_t num_elements, uint32_t num_workers,
      const AggregationContext& context) const override;
};

}  // namespace tern::kernels

#endif  // TERN_KERNELS_INT8_CODEC_H_
