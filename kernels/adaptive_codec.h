// Adaptive quantization (Dryden et al. 2016, section 3.3): per chunk, the
// thresholds tau+ and tau- that send a proportion pi of the non-negative and
// of the negative values, selected on a sample of the chunk
// (SampledSignedThresholds, keyed by EncodeContext::stream; chunks no
// longer than the sample are exact). Positive values >= tau+ and negative
// values <= tau- are sent; each group ("column", EncodeContext::group_size,
// 0 = the whole chunk) reconstructs them with the mean of its sent positive
// and the mean of its sent negative values. Zeros are never sent. Error
// feedback (UsesErrorFeedback) carries what is not sent into the next step.
//
// Layout LAYOUT_INDEX_SIGN, scalers (positive mean, negative mean) per
// group, 0 for a group that sends none of that sign. The server decodes,
// averages in fp32 and re-encodes the average with the same pi.
#ifndef TERN_KERNELS_ADAPTIVE_CODEC_H_
#define TERN_KERNELS_ADAPTIVE_CODEC_H_

#include <memory>

#include "absl/status/statusor.h"
#include "kernels/codec.h"
#include "kernels/codec_options.h"

namespace tern::kernels {

// Uses options.proportion (in (0, 1]), options.sample_size (>= 1) and the
// layouts (kUnspecified or INDEX_SIGN); INVALID_ARGUMENT otherwise.
absl::StatusOr<std::unique_ptr<Codec>> MakeAdaptiveCodec(
    const CodecOptions& options);

}  // namespace tern::kernels

#endif  // TERN_KERNELS_ADAPTIVE_CODEC_H_
