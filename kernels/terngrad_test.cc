// The worker side of TernGrad: statistics, scaler, ternarization (its
// distribution and its determinism) and the equality of every SIMD variant
// with the scalar definition in ternary_math.h.
#include "kernels/terngrad.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/codec_test_util.h"
#include "kernels/ternary_math.h"
#include "kernels/terngrad_simd.h"

namespace tern::kernels {
namespace {

using codec_test::Gaussian;

constexpr uint64_t kSizes[] = {0, 1, 4, 5, 63, 64, 65, (1u << 20) + 3};

// The codes of `values` straight from the definition: element i uses word
// i % 4 of RandomWords(stream, i / 4).
// `bound` is the clip bound Ternarize gets (the scaler unless given).
std::vector<int> ReferenceCodes(const std::vector<float>& values, float scaler,
                                const RandomStream& stream,
                                float bound = std::nanf("")) {
  if (std::isnan(bound)) bound = scaler;
  std::vector<int> codes(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const PhiloxCounter words =
        RandomWords(stream, static_cast<uint32_t>(i / 4));
    codes[i] = Ternarize(values[i], bound, scaler, words.v[i % 4]);
  }
  return codes;
}

std::vector<int> Codes(absl::Span<const uint8_t> packed, uint64_t n,
                       Layout layout) {
  std::vector<int8_t> codes(n);
  EXPECT_TRUE(UnpackTernary(packed, n, layout, absl::MakeSpan(codes)).ok());
  return std::vector<int>(codes.begin(), codes.end());
}

std::vector<uint8_t> Quantize(const std::vector<float>& values, float scaler,
                              const RandomStream& stream, Layout layout) {
  std::vector<uint8_t> packed(PackedTernaryBytes(values.size(), layout));
  QuantizePack(values, scaler, stream, layout, absl::MakeSpan(packed));
  return packed;
}

const RandomStream kStream{
    .seed = 0x0123456789ABCDEFull, .step = 17, .chunk = 3, .worker = 2};

// ---------------------------------------------------------------------------
// Ternarize() itself

TEST(TernarizeTest, FollowsTheDefinition) {
  // p = min(|g|, s) / s, b = (u < p), u = (word >> 8) * 2^-24.
  const float s = 2.0f;
  const uint32_t half = 0x80000000u;             // u = 0.5 exactly
  EXPECT_EQ(Ternarize(1.0f, s, half), 0);        // p = 0.5: u < p is false
  EXPECT_EQ(Ternarize(1.0f, s, half - 256), 1);  // u just below 0.5
  EXPECT_EQ(Ternarize(-1.0f, s, half - 256), -1);
  EXPECT_EQ(Ternarize(0.0f, s, 0), 0);  // p = 0: never kept
  EXPECT_EQ(Ternarize(-0.0f, s, 0), 0);
  EXPECT_EQ(Ternarize(5.0f, s, 0xFFFFFFFFu), 1);  // clipped: p = 1
  EXPECT_EQ(Ternarize(-5.0f, s, 0xFFFFFFFFu), -1);
}

// Wen et al. 2017, Sec. 3.3 (issue 18): a worker clips at its own bound c
// below the shared scaler s, p = min(|g|, c) / s, so a value above c is
// sent with probability c / s, not 1.
TEST(TernarizeTest, ClipsAtTheWorkersOwnBound) {
  const float s = 2.0f;
  const uint32_t half = 0x80000000u;  // u = 0.5 exactly
  const uint32_t quarter = 0x40000000u;
  // c = 1: |g| = 5 gives p = 0.5, kept only for u < 0.5.
  EXPECT_EQ(Ternarize(5.0f, 1.0f, s, half), 0);
  EXPECT_EQ(Ternarize(5.0f, 1.0f, s, half - 256), 1);
  EXPECT_EQ(Ternarize(-5.0f, 1.0f, s, half - 256), -1);
  // Below the bound nothing changes: |g| = 0.5 gives p = 0.25.
  EXPECT_EQ(Ternarize(0.5f, 1.0f, s, quarter), 0);
  EXPECT_EQ(Ternarize(0.5f, 1.0f, s, quarter - 256), 1);
  // A bound of 0 (an all-zero chunk of this worker) or below sends nothing.
  EXPECT_EQ(Ternarize(5.0f, 0.0f, s, 0), 0);
  EXPECT_EQ(Ternarize(5.0f, -1.0f, s, 0), 0);
  EXPECT_EQ(Ternarize(5.0f, std::nanf(""), s, 0), 0);
  // The three-argument form clips at the scaler.
  EXPECT_EQ(Ternarize(5.0f, s, half), Ternarize(5.0f, s, s, half));
  // ClipBound: min(c, s), with NaN and +Inf meaning "at the scaler".
  EXPECT_EQ(ClipBound(1.0f, s), 1.0f);
  EXPECT_EQ(ClipBound(3.0f, s), s);
  EXPECT_EQ(ClipBound(std::numeric_limits<float>::infinity(), s), s);
  EXPECT_EQ(ClipBound(std::nanf(""), s), s);
  EXPECT_EQ(ClipBound(0.0f, s), 0.0f);
}

TEST(TernarizeTest, DegenerateInputsGiveZero) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(Ternarize(nan, 1.0f, 0), 0);
  EXPECT_EQ(Ternarize(inf, 1.0f, 0), 0);
  EXPECT_EQ(Ternarize(-inf, 1.0f, 0), 0);
  EXPECT_EQ(Ternarize(1.0f, 0.0f, 0), 0);
  EXPECT_EQ(Ternarize(1.0f, -1.0f, 0), 0);
  EXPECT_EQ(Ternarize(1.0f, nan, 0), 0);
  EXPECT_EQ(Ternarize(1.0f, inf, 0), 0);
}

TEST(TernarizeTest, DecodeFormula) {
  EXPECT_EQ(DecodeFactor(3.0f, 1), 3.0f);
  EXPECT_EQ(DecodeValue(-1, DecodeFactor(3.0f, 1)), -3.0f);
  // float(sum) * (s / N), one rounding for the factor.
  EXPECT_EQ(DecodeValue(5, DecodeFactor(1.0f, 3)), 5.0f * (1.0f / 3.0f));
}

// ---------------------------------------------------------------------------
// Statistics

class SizedTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(SizedTest, StatsMatchADirectDoubleComputation) {
  std::vector<float> g = Gaussian(GetParam(), 1);
  for (float& value : g) value = value * 0.01f + 0.003f;
  const ChunkStats stats = ComputeStats(g);
  double sum = 0, sum_abs = 0, squares = 0;
  float max_abs = 0;
  for (const float value : g) {
    sum += value;
    sum_abs += std::fabs(value);
    squares += static_cast<double>(value) * value;
    max_abs = std::max(max_abs, std::fabs(value));
  }
  EXPECT_EQ(stats.count, g.size());
  EXPECT_EQ(stats.nonfinite, 0u);
  EXPECT_EQ(stats.max_abs, max_abs);
  // A float lane adds at most kStatsBlockSize / kStatsLanes = 256 values
  // per block, each add erring by at most 2^-24 of the running total.
  const double lane_error = 256 * std::ldexp(1.0, -24);
  if (!g.empty()) {
    EXPECT_EQ(stats.shift, g[0]);
    const double mean = sum / g.size();
    const double sigma = std::sqrt(squares / g.size() - mean * mean);
    EXPECT_NEAR(stats.mean(), mean, lane_error * sum_abs / g.size() + 1e-12);
    EXPECT_NEAR(stats.stddev(), sigma, 1e-4 * sigma + 1e-12);
  }
}

// The documented summation order, written out plainly.
ChunkStats CanonicalStats(const std::vector<float>& g) {
  ChunkStats stats;
  if (!g.empty() && std::isfinite(g[0])) stats.shift = g[0];
  for (size_t begin = 0; begin < g.size(); begin += kStatsBlockSize) {
    float sum[kStatsLanes] = {}, squares[kStatsLanes] = {};
    float max_abs[kStatsLanes] = {};
    for (size_t i = begin; i < std::min(g.size(), begin + kStatsBlockSize);
         ++i) {
      const size_t lane = (i - begin) % kStatsLanes;
      if (!std::isfinite(g[i])) {
        ++stats.nonfinite;
        continue;
      }
      const float d = g[i] - stats.shift;
      sum[lane] += d;
      const float square = d * d;
      squares[lane] += square;
      max_abs[lane] = std::max(max_abs[lane], std::fabs(g[i]));
    }
    for (size_t lane = 0; lane < kStatsLanes; ++lane) {
      stats.shifted_sum += sum[lane];
      stats.shifted_sum_squares += squares[lane];
      stats.max_abs = std::max(stats.max_abs, max_abs[lane]);
    }
  }
  stats.count = g.size() - stats.nonfinite;
  return stats;
}

TEST_P(SizedTest, StatsFollowTheDocumentedOrderBitForBit) {
  std::vector<float> g = Gaussian(GetParam(), 2);
  if (g.size() > 10) {
    g[3] = std::numeric_limits<float>::quiet_NaN();
    g[9] = -std::numeric_limits<float>::infinity();
  }
  const ChunkStats want = CanonicalStats(g);
  const ChunkStats got = ComputeStats(g);
  EXPECT_EQ(got.count, want.count);
  EXPECT_EQ(got.nonfinite, want.nonfinite);
  EXPECT_EQ(got.shift, want.shift);
  EXPECT_EQ(got.shifted_sum, want.shifted_sum);
  EXPECT_EQ(got.shifted_sum_squares, want.shifted_sum_squares);
  EXPECT_EQ(got.max_abs, want.max_abs);
}

TEST(StatsTest, NonFiniteValuesAreCountedAndLeftOut) {
  std::vector<float> g(100, 0.5f);
  g[0] = std::numeric_limits<float>::quiet_NaN();  // no shift then
  g[7] = std::numeric_limits<float>::quiet_NaN();
  g[50] = std::numeric_limits<float>::infinity();
  g[99] = -std::numeric_limits<float>::infinity();
  g[20] = -2.0f;
  const ChunkStats stats = ComputeStats(g);
  EXPECT_EQ(stats.count, 96u);
  EXPECT_EQ(stats.nonfinite, 4u);
  EXPECT_EQ(stats.shift, 0.0f);
  EXPECT_EQ(stats.max_abs, 2.0f);
  EXPECT_DOUBLE_EQ(stats.mean(), (95 * 0.5 - 2.0) / 96);
  EXPECT_TRUE(std::isfinite(LocalScaler(stats, 2.5f)));
}

TEST(StatsTest, EmptyAndConstantChunks) {
  const ChunkStats empty = ComputeStats({});
  EXPECT_EQ(empty.count, 0u);
  EXPECT_EQ(empty.mean(), 0.0);
  EXPECT_EQ(empty.stddev(), 0.0);
  EXPECT_EQ(LocalScaler(empty, 2.5f), 0.0f);
  // A constant chunk has sigma exactly 0 (thanks to the shift), so with
  // clipping its scaler is 0 and it encodes to zeros.
  const std::vector<float> constant(1000, 0.1f);
  const ChunkStats stats = ComputeStats(constant);
  EXPECT_EQ(stats.stddev(), 0.0);
  EXPECT_DOUBLE_EQ(stats.mean(), 0.1f);
  // A large mean next to a small sigma keeps sigma accurate.
  std::vector<float> offset = Gaussian(100000, 11);
  for (float& value : offset) value = 1000.0f + value;
  EXPECT_NEAR(ComputeStats(offset).stddev(), 1.0, 0.02);
}

TEST(ScalerTest, ClipsAtCSigmaButNeverAboveMax) {
  ChunkStats stats;
  stats.count = 4;
  stats.shift = 1.0f;
  stats.shifted_sum = 0.0;
  stats.shifted_sum_squares = 4.0;  // sigma = 1
  stats.max_abs = 10.0f;
  EXPECT_FLOAT_EQ(LocalScaler(stats, 2.5f), 2.5f);
  EXPECT_EQ(LocalScaler(stats, 0.0f), 10.0f);  // clipping disabled
  stats.max_abs = 2.0f;
  EXPECT_EQ(LocalScaler(stats, 2.5f), 2.0f);  // c * sigma above max|g|
}

// ---------------------------------------------------------------------------
// Quantize and pack

class QuantizeTest
    : public ::testing::TestWithParam<std::tuple<uint64_t, Layout>> {};

TEST_P(QuantizeTest, MatchesTheScalarDefinition) {
  const auto [n, layout] = GetParam();
  std::vector<float> g = Gaussian(n, 3);
  if (n > 40) {
    g[33] = std::numeric_limits<float>::quiet_NaN();
    g[34] = std::numeric_limits<float>::infinity();
    g[35] = -0.0f;
    g[36] = 100.0f;  // clipped
  }
  const float scaler = 1.7f;
  const std::vector<uint8_t> packed = Quantize(g, scaler, kStream, layout);
  EXPECT_EQ(Codes(packed, n, layout), ReferenceCodes(g, scaler, kStream));
}

// ClipRule::kWorker: the worker's own bound below the shared scaler.
TEST_P(QuantizeTest, ClipBoundMatchesTheScalarDefinition) {
  const auto [n, layout] = GetParam();
  std::vector<float> g = Gaussian(n, 13);
  if (n > 40) {
    g[33] = std::numeric_limits<float>::quiet_NaN();
    g[36] = 100.0f;
  }
  const float scaler = 1.7f;
  for (const float bound : {0.6f, 1e-30f, 1.7f}) {
    std::vector<uint8_t> packed(PackedTernaryBytes(n, layout));
    QuantizePack(g, bound, scaler, kStream, layout, absl::MakeSpan(packed));
    EXPECT_EQ(Codes(packed, n, layout),
              ReferenceCodes(g, scaler, kStream, bound))
        << "bound " << bound;
  }
  // A bound above the scaler, +Inf or NaN clips at the scaler; 0 or less
  // sends nothing.
  const std::vector<uint8_t> at_scaler = Quantize(g, scaler, kStream, layout);
  for (const float bound : {5.0f, std::numeric_limits<float>::infinity(),
                            std::nanf(""), 0.0f, -1.0f}) {
    std::vector<uint8_t> packed(PackedTernaryBytes(n, layout));
    QuantizePack(g, bound, scaler, kStream, layout, absl::MakeSpan(packed));
    if (bound > 0.0f || std::isnan(bound)) {
      EXPECT_EQ(packed, at_scaler) << "bound " << bound;
    } else {
      EXPECT_EQ(Codes(packed, n, layout), std::vector<int>(n, 0));
    }
  }
}

TEST_P(QuantizeTest, IsDeterministicAndEachCodeDependsOnlyOnItsIndex) {
  const auto [n, layout] = GetParam();
  const std::vector<float> g = Gaussian(n, 4);
  const std::vector<uint8_t> first = Quantize(g, 1.0f, kStream, layout);
  EXPECT_EQ(Quantize(g, 1.0f, kStream, layout), first);
  // A prefix of the chunk encodes to the prefix of the codes.
  const std::vector<float> prefix(g.begin(), g.begin() + n * 2 / 3);
  const std::vector<int> all = Codes(first, n, layout);
  EXPECT_EQ(
      Codes(Quantize(prefix, 1.0f, kStream, layout), prefix.size(), layout),
      std::vector<int>(all.begin(), all.begin() + prefix.size()));
}

TEST_P(QuantizeTest, UnusableScalerEncodesZeros) {
  const auto [n, layout] = GetParam();
  const std::vector<float> g = Gaussian(n, 5);
  for (const float scaler :
       {0.0f, -1.0f, std::numeric_limits<float>::infinity(),
        std::numeric_limits<float>::quiet_NaN()}) {
    EXPECT_EQ(Codes(Quantize(g, scaler, kStream, layout), n, layout),
              std::vector<int>(n, 0));
  }
}

TEST_P(QuantizeTest, ClippedValuesAlwaysKeepTheirSign) {
  const auto [n, layout] = GetParam();
  std::vector<float> g(n);
  std::vector<int> want(n);
  for (uint64_t i = 0; i < n; ++i) {
    want[i] = static_cast<int>(i % 3) - 1;
    g[i] = static_cast<float>(want[i]) * (i % 2 == 0 ? 0.5f : 7.0f);
  }
  EXPECT_EQ(Codes(Quantize(g, 0.5f, kStream, layout), n, layout), want);
}

INSTANTIATE_TEST_SUITE_P(
    SizesAndLayouts, QuantizeTest,
    ::testing::Combine(::testing::ValuesIn(kSizes),
                       ::testing::Values(Layout::kTernary2Bit,
                                         Layout::kTernaryBase3)));
INSTANTIATE_TEST_SUITE_P(Sizes, SizedTest, ::testing::ValuesIn(kSizes));

// Values that sit exactly on the Bernoulli threshold with scaler 1: g = u
// (p == u: never kept, since the draw is u < p) and the next float up
// (always kept), with both signs.
std::vector<float> ThresholdValues(size_t n, const RandomStream& stream) {
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) {
    const float u = UniformFloat(
        RandomWords(stream, static_cast<uint32_t>(i / 4)).v[i % 4]);
    g[i] = i % 2 == 0 ? u : std::nextafter(u, 2.0f);
    if (i % 4 >= 2) g[i] = -g[i];
  }
  return g;
}

