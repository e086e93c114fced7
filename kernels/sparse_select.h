// Threshold selection on a random sample, shared by the adaptive (Dryden et
// al. 2016, section 3) and dropping (Aji & Heafield 2017, section 3)
// codecs: instead of sorting a whole gradient, draw `sample_size` elements
// with replacement by the counter-based RNG and take the order statistic
// of the sample. A span set with at most `sample_size` elements in all is
// used whole, so small chunks get the exact threshold.
#ifndef TERN_KERNELS_SPARSE_SELECT_H_
#define TERN_KERNELS_SPARSE_SELECT_H_

#include <cstdint>

#include "absl/types/span.h"
#include "common/philox.h"

namespace tern::kernels {

// The magnitude t such that a fraction `drop_ratio` (in [0, 1)) of the
// values of all `chunks` together have |v| < t, estimated from the sample.
// Over several chunks it is the dropping codec's global threshold
// (DropScope::kGlobal); the worker calls it with stream (seed, step,
// chunk = 0xFFFFFFFF, worker id). Non-finite values are not drawn.
float SampledMagnitudeThreshold(
    absl::Span<const absl::Span<const float>> chunks, float drop_ratio,
    uint32_t sample_size, const RandomStream& stream);

// Adaptive quantization's two thresholds: the value t_pos such that a
// fraction `proportion` of the non-negative values are >= t_pos, and t_neg
// such that the same fraction of the negative values are <= t_neg,
// estimated from one sample of `values`.
struct SignedThresholds {
  float positive = 0.0f;  // >= 0
  float negative = 0.0f;  // <= 0
};
SignedThresholds SampledSignedThresholds(absl::Span<const float> values,
                                         float proportion,
                                         uint32_t sample_size,
                                         const RandomStream& stream);

}  // namespace tern::kernels

#endif  // TERN_KERNELS_SPARSE_SELECT_H_
