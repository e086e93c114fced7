// Sampled threshold selection: exact on spans no longer than the sample,
// close to the exact quantile on large ones (with a bound derived from the
// order statistic's distribution), deterministic, and blind to how the
// values are split into chunks.
#include "kernels/sparse_select.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/codec_test_util.h"

namespace tern::kernels {
namespace {

using codec_test::Gaussian;

constexpr uint64_t kSmallSizes[] = {0, 1, 31, 32, 33, 1000};
constexpr uint64_t kLarge = (uint64_t{1} << 20) + 3;

const RandomStream kStream{
    .seed = 0x5EEDull, .step = 3, .chunk = 7, .worker = 1};

float Magnitude(absl::Span<const float> values, float drop_ratio,
                uint32_t sample_size, const RandomStream& stream = kStream) {
  const absl::Span<const float> chunks[] = {values};
  return SampledMagnitudeThreshold(chunks, drop_ratio, sample_size, stream);
}

// The definition on all values: with k = round(R * n) (at most n - 1)
// magnitudes dropped, t is the (k+1)-th smallest.
float ReferenceMagnitude(std::vector<float> values, double drop_ratio) {
  if (values.empty()) return 0.0f;
  for (float& value : values) value = std::fabs(value);
  std::sort(values.begin(), values.end());
  const uint64_t k = std::min<uint64_t>(
      std::llround(drop_ratio * values.size()), values.size() - 1);
  return values[k];
}

// round(pi * count) values of each sign class, at least one, are sent.
SignedThresholds ReferenceSigned(const std::vector<float>& values, double pi) {
  std::vector<float> non_negative, negative;
  for (const float value : values) {
    (value >= 0.0f ? non_negative : negative).push_back(value);
  }
  SignedThresholds result;
  std::sort(non_negative.begin(), non_negative.end(), std::greater<float>());
  std::sort(negative.begin(), negative.end());
  auto sent = [pi](size_t count) {
    return std::clamp<uint64_t>(std::llround(pi * count), 1, count);
  };
  if (!non_negative.empty()) {
    result.positive = non_negative[sent(non_negative.size()) - 1];
  }
  if (!negative.empty()) result.negative = negative[sent(negative.size()) - 1];
  return result;
}

double KeptFraction(absl::Span<const float> values, float threshold) {
  size_t kept = 0;
  for (const float value : values) kept += std::fabs(value) >= threshold;
  return static_cast<double>(kept) / values.size();
}

// The tolerance for a sampled quantile. With t the (k+1)-th smallest of m
// draws (with replacement) of a continuous distribution F, F(t) ~
// Beta(k+1, m-k), so the kept fraction 1 - F(t) has mean (m-k)/(m+1) and
// standard deviation sqrt(q(1-q)/(m+2)), q its mean. Five deviations (a
// normal tail of 6e-7) plus 1/m for the rounding of k and 1/n for the
// finite population make a bound a correct implementation misses with
// negligible probability. (At m = 4096 and R = 0.99 one deviation is 0.155
// percentage points, so a 0.2-point bound would fail for ~20% of seeds;
// m = 65536 gives 0.039 points, and the bound below is 0.21 points.)
double Tolerance(double q, uint64_t m, uint64_t n) {
  return 5.0 * std::sqrt(q * (1.0 - q) / (m + 2)) + 1.0 / m + 1.0 / n;
}

// ---------------------------------------------------------------------------
// SampledMagnitudeThreshold

TEST(SampledMagnitudeThresholdTest, HandMadeExact) {
  const std::vector<float> values = {3.0f, -1.0f, 2.0f, -5.0f, 0.5f};
  // 5 values, R = 0.4: 2 dropped (0.5 and 1), t = 2.
  EXPECT_EQ(Magnitude(values, 0.4f, 4096), 2.0f);
  EXPECT_EQ(Magnitude(values, 0.0f, 4096), 0.5f);
  // R = 0.99 would drop all 5 (round(4.95)); one is always kept.
  EXPECT_EQ(Magnitude(values, 0.99f, 4096), 5.0f);
  EXPECT_EQ(Magnitude(values, 0.6f, 4096), 3.0f);
  // Exactly sample_size values are still used whole.
  EXPECT_EQ(Magnitude(values, 0.4f, 5), 2.0f);
}

TEST(SampledMagnitudeThresholdTest, DropCountIsRoundedNotTruncated) {
  const std::vector<float> values = {-1, 2, -3, 4, -5, 6, -7, 8, -9, 10};
  // 0.7f is 0.69999999: 7 of 10 dropped (t = 8), not 6 (t = 7).
  EXPECT_EQ(Magnitude(values, 0.7f, 4096), 8.0f);
  EXPECT_EQ(Magnitude(values, 0.25f, 4096), 4.0f);  // round(2.5) = 3 dropped
}

TEST(SampledMagnitudeThresholdTest, EmptyIsZero) {
  EXPECT_EQ(Magnitude({}, 0.5f, 4096), 0.0f);
  EXPECT_EQ(SampledMagnitudeThreshold({}, 0.5f, 4096, kStream), 0.0f);
  const std::vector<float> nan = {std::numeric_limits<float>::quiet_NaN()};
  EXPECT_EQ(Magnitude(nan, 0.5f, 4096), 0.0f);
}

TEST(SampledMagnitudeThresholdTest, SmallSpansAreExact) {
  for (const uint64_t n : kSmallSizes) {
    const std::vector<float> values = Gaussian(n, 11 + n);
    for (const float ratio : {0.0f, 0.3f, 0.5f, 0.9f, 0.99f}) {
      EXPECT_EQ(Magnitude(values, ratio, 4096),
                ReferenceMagnitude(values, ratio))
          << "n " << n << " R " << ratio;
      // Exact means the stream does not matter.
      EXPECT_EQ(Magnitude(values, ratio, 4096, RandomStream{.seed = 99}),
                Magnitude(values, ratio, 4096))
          << "n " << n;
    }
  }
}

TEST(SampledMagnitudeThresholdTest, NonFiniteValuesAreNotDrawn) {
  std::vector<float> values = Gaussian(1000, 4);
  const float exact = Magnitude(values, 0.9f, 4096);
  std::vector<float> with_bad = values;
  with_bad.insert(with_bad.begin() + 10,
                  {std::numeric_limits<float>::quiet_NaN(),
                   std::numeric_limits<float>::infinity(),
                   -std::numeric_limits<float>::infinity()});
  EXPECT_EQ(Magnitude(with_bad, 0.9f, 4096), exact);

  // Sampled: a chunk whose odd elements are NaN selects among the finite
  // half only, so the kept fraction of the finite values stays close to
  // 1 - R (a NaN drawn as a huge magnitude would push it towards 0).
  std::vector<float> half(kLarge);
  const std::vector<float> finite = Gaussian(kLarge / 2 + 1, 5);
  for (size_t i = 0; i < half.size(); ++i) {
    half[i] =
        i % 2 == 0 ? finite[i / 2] : std::numeric_limits<float>::quiet_NaN();
  }
  const float t = Magnitude(half, 0.5f, 65536);
  // About 32768 finite draws.
  EXPECT_NEAR(KeptFraction(finite, t), 0.5, Tolerance(0.5, 30000, kLarge));
}

struct LargeCase {
  float drop_ratio;
  uint32_t sample_size;
};

class SampledAccuracyTest : public ::testing::TestWithParam<LargeCase> {};

TEST_P(SampledAccuracyTest, KeptFractionNearOneMinusR) {
  const LargeCase c = GetParam();
  // Sorted by magnitude, so the threshold tracks which indices the sampler
  // draws: one that favoured part of the range would miss the quantile.
  std::vector<float> values = Gaussian(kLarge, 21);
  std::sort(values.begin(), values.end(),
            [](float a, float b) { return std::fabs(a) < std::fabs(b); });
  const uint64_t m = c.sample_size;
  const uint64_t k = std::llround(static_cast<double>(c.drop_ratio) * m);
  const double q = static_cast<double>(m - k) / (m + 1);
  const double tolerance = Tolerance(q, m, kLarge);
  // Eight independent streams: each lands within the bound, and so does
  // their mean within the bound for the mean (sqrt(8) tighter).
  constexpr int kSeeds = 8;
  double sum = 0.0;
  double worst = 0.0;
  for (int s = 0; s < kSeeds; ++s) {
    RandomStream stream = kStream;
    stream.step = s;
    const double kept =
        KeptFraction(values, Magnitude(values, c.drop_ratio, m, stream));
    EXPECT_NEAR(kept, q, tolerance) << "step " << s;
    sum += kept;
    worst = std::max(worst, std::fabs(kept - (1.0 - c.drop_ratio)));
  }
  const double mean_tolerance =
      5.0 * std::sqrt(q * (1.0 - q) / (m + 2) / kSeeds) + 1.0 / m;
  EXPECT_NEAR(sum / kSeeds, q, mean_tolerance);
  std::printf(
      "R %.3f sample %u: kept fraction off 1-R by at most %.4f points "
      "(bound %.4f)\n",
      c.drop_ratio, c.sample_size, 100.0 * worst, 100.0 * tolerance);
}

INSTANTIATE_TEST_SUITE_P(Sizes, SampledAccuracyTest,
                         ::testing::Values(LargeCase{0.5f, 4096},
                                           LargeCase{0.9f, 4096},
                                           LargeCase{0.99f, 4096},
                                           LargeCase{0.99f, 65536}));

TEST(SampledMagnitudeThresholdTest, SampledDiffersFromExactButDeterministic) {
  const std::vector<float> values = Gaussian(kLarge, 8);
  const float a = Magnitude(values, 0.99f, 4096);
  EXPECT_EQ(Magnitude(values, 0.99f, 4096), a);
  // Another seed draws another sample: of several, some differ.
  int different = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    RandomStream stream = kStream;
    stream.seed = seed;
    different += Magnitude(values, 0.99f, 4096, stream) != a;
  }
  EXPECT_GE(different, 3);
}

TEST(SampledMagnitudeThresholdTest, IndependentOfTheSplitIntoChunks) {
  for (const uint64_t n : {uint64_t{33}, uint64_t{1000}, kLarge}) {
    const std::vector<float> values = Gaussian(n, 30);
    const absl::Span<const float> all(values);
    const size_t a = n / 3;
    const size_t b = n / 2;
    const absl::Span<const float> split[] = {
        all.subspan(0, a), all.subspan(a, 0), all.subspan(a, b - a),
        all.subspan(b)};
    // Exact with 4096 draws for the small sizes, sampled otherwise: the
    // draws index the concatenation, so both splits see the same sample.
    for (const uint32_t sample : {uint32_t{4096}, uint32_t{20}}) {
      EXPECT_EQ(SampledMagnitudeThreshold(split, 0.9f, sample, kStream),
                Magnitude(values, 0.9f, sample))
          << "n " << n << " sample " << sample;
    }
  }
}

// ---------------------------------------------------------------------------
// SampledSignedThresholds

TEST(SampledSignedThresholdsTest, HandMadeExact) {
  const std::vector<float> values = {5, 4, 3, 2, 1, 0, -1, -2, -3};
  // 6 non-negative values, pi = 0.25: round(1.5) = 2 sent, t+ = 4; 3
  // negative: round(0.75) = 1 sent, t- = -3.
  SignedThresholds t = SampledSignedThresholds(values, 0.25f, 4096, kStream);
  EXPECT_EQ(t.positive, 4.0f);
  EXPECT_EQ(t.negative, -3.0f);
  // At least one of each class.
  t = SampledSignedThresholds(values, 0.001f, 4096, kStream);
  EXPECT_EQ(t.positive, 5.0f);
  EXPECT_EQ(t.negative, -3.0f);
  t = SampledSignedThresholds(values, 1.0f, 4096, kStream);
  EXPECT_EQ(t.positive, 0.0f);
  EXPECT_EQ(t.negative, -1.0f);
}

TEST(SampledSignedThresholdsTest, MissingClassGivesZero) {
  const std::vector<float> positive = {1, 2, 3};
  SignedThresholds t = SampledSignedThresholds(positive, 0.5f, 4096, kStream);
  EXPECT_EQ(t.positive, 2.0f);
  EXPECT_EQ(t.negative, 0.0f);
  const std::vector<float> negative = {-1, -2, -0.0f};
  t = SampledSignedThresholds(negative, 0.5f, 4096, kStream);
  EXPECT_EQ(t.negative, -2.0f);
  // -0.0 is non-negative, and the threshold is +0.
  EXPECT_EQ(t.positive, 0.0f);
  EXPECT_FALSE(std::signbit(t.positive));
  t = SampledSignedThresholds({}, 0.5f, 4096, kStream);
  EXPECT_EQ(t.positive, 0.0f);
  EXPECT_EQ(t.negative, 0.0f);
}

TEST(SampledSignedThresholdsTest, SmallSpansAreExact) {
  for (const uint64_t n : kSmallSizes) {
    const std::vector<float> values = Gaussian(n, 40 + n);
    for (const float pi : {0.001f, 0.1f, 0.5f, 1.0f}) {
      const SignedThresholds want = ReferenceSigned(values, pi);
      const SignedThresholds got =
          SampledSignedThresholds(values, pi, 4096, kStream);
      EXPECT_EQ(got.positive, want.positive) << "n " << n << " pi " << pi;
      EXPECT_EQ(got.negative, want.negative) << "n " << n << " pi " << pi;
    }
  }
}

TEST(SampledSignedThresholdsTest, SampledProportionsNearPi) {
  // Skewed data: 3/4 of the values negative, so the classes differ in size.
  std::vector<float> values = Gaussian(kLarge, 50);
  for (size_t i = 0; i < values.size(); ++i) {
    if (i % 4 != 0) values[i] = -std::fabs(values[i]);
  }
  size_t non_negative = 0;
  for (const float value : values) non_negative += value >= 0.0f;
  const size_t negative = values.size() - non_negative;
  constexpr float kPi = 0.05f;
  constexpr uint32_t kSample = 65536;
  for (uint32_t step = 0; step < 4; ++step) {
    RandomStream stream = kStream;
    stream.step = step;
    const SignedThresholds t =
        SampledSignedThresholds(values, kPi, kSample, stream);
    size_t sent_positive = 0, sent_negative = 0;
    for (const float value : values) {
      sent_positive += value >= 0.0f && value >= t.positive;
      sent_negative += value < 0.0f && value <= t.negative;
    }
    // Each class holds about its share of the draws (1/4 and 3/4; take a
    // little less to cover the binomial spread), and within the class the
    // bound of Tolerance() applies.
    EXPECT_NEAR(static_cast<double>(sent_positive) / non_negative, kPi,
                Tolerance(kPi, kSample / 4 * 9 / 10, non_negative));
    EXPECT_NEAR(static_cast<double>(sent_negative) / negative, kPi,
                Tolerance(kPi, kSample * 3 / 4 * 9 / 10, negative));
  }
}

TEST(SampledSignedThresholdsTest, Deterministic) {
  const std::vector<float> values = Gaussian(kLarge, 60);
  const SignedThresholds a =
      SampledSignedThresholds(values, 0.01f, 4096, kStream);
  const SignedThresholds b =
      SampledSignedThresholds(values, 0.01f, 4096, kStream);
  EXPECT_EQ(a.positive, b.positive);
  EXPECT_EQ(a.negative, b.negative);
  RandomStream other = kStream;
  other.worker = 2;
  const SignedThresholds c =
      SampledSignedThresholds(values, 0.01f, 4096, other);
  EXPECT_TRUE(a.positive != c.positive || a.negative != c.negative);
}

}  // namespace
}  // namespace tern::kernels