TEST(QuantizeTest, DrawsCompareStrictlyAtTheThreshold) {
  const std::vector<float> g = ThresholdValues(4099, kStream);
  for (const Layout layout : {Layout::kTernary2Bit, Layout::kTernaryBase3}) {
    const std::vector<int> codes =
        Codes(Quantize(g, 1.0f, kStream, layout), g.size(), layout);
    for (size_t i = 0; i < g.size(); ++i) {
      ASSERT_EQ(codes[i], i % 2 == 0 ? 0 : (i % 4 >= 2 ? -1 : 1)) << i;
    }
  }
}

TEST(QuantizeTest, ExactlyThreeLevels) {
  const std::vector<float> g = Gaussian(10000, 6);
  const float s = LocalScaler(ComputeStats(g), 2.5f);
  const std::vector<uint8_t> packed =
      Quantize(g, s, kStream, Layout::kTernary2Bit);
  std::vector<float> decoded(g.size());
  ASSERT_TRUE(DecodeTernary(packed, g.size(), Layout::kTernary2Bit, s,
                            absl::MakeSpan(decoded))
                  .ok());
  EXPECT_EQ(std::set<float>(decoded.begin(), decoded.end()),
            (std::set<float>{-s, 0.0f, s}));
}

TEST(QuantizeTest, EveryStreamFieldChangesTheCodes) {
  const std::vector<float> g = Gaussian(256, 7);
  const std::vector<uint8_t> base =
      Quantize(g, 1.0f, kStream, Layout::kTernary2Bit);
  for (int field = 0; field < 4; ++field) {
    RandomStream other = kStream;
    if (field == 0) other.seed ^= uint64_t{1} << 40;
    if (field == 1) ++other.step;
    if (field == 2) ++other.chunk;
    if (field == 3) ++other.worker;
    EXPECT_NE(Quantize(g, 1.0f, other, Layout::kTernary2Bit), base)
        << "field " << field;
  }
}

