// Gradient dropping (Aji & Heafield 2017, section 4): the fraction R =
// drop_ratio of the values with the smallest |v| is dropped, the rest is
// sent; error feedback (UsesErrorFeedback) keeps the dropped values as the
// residual. The threshold t (keep |v| >= t, never zeros) is
//   - with DropScope::kGlobal, EncodeContext::threshold when it is > 0: the
//     worker's threshold over all its chunks (SampledMagnitudeThreshold
//     over every compensated chunk);
//   - otherwise, and always with DropScope::kPerTensor,
//     SampledMagnitudeThreshold over this chunk alone, keyed by
//     EncodeContext::stream (exact for chunks no longer than the sample).
//
// Layout LAYOUT_INDEX_VALUE: (index, float32 value) pairs. With
// drop_quantize (section 5.4, "2-bit quantization" of the survivors):
// LAYOUT_INDEX_SIGN with one group and scalers (mean of the kept positive
// values, mean of the kept negative values). The server decodes, averages
// in fp32 and re-drops the average with a threshold of its own chunk.
#ifndef TERN_KERNELS_DROPPING_CODEC_H_
#define TERN_KERNELS_DROPPING_CODEC_H_

#include <memory>

#include "absl/status/statusor.h"
#include "kernels/codec.h"
#include "kernels/codec_options.h"

namespace tern::kernels {

// Uses options.drop_ratio (in [0, 1)), drop_scope, drop_quantize,
// sample_size (>= 1) and the layouts (kUnspecified or the one drop_quantize
// selects); INVALID_ARGUMENT otherwise.
absl::StatusOr<std::unique_ptr<Codec>> MakeDroppingCodec(
    const CodecOptions& options);

}  // namespace tern::kernels

#endif  // TERN_KERNELS_DROPPING_CODEC_H_
