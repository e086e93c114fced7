// Threshold quantization (Strom 2015, as described in Dryden et al. 2016,
// section 3.2): a fixed threshold tau > 0; values v >= tau are sent as
// +tau, values v <= -tau as -tau, the rest are not sent. Error feedback
// (UsesErrorFeedback) carries what is not sent into the next step.
//
// Layout LAYOUT_INDEX_SIGN with one group (group_size = num_elements) and
// scalers (tau, -tau). Encode is deterministic and ignores the context.
// The server decodes, averages in fp32 and re-encodes the average with the
// same tau (Dryden et al. 2016, section 3.4), keeping its own residual.
#ifndef TERN_KERNELS_THRESHOLD_CODEC_H_
#define TERN_KERNELS_THRESHOLD_CODEC_H_

#include <memory>

#include "absl/status/statusor.h"
#include "kernels/codec.h"
#include "kernels/codec_options.h"

namespace tern::kernels {

// Uses options.tau (finite, > 0) and the layouts (kUnspecified or
// INDEX_SIGN); INVALID_ARGUMENT otherwise.
absl::StatusOr<std::unique_ptr<Codec>> MakeThresholdCodec(
    const CodecOptions& options);

}  // namespace tern::kernels

#endif  // TERN_KERNELS_THRESHOLD_CODEC_H_