// The bytes themselves, pinned: FNV-1a over the stats, the scaler and the
// packed codes of fixed inputs, recorded before the encoder's loops were
// rewritten for speed. The comparisons with the definition above show that
// every variant agrees with Ternarize(); this shows that what reaches the
// wire has not moved at all (a change here changes every run's bytes).
uint64_t Fnv1a(const void* data, size_t size, uint64_t hash) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < size; ++i) {
    hash = (hash ^ bytes[i]) * 0x100000001B3ull;
  }
  return hash;
}

// Gaussian values over many magnitudes with the awkward ones mixed in:
// NaN, +-Inf, +-0, subnormals, the largest float, exact powers of two.
std::vector<float> PinnedInput(size_t n) {
  std::vector<float> g = Gaussian(n, 21);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            0.0f,
                            -0.0f,
                            std::numeric_limits<float>::denorm_min(),
                            -1e-40f,
                            std::numeric_limits<float>::max(),
                            0.5f,
                            -0.25f};
  for (size_t i = 0; i < n; ++i) {
    g[i] *= std::ldexp(1.0f, static_cast<int>(i % 13) - 6);
    if (i % 101 == 7) g[i] = specials[(i / 101) % 10];
  }
  return g;
}

TEST(PinnedBytesTest, EncoderOutputHasNotChanged) {
  struct Case {
    size_t n;
    Layout layout;
    float bound;  // NaN: clip at the scaler
    float scaler;
    uint64_t want;
  };
  const float none = std::nanf("");
  const Case cases[] = {
      {(size_t{1} << 20) + 3, Layout::kTernary2Bit, none, 1.7f,
       1243479740576120583ull},
      {(size_t{1} << 20) + 3, Layout::kTernaryBase3, none, 1.7f,
       17618853042060560097ull},
      {4099, Layout::kTernary2Bit, 0.3f, 0.9f, 6136415667481370809ull},
      {4099, Layout::kTernaryBase3, 0.3f, 0.9f, 5325762438946364801ull},
      {4099, Layout::kTernary2Bit, none, 1e-30f, 17427859489933471606ull},
      {4099, Layout::kTernary2Bit, none, 3e38f, 8666698739408118633ull},
      {130, Layout::kTernaryBase3, none, 0.01f, 5560822885908393908ull},
  };
  for (const Case& c : cases) {
    const std::vector<float> g = PinnedInput(c.n);
    const float bound = std::isnan(c.bound) ? c.scaler : c.bound;
    std::vector<uint8_t> packed(PackedTernaryBytes(c.n, c.layout));
    QuantizePack(g, bound, c.scaler, kStream, c.layout, absl::MakeSpan(packed));
    EXPECT_EQ(Fnv1a(packed.data(), packed.size(), 0xCBF29CE484222325ull),
              c.want)
        << "n " << c.n << " layout " << static_cast<int>(c.layout) << " bound "
        << bound << " scaler " << c.scaler;
  }
  // The statistics and the scaler they give (the full encoder's first
  // pass), for a chunk that is not a whole number of blocks.
  for (const size_t n : {size_t{5000}, (size_t{1} << 20) + 3}) {
    const ChunkStats stats = ComputeStats(PinnedInput(n));
    const float scaler = LocalScaler(stats, 2.5f);
    uint64_t hash = 0xCBF29CE484222325ull;
    hash = Fnv1a(&stats.count, sizeof(stats.count), hash);
    hash = Fnv1a(&stats.shift, sizeof(stats.shift), hash);
    hash = Fnv1a(&stats.shifted_sum, sizeof(stats.shifted_sum), hash);
    hash = Fnv1a(&stats.shifted_sum_squares, sizeof(stats.shifted_sum_squares),
                 hash);
    hash = Fnv1a(&stats.max_abs, sizeof(stats.max_abs), hash);
    hash = Fnv1a(&stats.nonfinite, sizeof(stats.nonfinite), hash);
    hash = Fnv1a(&scaler, sizeof(scaler), hash);
    EXPECT_EQ(hash, n == 5000 ? uint64_t{7051047403321613465ull}
                              : uint64_t{9010529771958712905ull})
        << "n " << n;
  }
}

