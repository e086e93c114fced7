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
// The survivors are sent as options.drop_survivors says:
//   - kValues: LAYOUT_INDEX_VALUE, (index, float32 value) pairs;
//   - k1Bit: LAYOUT_INDEX_SIGN with one group and scalers (mean of the kept
//     positive values, mean of the kept negative values): the 1-bit
//     "average" quantization of section 5.4, which slowed NMT there;
//   - k2Bit: LAYOUT_INDEX_2BIT, a sign bit and a large/small bit per kept
//     value, scalers (mean |v| of the small ones, mean |v| of the large
//     ones), the boundary halfway between the threshold and the largest
//     kept |v|: the 2-bit quantization sections 5.4 and 6 recommend ("2-bit
//     quantization is likely to be sufficient, separating large movers from
//     small changes"); the bucket rule is the one of the authors'
//     implementation (marian-nmt's gradient dropper, bits=2), which the
//     paper does not spell out. Chunks shorter than 2^30 elements.
// The server decodes, averages in fp32 and re-drops the average with a
// threshold of its own chunk.
#ifndef TERN_KERNELS_DROPPING_CODEC_H_
#define TERN_KERNELS_DROPPING_CODEC_H_

#include <memory>

#include "absl/status/statusor.h"
#include "kernels/codec.h"
#include "kernels/codec_options.h"

namespace tern::kernels {

// Uses options.drop_ratio (in [0, 1)), drop_scope, drop_survivors,
// sample_size (>= 1) and the layouts (kUnspecified or the one
// drop_survivors selects: DroppingLayout); INVALID_ARGUMENT otherwise.
absl::StatusOr<std::unique_ptr<Codec>> MakeDroppingCodec(
    const CodecOptions& options);

// The layout dropping writes its survivors in: INDEX_VALUE, INDEX_SIGN or
// INDEX_2BIT; kUnspecified for a DropSurvivors outside the enum.
Layout DroppingLayout(DropSurvivors survivors);

}  // namespace tern::kernels

#endif  // TERN_KERNELS_DROPPING_CODEC_H_
