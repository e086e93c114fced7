#include "kernels/sparse_select.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace tern::kernels {
namespace {

// Calls visit(index) for `count` indices drawn uniformly, with replacement,
// from [0, total), total > 0. Draw j takes the 64-bit word (v[2r+1] << 32) |
// v[2r], r = j % 2, of RandomWords(stream, j / 2), and maps it to
// floor(word * total / 2^64) (multiply-shift, Lemire 2019, without the
// rejection step): every index gets floor or ceil of 2^64 / total of the
// words, so its probability is off from 1 / total by a relative error
// below total / 2^64 (below 2^-32 for fewer than 2^32 values), far under
// the sampling noise. Without rejection the number of Philox calls is
// fixed, and the draws are a pure function of the stream.
template <typename Visit>
void DrawIndices(uint64_t total, uint32_t count, const RandomStream& stream,
                 Visit visit) {
  PhiloxCounter words{};
  for (uint32_t j = 0; j < count; ++j) {
    const uint32_t r = j % 2;
    if (r == 0) words = RandomWords(stream, j / 2);
    const uint64_t word =
        (static_cast<uint64_t>(words.v[2 * r + 1]) << 32) | words.v[2 * r];
    visit(static_cast<uint64_t>(
        (static_cast<unsigned __int128>(word) * total) >> 64));
  }
}

// The number of the `count` values a fraction `fraction` stands for,
// rounded to nearest (a float fraction such as 0.7f = 0.69999999 must not
// lose one by truncation).
uint64_t RoundedCount(double fraction, uint64_t count) {
  if (!(fraction > 0.0)) return 0;  // also NaN
  if (fraction >= 1.0) return count;
  return static_cast<uint64_t>(std::llround(fraction * count));
}

// -0.0f as +0.0f, so that callers see the documented signs.
float PositiveZero(float value) { return value + 0.0f; }

}  // namespace

float SampledMagnitudeThreshold(
    absl::Span<const absl::Span<const float>> chunks, float drop_ratio,
    uint32_t sample_size, const RandomStream& stream) {
  // offsets[c] = number of values before chunk c.
  std::vector<uint64_t> offsets(chunks.size() + 1, 0);
  for (size_t c = 0; c < chunks.size(); ++c) {
    offsets[c + 1] = offsets[c] + chunks[c].size();
  }
  const uint64_t total = offsets.back();

  std::vector<float> sample;
  if (total <= sample_size) {
    sample.reserve(total);
    for (const absl::Span<const float> chunk : chunks) {
      for (const float value : chunk) {
        if (std::isfinite(value)) sample.push_back(std::fabs(value));
      }
    }
  } else {
    sample.reserve(sample_size);
    // The draws index the concatenation of the chunks, so the sample does
    // not depend on how the values are split into chunks.
    DrawIndices(total, sample_size, stream, [&](uint64_t index) {
      // The last chunk starting at or before `index`; it is not empty.
      const size_t c = std::upper_bound(offsets.begin(), offsets.end(), index) -
                       offsets.begin() - 1;
      const float value = chunks[c][index - offsets[c]];
      if (std::isfinite(value)) sample.push_back(std::fabs(value));
    });
  }
  if (sample.empty()) return 0.0f;

  // Dropping k of m sample values: t is the (k+1)-th smallest magnitude, so
  // exactly the k below it are dropped when the magnitudes are distinct. At
  // least one value is kept (drop_ratio < 1).
  const uint64_t dropped = std::min<uint64_t>(
      RoundedCount(drop_ratio, sample.size()), sample.size() - 1);
  std::nth_element(sample.begin(), sample.begin() + dropped, sample.end());
  return sample[dropped];
}

SignedThresholds SampledSignedThresholds(absl::Span<const float> values,
                                         float proportion, uint32_t sample_size,
                                         const RandomStream& stream) {
  std::vector<float> non_negative;
  std::vector<float> negative;
  auto take = [&](float value) {
    if (!std::isfinite(value)) return;
    (value >= 0.0f ? non_negative : negative).push_back(value);
  };
  if (values.size() <= sample_size) {
    for (const float value : values) take(value);
  } else {
    DrawIndices(values.size(), sample_size, stream,
                [&](uint64_t index) { take(values[index]); });
  }

  // Each class sends round(proportion * its size) of its values, at least
  // one (Dryden et al. 2016, section 3.3: a fixed proportion of the
  // non-negative and of the negative updates). A class the sample did not
  // meet gets threshold 0: the codec then sends all its nonzero values,
  // which the sample says are rare, rather than starving them forever.
  SignedThresholds thresholds;
  if (!non_negative.empty()) {
    const uint64_t sent = std::clamp<uint64_t>(
        RoundedCount(proportion, non_negative.size()), 1, non_negative.size());
    // The sent-th largest: index size - sent in ascending order.
    auto nth = non_negative.end() - sent;
    std::nth_element(non_negative.begin(), nth, non_negative.end());
    thresholds.positive = PositiveZero(*nth);
  }
  if (!negative.empty()) {
    const uint64_t sent = std::clamp<uint64_t>(
        RoundedCount(proportion, negative.size()), 1, negative.size());
    // The sent-th smallest (largest in magnitude).
    auto nth = negative.begin() + (sent - 1);
    std::nth_element(negative.begin(), nth, negative.end());
    thresholds.negative = *nth;
  }
  return thresholds;
}

}  // namespace tern::kernels