// E[s * q] = clip(g, -s, s) (Wen et al. 2017, Sec. 3.1), with per-element
// variance s |g_c| - g_c^2. Over M encodes with different steps the mean of
// s * q must lie within 6 standard errors of g_c for every element (a false
// failure has probability below 1e-5 over the whole test), and the
// standardized errors must have mean 0 and mean square 1.
TEST(UnbiasednessTest, MeanOverStepsConvergesToTheClippedGradient) {
  constexpr int kEncodes = 4000;
  const std::vector<float> g = Gaussian(4099, 8);
  const float s = 1.2f;  // clips the tails of the N(0, 1) gradient
  std::vector<double> total(g.size(), 0.0);
  for (int m = 0; m < kEncodes; ++m) {
    RandomStream stream = kStream;
    stream.step = static_cast<uint32_t>(m);
    const std::vector<int> codes =
        Codes(Quantize(g, s, stream, Layout::kTernary2Bit), g.size(),
              Layout::kTernary2Bit);
    for (size_t i = 0; i < g.size(); ++i) total[i] += s * codes[i];
  }
  double z_sum = 0, z_squares = 0;
  int z_count = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double clipped = std::max(-1.0 * s, std::min(1.0 * s, 1.0 * g[i]));
    const double variance = s * std::fabs(clipped) - clipped * clipped;
    const double mean = total[i] / kEncodes;
    const double standard_error = std::sqrt(std::max(variance, 0.0) / kEncodes);
    ASSERT_LE(std::fabs(mean - clipped), 6 * standard_error + 1e-9)
        << "element " << i << " g=" << g[i];
    if (variance > 1e-6) {
      const double z = (mean - clipped) / standard_error;
      z_sum += z;
      z_squares += z * z;
      ++z_count;
    }
  }
  ASSERT_GT(z_count, 3000);
  // Means of ~4000 independent standardized errors: sd 0.016 and 0.022.
  EXPECT_NEAR(z_sum / z_count, 0.0, 0.1);
  EXPECT_NEAR(z_squares / z_count, 1.0, 0.15);
}

