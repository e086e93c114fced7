// The threshold, adaptive and dropping codecs through the Codec interface
// and MakeCodec: exact payloads on hand-made chunks, the definitions at
// every size, sampled selection on large chunks, validation of options,
// inputs and payloads, the re-encoding aggregation, and the bytes they put
// on the wire.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/codec.h"
#include "kernels/codec_options.h"
#include "kernels/codec_registry.h"
#include "kernels/codec_test_util.h"
#include "kernels/payload.h"
#include "kernels/sparse_select.h"

namespace tern::kernels {
namespace {

using codec_test::Decode;
using codec_test::DecodedAverage;
using codec_test::Encode;
using codec_test::ExpectInvalid;
using codec_test::ExpectShardEncoding;
using codec_test::Gaussian;

constexpr uint64_t kSizes[] = {0, 1, 31, 32, 33, 1000, (1u << 20) + 3};
constexpr uint64_t kLarge = (1u << 20) + 3;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

CodecOptions Threshold(float tau) {
  CodecOptions options;
  options.id = CodecId::kThreshold;
  options.tau = tau;
  return options;
}

CodecOptions Adaptive(float proportion, uint32_t sample_size = 4096) {
  CodecOptions options;
  options.id = CodecId::kAdaptive;
  options.proportion = proportion;
  options.sample_size = sample_size;
  return options;
}

CodecOptions Dropping(float drop_ratio,
                      DropSurvivors survivors = DropSurvivors::kValues,
                      DropScope scope = DropScope::kGlobal) {
  CodecOptions options;
  options.id = CodecId::kDropping;
  options.drop_ratio = drop_ratio;
  options.drop_survivors = survivors;
  options.drop_scope = scope;
  options.sample_size = 4096;
  return options;
}

std::unique_ptr<Codec> Make(const CodecOptions& options) {
  absl::StatusOr<std::unique_ptr<Codec>> codec = MakeCodec(options);
  EXPECT_TRUE(codec.ok()) << codec.status();
  return codec.ok() ? *std::move(codec) : nullptr;
}

EncodeContext Context(uint32_t worker = 0, uint64_t group_size = 0) {
  EncodeContext context;
  context.stream =
      RandomStream{.seed = 77, .step = 4, .chunk = 2, .worker = worker};
  context.group_size = group_size;
  return context;
}

// Encoded with worker 0's context.
Payload Encode(const Codec& codec, absl::Span<const float> values) {
  return codec_test::Encode(codec, values, Context());
}

std::string Words(std::initializer_list<uint32_t> words) {
  std::string bytes;
  for (const uint32_t word : words) {
    for (int b = 0; b < 4; ++b)
      bytes.push_back(static_cast<char>(word >> 8 * b));
  }
  return bytes;
}

std::string Pairs(std::initializer_list<std::pair<uint32_t, float>> pairs) {
  std::string bytes;
  for (const auto& [index, value] : pairs) {
    uint32_t bits;
    std::memcpy(&bits, &value, 4);
    bytes += Words({index, bits});
  }
  return bytes;
}

size_t WireBytes(const Payload& payload) {
  return payload.data.size() + 4 * payload.scalers.size();
}

size_t Nonzeros(absl::Span<const float> values) {
  return std::count_if(values.begin(), values.end(),
                       [](float v) { return v != 0.0f; });
}

// ---------------------------------------------------------------------------
// Options

TEST(SparseCodecOptionsTest, FactoriesValidate) {
  for (const float tau : {0.0f, -1.0f, kNaN, kInf}) {
    ExpectInvalid(MakeCodec(Threshold(tau)).status(), "threshold tau");
  }
  for (const float pi : {0.0f, -0.1f, 1.5f, kNaN}) {
    ExpectInvalid(MakeCodec(Adaptive(pi)).status(), "adaptive proportion");
  }
  ExpectInvalid(MakeCodec(Adaptive(0.1f, 0)).status(), "sample_size is 0");
  for (const float ratio : {-0.1f, 1.0f, 2.0f, kNaN}) {
    ExpectInvalid(MakeCodec(Dropping(ratio)).status(), "drop_ratio");
  }
  CodecOptions options = Dropping(0.9f);
  options.sample_size = 0;
  ExpectInvalid(MakeCodec(options).status(), "sample_size is 0");
  options = Dropping(0.9f, DropSurvivors::kValues, static_cast<DropScope>(7));
  ExpectInvalid(MakeCodec(options).status(), "drop_scope 7");
  options = Dropping(0.9f, static_cast<DropSurvivors>(3));
  ExpectInvalid(MakeCodec(options).status(), "drop_survivors 3 is unknown");
  EXPECT_TRUE(MakeCodec(Adaptive(1.0f)).ok());
  EXPECT_TRUE(MakeCodec(Dropping(0.0f)).ok());
}

TEST(SparseCodecOptionsTest, Layouts) {
  struct Case {
    CodecOptions options;
    Layout own;
  };
  const Case cases[] = {
      {Threshold(1.0f), Layout::kIndexSign},
      {Adaptive(0.1f), Layout::kIndexSign},
      {Dropping(0.9f, DropSurvivors::kValues), Layout::kIndexValue},
      {Dropping(0.9f, DropSurvivors::k1Bit), Layout::kIndexSign},
      {Dropping(0.9f, DropSurvivors::k2Bit), Layout::kIndex2Bit}};
  for (const Case& c : cases) {
    CodecOptions options = c.options;
    options.push_layout = c.own;
    options.pull_layout = c.own;
    std::unique_ptr<Codec> codec = Make(options);
    ASSERT_NE(codec, nullptr);
    EXPECT_EQ(Encode(*codec, std::vector<float>{1.0f}).layout, c.own);
    for (const Layout other :
         {Layout::kRaw, Layout::kTernary2Bit, Layout::kSignBits,
          c.own == Layout::kIndexSign ? Layout::kIndexValue
                                      : Layout::kIndexSign}) {
      options = c.options;
      options.push_layout = other;
      ExpectInvalid(MakeCodec(options).status(),
                    std::string("not ") + LayoutName(other));
      options = c.options;
      options.pull_layout = other;
      ExpectInvalid(MakeCodec(options).status(),
                    std::string("not ") + LayoutName(other));
    }
  }
}

TEST(SparseCodecOptionsTest, Properties) {
  for (const CodecOptions& options :
       {Threshold(1.0f), Adaptive(0.1f), Dropping(0.9f)}) {
    std::unique_ptr<Codec> codec = Make(options);
    ASSERT_NE(codec, nullptr);
    EXPECT_EQ(codec->id(), options.id);
    EXPECT_EQ(codec->name(), CodecName(options.id));
    EXPECT_FALSE(codec->Summable());
    EXPECT_TRUE(codec->UsesErrorFeedback());
  }
}

// ---------------------------------------------------------------------------
// threshold

TEST(ThresholdCodecTest, HandMade) {
  std::unique_ptr<Codec> codec = Make(Threshold(1.0f));
  const std::vector<float> values = {2.5f, -0.5f, -3.0f, 1.0f, 0.999f, -1.0f};
  const Payload payload = Encode(*codec, values);
  EXPECT_EQ(payload.codec, CodecId::kThreshold);
  EXPECT_EQ(payload.layout, Layout::kIndexSign);
  EXPECT_EQ(payload.num_elements, 6u);
  EXPECT_EQ(payload.num_summands, 1u);
  // One group of 6; v >= tau and v <= -tau are sent, tau itself included.
  EXPECT_EQ(payload.data,
            Words({6, 0u << 1, (2u << 1) | 1, 3u << 1, (5u << 1) | 1}));
  EXPECT_EQ(payload.scalers, (std::vector<float>{1.0f, -1.0f}));
  EXPECT_EQ(Decode(*codec, payload),
            (std::vector<float>{1.0f, 0.0f, -1.0f, 1.0f, 0.0f, -1.0f}));

  // Nothing above tau: the header and the scalers only.
  const Payload quiet = Encode(*codec, std::vector<float>{0.5f, -0.5f});
  EXPECT_EQ(quiet.data, Words({2}));
  EXPECT_EQ(Decode(*codec, quiet), (std::vector<float>{0.0f, 0.0f}));
}

TEST(ThresholdCodecTest, DefinitionAtEverySize) {
  constexpr float kTau = 1.5f;
  std::unique_ptr<Codec> codec = Make(Threshold(kTau));
  for (const uint64_t n : kSizes) {
    const std::vector<float> values = Gaussian(n, 100 + n);
    // The context (group size, stream) does not matter to threshold.
    const Payload payload = Encode(*codec, values, Context(3, 32));
    const std::vector<float> decoded = Decode(*codec, payload);
    size_t sent = 0;
    for (size_t i = 0; i < n; ++i) {
      const float want = values[i] >= kTau    ? kTau
                         : values[i] <= -kTau ? -kTau
                                              : 0.0f;
      ASSERT_EQ(decoded[i], want) << "n " << n << " i " << i;
      sent += want != 0.0f;
    }
    EXPECT_EQ(payload.data.size(), 4 * (1 + sent)) << n;
    EXPECT_EQ(payload.scalers.size(), n == 0 ? 0u : 2u) << n;
    EXPECT_EQ(payload.data, Encode(*codec, values, Context(9)).data);
  }
}

// ---------------------------------------------------------------------------
// adaptive

TEST(AdaptiveCodecTest, HandMadeColumnMeans) {
  std::unique_ptr<Codec> codec = Make(Adaptive(0.5f));
  const std::vector<float> values = {4, -1, 2, 0, -3, 1, 5, -2, 0.5f};
  // 6 non-negative values: round(3) = 3 sent (4, 5, 2: t+ = 2); 3 negative:
  // round(1.5) = 2 sent (-3, -2: t- = -2).
  Payload payload = Encode(*codec, values, Context(0, 3));
  EXPECT_EQ(payload.data, Words({3, 0u << 1, 2u << 1, (4u << 1) | 1, 6u << 1,
                                 (7u << 1) | 1}));
  // Groups of 3: [4 -1 2] sends 4, 2 (mean 3); [0 -3 1] sends -3; [5 -2
  // 0.5] sends 5 and -2.
  EXPECT_EQ(payload.scalers,
            (std::vector<float>{3.0f, 0.0f, 0.0f, -3.0f, 5.0f, -2.0f}));
  EXPECT_EQ(Decode(*codec, payload),
            (std::vector<float>{3, 0, 3, 0, -3, 0, 5, -2, 0}));

  // group_size 0: one group, means 11/3 and -2.5.
  payload = Encode(*codec, values, Context(0, 0));
  const float third = static_cast<float>(11.0 / 3.0);
  EXPECT_EQ(payload.data.substr(0, 4), Words({9}));
  EXPECT_EQ(payload.scalers, (std::vector<float>{third, -2.5f}));
  EXPECT_EQ(
      Decode(*codec, payload),
      (std::vector<float>{third, 0, third, 0, -2.5f, 0, third, -2.5f, 0}));
}

// The definition: the chunk's sampled thresholds, then per group the means
// of what it sends.
std::vector<float> ReferenceAdaptive(const std::vector<float>& values, float pi,
                                     uint32_t sample,
                                     const EncodeContext& context) {
  const SignedThresholds t =
      SampledSignedThresholds(values, pi, sample, context.stream);
  const size_t n = values.size();
  const size_t group =
      context.group_size == 0 ? std::max<size_t>(n, 1) : context.group_size;
  std::vector<float> out(n, 0.0f);
  for (size_t begin = 0; begin < n; begin += group) {
    const size_t end = std::min(n, begin + group);
    double sums[2] = {0, 0};
    size_t counts[2] = {0, 0};
    for (size_t i = begin; i < end; ++i) {
      const float v = values[i];
      const int side = v > 0 && v >= t.positive   ? 0
                       : v < 0 && v <= t.negative ? 1
                                                  : -1;
      if (side < 0) continue;
      sums[side] += v;
      ++counts[side];
    }
    for (size_t i = begin; i < end; ++i) {
      const float v = values[i];
      if (v > 0 && v >= t.positive) {
        out[i] = static_cast<float>(sums[0] / counts[0]);
      } else if (v < 0 && v <= t.negative) {
        out[i] = static_cast<float>(sums[1] / counts[1]);
      }
    }
  }
  return out;
}

TEST(AdaptiveCodecTest, DefinitionAtEverySize) {
  constexpr float kPi = 0.01f;
  std::unique_ptr<Codec> codec = Make(Adaptive(kPi));
  for (const uint64_t n : kSizes) {
    const std::vector<float> values = Gaussian(n, 200 + n);
    for (const uint64_t group : {uint64_t{0}, uint64_t{32}, uint64_t{1000}}) {
      const EncodeContext context = Context(1, group);
      const Payload payload = Encode(*codec, values, context);
      const std::vector<float> decoded = Decode(*codec, payload);
      ASSERT_EQ(decoded, ReferenceAdaptive(values, kPi, 4096, context))
          << "n " << n << " group " << group;
      const uint64_t groups =
          n == 0 ? 0 : (n - 1) / (group == 0 ? n : std::min(group, n)) + 1;
      EXPECT_EQ(payload.scalers.size(), 2 * groups) << n;
      EXPECT_EQ(payload.data.size(), 4 * (1 + Nonzeros(decoded))) << n;
    }
  }
}

TEST(AdaptiveCodecTest, SmallChunksSendExactProportions) {
  std::unique_ptr<Codec> codec = Make(Adaptive(0.1f));
  // 1000 values, no more than the sample: exactly round(0.1 * count) of
  // each sign class are sent (continuous data has no ties).
  const std::vector<float> values = Gaussian(1000, 5);
  const size_t positive = std::count_if(values.begin(), values.end(),
                                        [](float v) { return v >= 0; });
  const std::vector<float> decoded = Decode(*codec, Encode(*codec, values));
  size_t sent_positive = 0, sent_negative = 0;
  for (const float v : decoded) {
    sent_positive += v > 0;
    sent_negative += v < 0;
  }
  EXPECT_EQ(sent_positive, std::llround(0.1 * positive));
  EXPECT_EQ(sent_negative, std::llround(0.1 * (1000 - positive)));
}

TEST(AdaptiveCodecTest, SampledProportionOnLargeChunks) {
  // pi = 0.05 with 65536 draws: about 32768 per sign class, so the sent
  // fraction of a class is within 5 * sqrt(pi (1 - pi) / 32768) = 0.6
  // points (see sparse_select_test.cc for the derivation); 0.8 points
  // leaves room for the class sizes of the sample.
  std::unique_ptr<Codec> codec = Make(Adaptive(0.05f, 65536));
  const std::vector<float> values = Gaussian(kLarge, 6);
  const std::vector<float> decoded = Decode(*codec, Encode(*codec, values));
  size_t positive = 0, sent_positive = 0, sent_negative = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    positive += values[i] >= 0;
    sent_positive += decoded[i] > 0;
    sent_negative += decoded[i] < 0;
  }
  EXPECT_NEAR(static_cast<double>(sent_positive) / positive, 0.05, 0.008);
  EXPECT_NEAR(static_cast<double>(sent_negative) / (kLarge - positive), 0.05,
              0.008);
}

// ---------------------------------------------------------------------------
// dropping

TEST(DroppingCodecTest, HandMade) {
  const std::vector<float> values = {0.1f, -4, 3, 0, -0.2f, 2, -1, 0.5f, 0, 5};
  // R = 0.5 of 10: 5 dropped (0, 0, 0.1, 0.2, 0.5), t = 1.
  std::unique_ptr<Codec> pairs = Make(Dropping(0.5f, DropSurvivors::kValues));
  Payload payload = Encode(*pairs, values);
  EXPECT_EQ(payload.layout, Layout::kIndexValue);
  EXPECT_EQ(payload.data,
            Pairs({{1, -4.0f}, {2, 3.0f}, {5, 2.0f}, {6, -1.0f}, {9, 5.0f}}));
  EXPECT_TRUE(payload.scalers.empty());
  EXPECT_EQ(Decode(*pairs, payload),
            (std::vector<float>{0, -4, 3, 0, 0, 2, -1, 0, 0, 5}));

  // Quantized: one group, means 10/3 and -2.5.
  std::unique_ptr<Codec> signs = Make(Dropping(0.5f, DropSurvivors::k1Bit));
  payload = Encode(*signs, values, Context(0, 3));  // group_size ignored
  EXPECT_EQ(payload.layout, Layout::kIndexSign);
  EXPECT_EQ(payload.data, Words({10, (1u << 1) | 1, 2u << 1, 5u << 1,
                                 (6u << 1) | 1, 9u << 1}));
  const float mean = static_cast<float>(10.0 / 3.0);
  EXPECT_EQ(payload.scalers, (std::vector<float>{mean, -2.5f}));
  EXPECT_EQ(
      Decode(*signs, payload),
      (std::vector<float>{0, -2.5f, mean, 0, 0, mean, -2.5f, 0, 0, mean}));

  // 2-bit: the kept -4, 3, 2, -1, 5 split at (t + max) / 2 = 3 into the
  // large (-4, 3, 5: mean |v| 4) and the small (2, -1: mean |v| 1.5).
  std::unique_ptr<Codec> two_bit = Make(Dropping(0.5f, DropSurvivors::k2Bit));
  payload = Encode(*two_bit, values);
  EXPECT_EQ(payload.layout, Layout::kIndex2Bit);
  EXPECT_EQ(payload.data, Words({(1u << 2) | 3, (2u << 2) | 2, 5u << 2,
                                 (6u << 2) | 1, (9u << 2) | 2}));
  EXPECT_EQ(payload.scalers, (std::vector<float>{1.5f, 4.0f}));
  EXPECT_EQ(Decode(*two_bit, payload),
            (std::vector<float>{0, -4, 4, 0, 0, 1.5f, -1.5f, 0, 0, 4}));
  // All kept values equally large: one bucket, the small one empty.
  payload = Encode(*two_bit, std::vector<float>{0, -2, 0.5f, 2});
  EXPECT_EQ(payload.data, Words({(1u << 2) | 3, (3u << 2) | 2}));
  EXPECT_EQ(payload.scalers, (std::vector<float>{0.0f, 2.0f}));

  // R = 0: t = 0, every nonzero value is kept but no zero.
  payload = Encode(*Make(Dropping(0.0f)), values);
  EXPECT_EQ(payload.data.size(), 8u * 8);
  // R = 0.8: t = 4.
  EXPECT_EQ(Encode(*Make(Dropping(0.8f)), values).data,
            Pairs({{1, -4.0f}, {9, 5.0f}}));
}

TEST(DroppingCodecTest, GlobalThresholdFromTheContext) {
  const std::vector<float> values = {0.1f, -4, 3, 0, -0.2f, 2, -1, 0.5f, 0, 5};
  EncodeContext context = Context();
  context.threshold = 2.5f;
  // kGlobal uses it: |v| >= 2.5.
  EXPECT_EQ(Encode(*Make(Dropping(0.5f)), values, context).data,
            Pairs({{1, -4.0f}, {2, 3.0f}, {9, 5.0f}}));
  // kPerTensor selects its own (t = 1) whatever the context says.
  EXPECT_EQ(Encode(*Make(Dropping(0.5f, DropSurvivors::kValues,
                                  DropScope::kPerTensor)),
                   values, context)
                .data,
            Encode(*Make(Dropping(0.5f)), values).data);
  // A threshold <= 0 means "select my own".
  context.threshold = -1.0f;
  EXPECT_EQ(Encode(*Make(Dropping(0.5f)), values, context).data,
            Encode(*Make(Dropping(0.5f)), values).data);
  for (const float bad : {kNaN, kInf}) {
    context.threshold = bad;
    ExpectInvalid(Make(Dropping(0.5f))->Encode(values, context).status(),
                  "dropping threshold");
  }
}

TEST(DroppingCodecTest, KeptSetIsTheValuesAboveTheThreshold) {
  for (const DropSurvivors survivors :
       {DropSurvivors::kValues, DropSurvivors::k1Bit, DropSurvivors::k2Bit}) {
    std::unique_ptr<Codec> codec = Make(Dropping(0.9f, survivors));
    for (const uint64_t n : kSizes) {
      const std::vector<float> values = Gaussian(n, 300 + n);
      const EncodeContext context = Context(2);
      const absl::Span<const float> chunks[] = {values};
      const float t =
          SampledMagnitudeThreshold(chunks, 0.9f, 4096, context.stream);
      const Payload payload = Encode(*codec, values, context);
      const std::vector<float> decoded = Decode(*codec, payload);
      // 2-bit: the buckets' boundary and their mean magnitudes.
      float largest = 0.0f;
      for (const float v : values) {
        if (std::fabs(v) >= t) largest = std::max(largest, std::fabs(v));
      }
      const float boundary = t + (largest - t) / 2;
      double sums[2] = {0, 0};
      size_t counts[2] = {0, 0};
      for (const float v : values) {
        if (v != 0 && std::fabs(v) >= t) {
          sums[std::fabs(v) >= boundary] += std::fabs(v);
          ++counts[std::fabs(v) >= boundary];
        }
      }
      size_t kept = 0;
      for (size_t i = 0; i < n; ++i) {
        const bool keep = values[i] != 0 && std::fabs(values[i]) >= t;
        kept += keep;
        ASSERT_EQ(decoded[i] != 0, keep) << "n " << n << " i " << i;
        if (!keep) continue;
        ASSERT_EQ(decoded[i] > 0, values[i] > 0);
        switch (survivors) {
          case DropSurvivors::kValues:
            ASSERT_EQ(decoded[i], values[i]);
            break;
          case DropSurvivors::k1Bit:
            ASSERT_EQ(decoded[i], payload.scalers[values[i] > 0 ? 0 : 1]);
            break;
          case DropSurvivors::k2Bit: {
            const int large = std::fabs(values[i]) >= boundary;
            ASSERT_EQ(std::fabs(decoded[i]), payload.scalers[large]);
            ASSERT_EQ(payload.scalers[large],
                      static_cast<float>(sums[large] / counts[large]));
            break;
          }
        }
      }
      const size_t want_bytes = survivors == DropSurvivors::kValues ? 8 * kept
                                : survivors == DropSurvivors::k1Bit
                                    ? 4 * (1 + kept)
                                    : 4 * kept;
      EXPECT_EQ(payload.data.size(), want_bytes) << n;
      if (survivors == DropSurvivors::k2Bit) {
        EXPECT_EQ(payload.scalers.size(), 2u);
        EXPECT_LE(payload.scalers[0], payload.scalers[1]);
      }
      // No more values than the sample: the exact count, one at least.
      if (n > 0 && n <= 4096) {
        EXPECT_EQ(kept, n - std::min<uint64_t>(std::llround(0.9 * n), n - 1))
            << n;
      }
    }
  }
}

TEST(DroppingCodecTest, SampledKeptFractionOnLargeChunks) {
  // Sample 4096 at R = 0.99: the kept fraction is Beta-distributed around
  // 41/4097 with deviation 0.155 points (derivation in
  // sparse_select_test.cc); five deviations and the rounding: 0.8 points.
  std::unique_ptr<Codec> codec = Make(Dropping(0.99f));
  const std::vector<float> values = Gaussian(kLarge, 7);
  for (uint32_t worker = 0; worker < 4; ++worker) {
    const Payload payload = Encode(*codec, values, Context(worker));
    const double kept = static_cast<double>(payload.data.size() / 8) / kLarge;
    EXPECT_NEAR(kept, 0.01, 0.008) << worker;
  }
}

// ---------------------------------------------------------------------------
// All three: inputs, determinism, payload validation

std::vector<CodecOptions> AllCodecs() {
  return {Threshold(1.0f), Adaptive(0.05f),
          Dropping(0.9f, DropSurvivors::kValues),
          Dropping(0.9f, DropSurvivors::k1Bit),
          Dropping(0.9f, DropSurvivors::k2Bit)};
}

TEST(SparseCodecsTest, RejectBadInputs) {
  for (const CodecOptions& options : AllCodecs()) {
    std::unique_ptr<Codec> codec = Make(options);
    std::vector<float> values = Gaussian(40, 1);
    values[17] = kNaN;
    ExpectInvalid(codec->Encode(values, Context()).status(),
                  "chunk value 17 is nan");
    values[17] = 0.0f;
    values[39] = -kInf;
    ExpectInvalid(codec->Encode(values, Context()).status(),
                  "chunk value 39 is -inf");
    // The length is checked before any value is read.
    const absl::Span<const float> huge(values.data(), uint64_t{1} << 31);
    ExpectInvalid(codec->Encode(huge, Context()).status(),
                  "2147483648 values is too long");
  }
  // INDEX_2BIT's indices have 30 bits.
  std::vector<float> values = Gaussian(40, 1);
  const absl::Span<const float> huge(values.data(), uint64_t{1} << 30);
  ExpectInvalid(Make(Dropping(0.9f, DropSurvivors::k2Bit))
                    ->Encode(huge, Context())
                    .status(),
                "1073741824 values is too long for 2-bit survivors");
}

TEST(SparseCodecsTest, DeterministicAndKeyedByTheStream) {
  const std::vector<float> values = Gaussian(kLarge, 9);
  for (const CodecOptions& options : AllCodecs()) {
    std::unique_ptr<Codec> codec = Make(options);
    const Payload a = Encode(*codec, values, Context(0));
    const Payload b = Encode(*codec, values, Context(0));
    EXPECT_EQ(a.data, b.data) << codec->name();
    EXPECT_EQ(a.scalers, b.scalers) << codec->name();
    const Payload c = Encode(*codec, values, Context(1));
    // Sampled selection draws another sample for another worker; the
    // threshold codec draws nothing.
    EXPECT_EQ(a.data == c.data, options.id == CodecId::kThreshold)
        << codec->name();
  }
}

TEST(SparseCodecsTest, DecodeRejectsMalformedPayloads) {
  // 20 values: two or more survive every codec (R = 0.9 keeps 2).
  std::vector<float> values = Gaussian(20, 13);
  for (float& v : values) v *= 2.0f;
  for (const CodecOptions& options : AllCodecs()) {
    std::unique_ptr<Codec> codec = Make(options);
    const Payload good = Encode(*codec, values);
    ASSERT_GE(good.data.size(), 8u) << codec->name();
    std::vector<float> out(values.size(), 9.0f);
    ASSERT_TRUE(codec->Decode(good, absl::MakeSpan(out)).ok());
    auto expect_rejected = [&](const Payload& payload, const std::string& why) {
      std::vector<float> scratch(values.size(), 9.0f);
      ExpectInvalid(codec->Decode(payload, absl::MakeSpan(scratch)), why);
      EXPECT_EQ(scratch, std::vector<float>(values.size(), 9.0f));
    };
    const bool sign = good.layout == Layout::kIndexSign;
    const bool two_bit = good.layout == Layout::kIndex2Bit;

    Payload bad = good;
    bad.codec = options.id == CodecId::kThreshold ? CodecId::kAdaptive
                                                  : CodecId::kThreshold;
    expect_rejected(bad, "payload codec is");
    bad = good;
    bad.layout = sign ? Layout::kIndexValue : Layout::kIndexSign;
    expect_rejected(bad, std::string("want ") + LayoutName(good.layout));
    bad = good;
    bad.layout = Layout::kRaw;
    expect_rejected(bad, "layout RAW");
    bad = good;
    bad.format_version = 0;
    expect_rejected(bad, "format version 0");
    bad = good;
    bad.num_elements = values.size() + 1;
    expect_rejected(bad, "elements, want 20");
    bad = good;
    bad.num_summands = 0;
    expect_rejected(bad, "0 summands");
    bad = good;
    bad.data.pop_back();
    expect_rejected(bad, sign || two_bit ? "not whole 4-byte words"
                                         : "not whole 8-byte pairs");
    // An index out of range, and one that repeats.
    bad = good;
    const size_t first = sign ? 4 : 0;
    const size_t step = sign || two_bit ? 4 : 8;
    const uint32_t past = sign      ? values.size() << 1
                          : two_bit ? values.size() << 2
                                    : values.size();
    std::memcpy(&bad.data[first], &past, 4);
    expect_rejected(bad, "is out of range: 20 elements");
    bad = good;
    std::memcpy(&bad.data[first + step], &bad.data[first], 4);
    expect_rejected(bad, "does not increase");
    if (sign) {
      bad = good;
      std::memset(&bad.data[0], 0, 4);
      expect_rejected(bad, "group_size 0");
      bad = good;
      bad.scalers.push_back(0.0f);
      expect_rejected(bad, "scalers, want");
      bad = good;
      bad.scalers[0] = -bad.scalers[0];
      expect_rejected(bad, "positive value");
      bad = good;
      bad.scalers[1] = kNaN;
      expect_rejected(bad, "negative value) is nan");
    } else if (two_bit) {
      ASSERT_EQ(good.scalers.size(), 2u);
      ASSERT_LT(good.scalers[0], good.scalers[1]);  // both buckets used
      bad = good;
      bad.scalers.push_back(1.0f);
      expect_rejected(bad, "has 3 scalers, want 2");
      bad = good;
      bad.scalers.clear();
      expect_rejected(bad, "has 0 scalers, want 2");
      for (const float scaler : {kNaN, kInf, -1.0f}) {
        bad = good;
        bad.scalers[0] = scaler;
        expect_rejected(bad, "want finite magnitudes");
      }
      bad = good;
      std::swap(bad.scalers[0], bad.scalers[1]);
      expect_rejected(bad, "0 <= small <= large");
      // Words past the chunk in the index bits (bit 31 set).
      bad = good;
      const uint32_t high = 0xffffffffu;
      std::memcpy(&bad.data[0], &high, 4);
      expect_rejected(bad, "is out of range");
    } else {
      bad = good;
      std::memcpy(&bad.data[4], &kNaN, 4);
      expect_rejected(bad, "is nan");
      bad = good;
      bad.scalers = {1.0f};
      expect_rejected(bad, "has 1 scalers, want 0");
    }

    // A pull holds the average already: num_summands does not divide.
    Payload pull = good;
    pull.num_summands = 3;
    EXPECT_EQ(Decode(*codec, pull), Decode(*codec, good)) << codec->name();
  }
}

// ---------------------------------------------------------------------------
// The shard's re-encoding aggregation

TEST(SparseCodecsTest, AggregationReencodesTheAverageSparsely) {
  for (const CodecOptions& options : AllCodecs()) {
    std::unique_ptr<Codec> codec = Make(options);
    for (const uint64_t n : kSizes) {
      SCOPED_TRACE(testing::Message() << codec->name() << " n " << n);
      std::vector<Payload> pushes;
      for (uint32_t worker = 0; worker < 3; ++worker) {
        // Larger than tau = 1 often enough to send something.
        std::vector<float> values = Gaussian(n, 400 + worker);
        for (float& v : values) v *= 2.0f;
        pushes.push_back(Encode(*codec, values, Context(worker)));
      }
      std::unique_ptr<Aggregation> aggregation = codec->NewAggregation(n, 3);
      // Out of order, with a rejected pull-as-push and a duplicate.
      Payload not_a_push = pushes[2];
      not_a_push.num_summands = 2;
      ExpectInvalid(aggregation->Add(2, not_a_push), "2 summands, want 1");
      ASSERT_TRUE(aggregation->Add(2, pushes[2]).ok());
      EXPECT_EQ(aggregation->Finish().status().code(),
                absl::StatusCode::kFailedPrecondition);
      ASSERT_TRUE(aggregation->Add(0, pushes[0]).ok());
      EXPECT_EQ(aggregation->Add(0, pushes[0]).code(),
                absl::StatusCode::kAlreadyExists);
      ASSERT_TRUE(aggregation->Add(1, pushes[1]).ok());
      absl::StatusOr<Payload> pull = aggregation->Finish();
      ASSERT_TRUE(pull.ok()) << pull.status();
      EXPECT_EQ(pull->codec, options.id);
      EXPECT_EQ(pull->layout, pushes[0].layout);
      EXPECT_EQ(pull->num_summands, 3u);

      // The pull is the codec's encoding of the fp32 average (added in
      // worker order, no residual yet) with the shard's stream.
      const std::vector<float> average = DecodedAverage(*codec, pushes);
      ExpectShardEncoding(*codec, *pull, average);
      const std::vector<float> pulled = Decode(*codec, *pull);
      // Sparse: no more nonzeros than the average has, and for the
      // selecting codecs about their share (R = 0.9, pi = 0.05 of each
      // sign: at most 0.15 of the elements with the sampling spread). An
      // average of 2-bit pushes has few distinct magnitudes (4 per worker),
      // so the threshold's tie class is large and |v| >= t keeps all of it
      // (0.18 of the elements here): only its bytes are bounded.
      EXPECT_LE(Nonzeros(pulled), Nonzeros(average));
      if (n == kLarge && options.id != CodecId::kThreshold) {
        if (options.drop_survivors != DropSurvivors::k2Bit) {
          EXPECT_LT(Nonzeros(pulled), n * 0.15);
        }
        EXPECT_LT(WireBytes(*pull), n * 4 * 0.3);
      }
      EXPECT_EQ(aggregation->Finish().status().code(),
                absl::StatusCode::kFailedPrecondition);
    }
  }
}

TEST(SparseCodecsTest, AggregationKeepsTheShardResidual) {
  std::unique_ptr<Codec> codec = Make(Dropping(0.9f));
  constexpr uint64_t kN = 1000;
  std::vector<float> residual(kN, 0.0f);
  for (uint32_t step = 0; step < 2; ++step) {
    AggregationContext context;
    context.stream = RandomStream{
        .seed = 1, .step = step, .chunk = 0, .worker = kShardStreamWorker};
    context.residual = &residual;
    std::unique_ptr<Aggregation> aggregation =
        codec->NewAggregation(kN, 3, context);
    // Three workers keep 10% each at different places: the average has
    // about 30% nonzeros, of which the pull keeps a third.
    std::vector<float> sum(kN, 0.0f);
    for (uint32_t worker = 0; worker < 3; ++worker) {
      const std::vector<float> values = Gaussian(kN, 500 + 3 * step + worker);
      const Payload push = Encode(*codec, values, Context(worker));
      const std::vector<float> pushed = Decode(*codec, push);
      for (size_t i = 0; i < kN; ++i) sum[i] += pushed[i];
      ASSERT_TRUE(aggregation->Add(worker, push).ok());
    }
    const std::vector<float> before = residual;
    absl::StatusOr<Payload> pull = aggregation->Finish();
    ASSERT_TRUE(pull.ok()) << pull.status();
    const std::vector<float> pulled = Decode(*codec, *pull);
    // average + old residual = pull + new residual, element by element.
    for (size_t i = 0; i < kN; ++i) {
      const float target = sum[i] / 3.0f + before[i];
      ASSERT_EQ(residual[i], target - pulled[i]) << "step " << step;
    }
    EXPECT_GT(Nonzeros(residual), 100u) << "step " << step;
    EXPECT_LE(Nonzeros(pulled), 120u) << "step " << step;
  }
}

// ---------------------------------------------------------------------------
// Bytes on the wire (payload data + 4 bytes per scaler; the protobuf
// framing adds a few bytes per chunk).

TEST(SparseCodecsTest, BytesPerElement) {
  constexpr uint64_t kN = uint64_t{1} << 20;
  const std::vector<float> values = Gaussian(kN, 12);
  struct Case {
    const char* what;
    CodecOptions options;
    double low, high;  // bytes per element
  };
  // Expected: 8 * 1% = 0.08 and 4 * 1% = 0.04 for dropping, 4 * 0.1% =
  // 0.004 for adaptive, 4 * P(|N(0,1)| >= 2) = 4 * 0.0455 = 0.182 for
  // threshold; the ranges cover the sampling spread.
  const Case cases[] = {
      {"dropping R=0.99 INDEX_VALUE", Dropping(0.99f, DropSurvivors::kValues),
       0.064, 0.096},
      {"dropping R=0.99 INDEX_SIGN", Dropping(0.99f, DropSurvivors::k1Bit),
       0.032, 0.048},
      {"dropping R=0.99 INDEX_2BIT", Dropping(0.99f, DropSurvivors::k2Bit),
       0.032, 0.048},
      {"adaptive pi=0.001", Adaptive(0.001f), 0.001, 0.012},
      {"adaptive pi=0.001 sample 65536", Adaptive(0.001f, 65536), 0.003, 0.005},
      {"threshold tau=2 on N(0,1)", Threshold(2.0f), 0.175, 0.190},
  };
  for (const Case& c : cases) {
    std::unique_ptr<Codec> codec = Make(c.options);
    const Payload payload = Encode(*codec, values);
    const double per_element = static_cast<double>(WireBytes(payload)) / kN;
    std::printf(
        "%-30s %8zu bytes for 2^20 values: %.5f bytes/element (%.0fx "
        "below fp32)\n",
        c.what, WireBytes(payload), per_element, 4.0 / per_element);
    EXPECT_GE(per_element, c.low) << c.what;
    EXPECT_LE(per_element, c.high) << c.what;
  }
}

}  // namespace
}  // namespace tern::kernels