// Wen et al. 2017, Sec. 3.3 (issue 18): with its own bound c below the
// shared scaler s, a worker's s * q averages to sign(g) * min(|g|, c): the
// gradient clipped at c, not at s. Today's shared-scaler rule would give
// min(|g|, s) for the tails, which this rejects by many standard errors.
TEST(UnbiasednessTest, WorkerBoundMeanConvergesToTheWorkerClippedGradient) {
  constexpr int kEncodes = 4000;
  const std::vector<float> g = Gaussian(4099, 18);
  const float s = 3.0f;  // the shared scaler, from another worker
  const float c = LocalScaler(ComputeStats(g), 1.0f);  // ~1 sigma
  ASSERT_LT(c, 0.5f * s);
  std::vector<double> total(g.size(), 0.0);
  for (int m = 0; m < kEncodes; ++m) {
    RandomStream stream = kStream;
    stream.step = static_cast<uint32_t>(m);
    std::vector<uint8_t> packed(
        PackedTernaryBytes(g.size(), Layout::kTernary2Bit));
    QuantizePack(g, c, s, stream, Layout::kTernary2Bit, absl::MakeSpan(packed));
    const std::vector<int> codes =
        Codes(packed, g.size(), Layout::kTernary2Bit);
    for (size_t i = 0; i < g.size(); ++i) total[i] += s * codes[i];
  }
  int beyond_c = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double clipped = std::max(-1.0 * c, std::min(1.0 * c, 1.0 * g[i]));
    const double variance = s * std::fabs(clipped) - clipped * clipped;
    const double mean = total[i] / kEncodes;
    const double standard_error = std::sqrt(std::max(variance, 0.0) / kEncodes);
    ASSERT_LE(std::fabs(mean - clipped), 6 * standard_error + 1e-9)
        << "element " << i << " g=" << g[i];
    if (std::fabs(g[i]) > 1.5 * c) ++beyond_c;
  }
  ASSERT_GT(beyond_c, 100);  // the test has tails to clip
}

TEST(UnbiasednessTest, Base3HasTheSameDistributionAsTwoBit) {
  // Same stream, same values: the codes are identical whatever the layout.
  const std::vector<float> g = Gaussian(5000, 9);
  EXPECT_EQ(Codes(Quantize(g, 0.8f, kStream, Layout::kTernary2Bit), g.size(),
                  Layout::kTernary2Bit),
            Codes(Quantize(g, 0.8f, kStream, Layout::kTernaryBase3), g.size(),
                  Layout::kTernaryBase3));
}

// ---------------------------------------------------------------------------
// SIMD variants against the definition, starting mid-chunk

#if TERN_KERNELS_X86

using TwoBitKernel = size_t (*)(const float*, size_t, uint32_t, float, float,
                                const RandomStream&, uint8_t*);

void CheckVariant(bool two_bit, TwoBitKernel kernel,
                  const std::vector<float>& whole, float bound, float scaler) {
  constexpr uint32_t kFirstGroup = 1000;
  const size_t kCount = whole.size() - 4 * kFirstGroup;
  const std::vector<int> want = ReferenceCodes(whole, scaler, kStream, bound);
  std::vector<uint8_t> out(kCount, 0xEE);
  const size_t done = kernel(whole.data() + 4 * kFirstGroup, kCount,
                             kFirstGroup, bound, scaler, kStream, out.data());
  ASSERT_EQ(done, kCount / simd::kSimdBlock * simd::kSimdBlock);
  for (size_t i = 0; i < done; ++i) {
    const int code = want[4 * kFirstGroup + i];
    const uint32_t got = two_bit ? (out[i / 4] >> (2 * (i % 4))) & 3u : out[i];
    ASSERT_EQ(got, two_bit ? TwoBitField(code) : Base3Digit(code))
        << "element " << i;
  }
  // Nothing written past the handled elements.
  const size_t written = two_bit ? done / 4 : done;
  for (size_t i = written; i < out.size(); ++i) ASSERT_EQ(out[i], 0xEE);
}

TEST(SimdTest, StatsVariantsFollowTheLaneOrderBitForBit) {
  std::vector<float> g = Gaussian(kStatsBlockSize, 12);
  g[17] = std::numeric_limits<float>::quiet_NaN();
  g[40] = std::numeric_limits<float>::infinity();
  const float shift = 0.25f;
  simd::StatsLanes want = {};
  for (size_t i = 0; i < g.size(); ++i) {
    const size_t lane = i % kStatsLanes;
    if (!std::isfinite(g[i])) {
      ++want.nonfinite[lane];
      continue;
    }
    const float d = g[i] - shift;
    want.sum[lane] += d;
    const float square = d * d;
    want.sum_squares[lane] += square;
    want.max_abs[lane] = std::max(want.max_abs[lane], std::fabs(g[i]));
  }
  std::vector<void (*)(const float*, size_t, float, simd::StatsLanes*)>
      variants = {simd::AccumulateStatsSse2};
  if (simd::CpuHasAvx2()) variants.push_back(simd::AccumulateStatsAvx2);
  if (simd::CpuHasAvx512()) variants.push_back(simd::AccumulateStatsAvx512);
  for (const auto variant : variants) {
    simd::StatsLanes got = {};
    variant(g.data(), g.size(), shift, &got);
    EXPECT_EQ(std::memcmp(&got, &want, sizeof(got)), 0);
  }
}

// Random values (with NaN, Inf and a huge one) and threshold values, from
// group 1000 on, through one variant.
void CheckVariants(bool two_bit, TwoBitKernel kernel) {
  const size_t n = 4 * 1000 + simd::kSimdBlock * 10 + 37;
  std::vector<float> random = Gaussian(n, 10);
  random[4005] = std::numeric_limits<float>::quiet_NaN();
  random[4006] = -std::numeric_limits<float>::infinity();
  random[4007] = 1e30f;
  CheckVariant(two_bit, kernel, random, 0.9f, 0.9f);
  CheckVariant(two_bit, kernel, ThresholdValues(n, kStream), 1.0f, 1.0f);
  // A worker's own clip bound below the shared scaler (ClipRule::kWorker).
  CheckVariant(two_bit, kernel, random, 0.3f, 0.9f);
  CheckVariant(two_bit, kernel, random, 1e-30f, 0.9f);
}

TEST(SimdTest, Sse2MatchesTheDefinition) {
  CheckVariants(true, simd::TwoBitSse2);
  CheckVariants(false, simd::Base3DigitsSse2);
}

TEST(SimdTest, Avx2MatchesTheDefinition) {
  if (!simd::CpuHasAvx2()) GTEST_SKIP() << "no AVX2 on this CPU";
  CheckVariants(true, simd::TwoBitAvx2);
  CheckVariants(false, simd::Base3DigitsAvx2);
}

TEST(SimdTest, Avx512MatchesTheDefinition) {
  if (!simd::CpuHasAvx512()) GTEST_SKIP() << "no AVX-512F on this CPU";
  CheckVariants(true, simd::TwoBitAvx512);
  CheckVariants(false, simd::Base3DigitsAvx512);
}

#endif  // TERN_KERNELS_X86

}  // namespace
}  // namespace tern::kernels
