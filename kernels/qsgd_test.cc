// The qsgd kernels and codec: levels and their bounds, unbiasedness over
// many streams, the LAYOUT_QSGD_LEVELS bytes, validation of malformed
// payloads, and the shard's re-encoding aggregation.
#include "kernels/qsgd.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/codec.h"
#include "kernels/codec_options.h"
#include "kernels/codec_test_util.h"
#include "kernels/qsgd_codec.h"

namespace tern::kernels {
namespace {

using codec_test::Decode;
using codec_test::DecodedAverage;
using codec_test::Encode;
using codec_test::ExpectInvalid;
using codec_test::ExpectShardEncoding;
using codec_test::Gaussian;

constexpr uint64_t kBig = (uint64_t{1} << 20) + 3;

std::unique_ptr<Codec> MakeCodec(uint32_t levels = 16, uint32_t bucket = 512) {
  CodecOptions options;
  options.id = CodecId::kQsgd;
  options.qsgd_levels = levels;
  options.qsgd_bucket = bucket;
  absl::StatusOr<std::unique_ptr<Codec>> codec = MakeQsgdCodec(options);
  EXPECT_TRUE(codec.ok()) << codec.status();
  return codec.ok() ? *std::move(codec) : nullptr;
}

EncodeContext Context(uint32_t step = 3, uint32_t worker = 1) {
  EncodeContext context;
  context.stream =
      RandomStream{.seed = 23, .step = step, .chunk = 4, .worker = worker};
  return context;
}

void SetHeader(Payload* payload, int field, uint32_t value) {
  std::memcpy(&payload->data[4 * field], &value, 4);
}

uint32_t Header(const Payload& payload, int field) {
  uint32_t value = 0;
  std::memcpy(&value, payload.data.data() + 4 * field, 4);
  return value;
}

// The word whose UniformFloat is u (a multiple of 2^-24).
uint32_t WordFor(double u) {
  return static_cast<uint32_t>(u * 16777216.0) << 8;
}

// ---------------------------------------------------------------------------
// The per-element level

TEST(QsgdLevelTest, RoundsStochasticallyBetweenNeighbors) {
  // |v| / norm * s = 0.5 * 4 = 2 exactly: no randomness.
  EXPECT_EQ(QsgdLevel(0.5f, 1.0f, 4, WordFor(0.0)), 2);
  EXPECT_EQ(QsgdLevel(-0.5f, 1.0f, 4, WordFor(0.999)), -2);
  // x = 0.25 * 2 = 0.5: up when u < 0.5.
  EXPECT_EQ(QsgdLevel(0.25f, 1.0f, 2, WordFor(0.25)), 1);
  EXPECT_EQ(QsgdLevel(0.25f, 1.0f, 2, WordFor(0.5)), 0);
  EXPECT_EQ(QsgdLevel(-0.25f, 1.0f, 2, WordFor(0.4999)), -1);
  // Capped at s when a float norm rounds below |v|; 0 for a zero norm.
  EXPECT_EQ(QsgdLevel(1.0f, 0.99999f, 3, WordFor(0.999)), 3);
  EXPECT_EQ(QsgdLevel(-1.0f, 0.99999f, 3, WordFor(0.0)), -3);
  EXPECT_EQ(QsgdLevel(0.0f, 0.0f, 3, WordFor(0.0)), 0);
  EXPECT_EQ(QsgdLevel(0.0f, 1e-45f, 3, WordFor(0.0)), 0);
  EXPECT_EQ(QsgdLevel(1e-45f, 1e-45f, 3, WordFor(0.0)), 3);
}

TEST(QsgdLevelTest, FieldBits) {
  EXPECT_EQ(QsgdFieldBits(0), 0u);
  EXPECT_EQ(QsgdFieldBits(1), 2u);    // 3 values
  EXPECT_EQ(QsgdFieldBits(2), 3u);    // 5
  EXPECT_EQ(QsgdFieldBits(3), 3u);    // 7
  EXPECT_EQ(QsgdFieldBits(4), 4u);    // 9
  EXPECT_EQ(QsgdFieldBits(16), 6u);   // 33
  EXPECT_EQ(QsgdFieldBits(127), 8u);  // 255
  EXPECT_EQ(QsgdFieldBits(128), 9u);  // 257
  EXPECT_EQ(QsgdFieldBits(kMaxQsgdLevels), 16u);
  EXPECT_EQ(QsgdFieldBits(kMaxQsgdLevels + 1), 0u);
}

// ---------------------------------------------------------------------------
// Round trips

class QsgdRoundTripTest
    : public ::testing::TestWithParam<
          std::tuple<uint64_t, std::tuple<uint32_t, uint32_t>>> {};

TEST_P(QsgdRoundTripTest, LevelsAreNeighborsOfTheValue) {
  const uint64_t n = std::get<0>(GetParam());
  const auto [levels, bucket] = std::get<1>(GetParam());
  std::vector<float> values = Gaussian(n, static_cast<uint32_t>(n + levels));
  // A bucket of zeros where there is room for one.
  if (n >= 3 * bucket) {
    std::fill(values.begin() + bucket, values.begin() + 2 * bucket, 0.0f);
  }
  const std::unique_ptr<Codec> codec = MakeCodec(levels, bucket);
  const Payload payload = Encode(*codec, values, Context());

  const uint64_t buckets = (n + bucket - 1) / bucket;
  const uint32_t bits = QsgdFieldBits(levels);
  EXPECT_EQ(payload.codec, CodecId::kQsgd);
  EXPECT_EQ(payload.layout, Layout::kQsgdLevels);
  EXPECT_EQ(payload.format_version, kFormatVersion);
  EXPECT_EQ(payload.num_elements, n);
  EXPECT_EQ(payload.num_summands, 1u);
  EXPECT_EQ(Header(payload, 0), bucket);
  EXPECT_EQ(Header(payload, 1), levels);
  ASSERT_EQ(payload.scalers.size(), buckets);
  EXPECT_EQ(payload.data.size(), 8 + (n * bits + 7) / 8);

  const std::vector<float> decoded = Decode(*codec, payload);
  for (uint64_t b = 0; b < buckets; ++b) {
    const uint64_t begin = b * bucket;
    const uint64_t end = std::min(n, begin + bucket);
    double squares = 0.0;
    for (uint64_t i = begin; i < end; ++i)
      squares += double{values[i]} * values[i];
    const float norm = payload.scalers[b];
    ASSERT_NEAR(norm, std::sqrt(squares), 2e-7 * std::sqrt(squares))
        << "bucket " << b;
    if (norm == 0.0f) {
      for (uint64_t i = begin; i < end; ++i) ASSERT_EQ(decoded[i], 0.0f);
      continue;
    }
    const double step = double{norm} / levels;
    for (uint64_t i = begin; i < end; ++i) {
      // One of the two levels around v, on v's side of zero.
      // Float rounding: decoded values are within 2^-24 of norm * l / s,
      // and x = |v| / norm * s within about 2^-23 s of its exact value,
      // which can move the level by that much.
      const double level = decoded[i] / step;
      ASSERT_NEAR(level, std::round(level), 1e-6 * (1 + std::fabs(level)))
          << "element " << i;
      ASSERT_LE(std::fabs(decoded[i] - values[i]),
                step * (1 + 2.5e-7 * levels) + 1e-7 * std::fabs(values[i]))
          << "element " << i;
      ASSERT_GE(double{decoded[i]} * values[i], 0.0) << "element " << i;
      ASSERT_LE(std::fabs(decoded[i]), norm * (1 + 1e-6)) << "element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    SizesAndLevels, QsgdRoundTripTest,
    ::testing::Combine(
        ::testing::Values(0, 1, 31, 32, 33, 1000, kBig),
        ::testing::Values(std::make_tuple(16u, 512u), std::make_tuple(1u, 7u),
                          std::make_tuple(127u, 64u),
                          std::make_tuple(kMaxQsgdLevels, 1000u))));

TEST(QsgdTest, WritesTheDocumentedBytes) {
  // Bucket {3, -4}: norm 5, s = 5, so x = 3 and 4 exactly (no randomness);
  // fields l + s = 8 and 1 in 4 bits. Bucket {0}: norm 0, field s = 5.
  const std::unique_ptr<Codec> codec = MakeCodec(5, 2);
  const Payload payload = Encode(*codec, {3.0f, -4.0f, 0.0f}, Context());
  EXPECT_EQ(payload.data,
            std::string("\x02\x00\x00\x00\x05\x00\x00\x00\x18\x05", 10));
  EXPECT_EQ(payload.scalers, (std::vector<float>{5.0f, 0.0f}));
  EXPECT_EQ(Decode(*codec, payload), (std::vector<float>{3.0f, -4.0f, 0.0f}));
}

TEST(QsgdTest, IsUnbiased) {
  // Each decoded element is (norm / s) * (floor(x) + Bernoulli(p)): its
  // variance is (norm / s)^2 p (1 - p) <= (norm / s)^2 / 4, so the mean of K
  // independent encodes has a standard deviation of at most
  // norm / (2 s sqrt(K)). Allow 5 of them (plus float rounding). A biased
  // rounding (to nearest) is off by up to norm / (2 s), ~30 times more.
  constexpr int kStreams = 4000;
  constexpr uint32_t kLevels = 4;
  constexpr uint32_t kBucket = 64;
  const std::vector<float> values = Gaussian(1000, 42);
  const std::unique_ptr<Codec> codec = MakeCodec(kLevels, kBucket);
  std::vector<double> sum(values.size(), 0.0);
  std::vector<float> norms;
  for (int k = 0; k < kStreams; ++k) {
    EncodeContext context;
    context.stream = RandomStream{.seed = 1000u + k % 7,
                                  .step = static_cast<uint32_t>(k / 7),
                                  .chunk = 1,
                                  .worker = static_cast<uint32_t>(k % 3)};
    const Payload payload = Encode(*codec, values, context);
    if (k == 0) norms = payload.scalers;
    ASSERT_EQ(payload.scalers, norms);  // norms never depend on the stream
    const std::vector<float> decoded = Decode(*codec, payload);
    for (size_t i = 0; i < values.size(); ++i) sum[i] += decoded[i];
  }
  double worst = 0.0;
  for (size_t i = 0; i < values.size(); ++i) {
    const double norm = norms[i / kBucket];
    const double sigma = norm / (2.0 * kLevels * std::sqrt(kStreams));
    const double error = sum[i] / kStreams - values[i];
    worst = std::max(worst, std::fabs(error) / sigma);
    ASSERT_LE(std::fabs(error), 5 * sigma + 1e-6 * norm) << "element " << i;
  }
  std::printf("qsgd: largest |mean - v| over 1000 elements: %.2f sigma\n",
              worst);
}

TEST(QsgdTest, IsDeterministicPerStream) {
  const std::unique_ptr<Codec> codec = MakeCodec();
  EXPECT_FALSE(codec->UsesErrorFeedback());
  EXPECT_FALSE(codec->Summable());
  EXPECT_EQ(codec->name(), "qsgd");
  const std::vector<float> values = Gaussian(1000, 3);
  const Payload a = Encode(*codec, values, Context(1));
  const Payload b = Encode(*codec, values, Context(1));
  EXPECT_EQ(a.data, b.data);
  EXPECT_EQ(a.scalers, b.scalers);
  EXPECT_NE(a.data, Encode(*codec, values, Context(2)).data);
  EXPECT_NE(a.data, Encode(*codec, values, Context(1, 2)).data);
  EncodeContext other_seed = Context(1);
  other_seed.stream.seed += 1;
  EXPECT_NE(a.data, Encode(*codec, values, other_seed).data);
}

TEST(QsgdTest, RejectsNonFiniteValuesAndHugeNorms) {
  const std::unique_ptr<Codec> codec = MakeCodec(16, 8);
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()}) {
    std::vector<float> values = Gaussian(100, 1);
    values[37] = bad;
    values[38] = bad;
    values[90] = bad;
    ExpectInvalid(codec->Encode(values, Context()).status(), "element 37");
  }
  // Finite values whose norm is not: the bucket is named.
  std::vector<float> values(20, 1.0f);
  values[17] = values[18] = std::numeric_limits<float>::max();
  ExpectInvalid(codec->Encode(values, Context()).status(), "bucket 2");
  // The largest finite norm still works.
  values[18] = 0.0f;
  const Payload payload = Encode(*codec, values, Context());
  const std::vector<float> decoded = Decode(*codec, payload);
  EXPECT_EQ(decoded[17], std::numeric_limits<float>::max());
}

// ---------------------------------------------------------------------------
// Malformed payloads

class QsgdMalformedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // 33 elements, s = 5 (4-bit fields), buckets of 8: 5 norms, 17 bytes of
    // fields with 4 padding bits.
    codec_ = MakeCodec(5, 8);
    good_ = Encode(*codec_, Gaussian(33, 5), Context());
    ASSERT_EQ(good_.scalers.size(), 5u);
    ASSERT_EQ(good_.data.size(), 8u + 17u);
    ASSERT_TRUE(Check(good_).ok());
  }

  absl::Status Check(const Payload& payload, size_t size = 33) const {
    std::vector<float> out(size);
    return codec_->Decode(payload, absl::MakeSpan(out));
  }

  std::unique_ptr<Codec> codec_;
  Payload good_;
};

TEST_F(QsgdMalformedTest, RejectsWrongLengths) {
  Payload bad = good_;
  bad.data.pop_back();
  ExpectInvalid(Check(bad), "has 16 bytes of fields, want 17");
  bad = good_;
  bad.data.push_back('\0');
  ExpectInvalid(Check(bad), "has 18 bytes of fields, want 17");
  bad = good_;
  bad.data.resize(7);
  ExpectInvalid(Check(bad), "too few for the bucket_size and levels header");
  ExpectInvalid(Check(good_, 34), "payload has 33 elements, want 34");
}

TEST_F(QsgdMalformedTest, RejectsBadHeader) {
  Payload bad = good_;
  SetHeader(&bad, 0, 0);
  ExpectInvalid(Check(bad), "bucket_size is 0");
  bad = good_;
  SetHeader(&bad, 1, 0);
  ExpectInvalid(Check(bad), "0 levels, want 1 to 32767");
  bad = good_;
  SetHeader(&bad, 1, kMaxQsgdLevels + 1);
  ExpectInvalid(Check(bad), "32768 levels");
  bad = good_;
  SetHeader(&bad, 0, 16);  // 3 buckets
  ExpectInvalid(Check(bad), "has 5 norms, want 3");
  bad = good_;
  SetHeader(&bad, 1, 8);  // 17 values: 5-bit fields
  ExpectInvalid(Check(bad), "has 17 bytes of fields, want 21");
  bad = good_;
  SetHeader(&bad, 1, 6);  // 13 values: 4-bit fields, all of ours valid
  EXPECT_TRUE(Check(bad).ok());
}

TEST_F(QsgdMalformedTest, RejectsBadNorms) {
  Payload bad = good_;
  bad.scalers.pop_back();
  ExpectInvalid(Check(bad), "has 4 norms, want 5");
  bad = good_;
  bad.scalers.push_back(1.0f);
  ExpectInvalid(Check(bad), "has 6 norms, want 5");
  bad = good_;
  bad.scalers[2] = std::numeric_limits<float>::quiet_NaN();
  ExpectInvalid(Check(bad), "norm of bucket 2");
  bad = good_;
  bad.scalers[3] = std::numeric_limits<float>::infinity();
  ExpectInvalid(Check(bad), "norm of bucket 3");
  bad = good_;
  bad.scalers[4] = -1.0f;
  ExpectInvalid(Check(bad), "norm of bucket 4");
}

TEST_F(QsgdMalformedTest, RejectsFieldsAboveTwoS) {
  // Element 20 is the low nibble of field byte 10; 11 to 15 exceed 2s = 10.
  for (uint8_t field = 11; field < 16; ++field) {
    Payload bad = good_;
    char& byte = bad.data[8 + 10];
    byte = static_cast<char>((byte & 0xF0) | field);
    ExpectInvalid(Check(bad), "of element 20 is above 2s = 10");
  }
  Payload ok = good_;
  char& byte = ok.data[8 + 10];
  byte = static_cast<char>((byte & 0xF0) | 10);
  EXPECT_TRUE(Check(ok).ok());
}

TEST_F(QsgdMalformedTest, RejectsNonzeroPadding) {
  for (int bit = 4; bit < 8; ++bit) {
    Payload bad = good_;
    bad.data.back() = static_cast<char>(bad.data.back() | (1 << bit));
    ExpectInvalid(Check(bad), "nonzero padding");
  }
}

TEST_F(QsgdMalformedTest, RejectsWrongCodecLayoutVersionSummands) {
  Payload bad = good_;
  bad.codec = CodecId::kOneBit;
  ExpectInvalid(Check(bad), "codec is onebit");
  bad = good_;
  bad.layout = Layout::kSumBits;
  ExpectInvalid(Check(bad), "layout SUM_BITS, want QSGD_LEVELS");
  bad = good_;
  bad.format_version = 2;
  ExpectInvalid(Check(bad), "format version 2");
  bad = good_;
  bad.num_summands = 0;
  ExpectInvalid(Check(bad), "0 summands");
  // A pull is read as it is: num_summands does not divide it again.
  Payload pull = good_;
  pull.num_summands = 4;
  EXPECT_EQ(Decode(*codec_, pull), Decode(*codec_, good_));
}

TEST_F(QsgdMalformedTest, DecodesWithTheHeadersParameters) {
  // Another codec's bucket size and levels: the payload says which.
  const std::unique_ptr<Codec> other = MakeCodec(127, 3);
  EXPECT_EQ(Decode(*other, good_), Decode(*codec_, good_));
}

// ---------------------------------------------------------------------------
// The factory and the aggregation

TEST(QsgdFactoryTest, ValidatesOptions) {
  CodecOptions options;
  options.id = CodecId::kQsgd;
  EXPECT_TRUE(MakeQsgdCodec(options).ok());
  options.push_layout = Layout::kQsgdLevels;
  options.pull_layout = Layout::kQsgdLevels;
  EXPECT_TRUE(MakeQsgdCodec(options).ok());
  options.pull_layout = Layout::kSumBits;
  ExpectInvalid(MakeQsgdCodec(options).status(), "no layout SUM_BITS");
  options.pull_layout = Layout::kUnspecified;
  options.push_layout = Layout::kRaw;
  ExpectInvalid(MakeQsgdCodec(options).status(), "no layout RAW");
  options.push_layout = Layout::kUnspecified;
  for (const uint32_t levels : {0u, kMaxQsgdLevels + 1}) {
    options.qsgd_levels = levels;
    ExpectInvalid(MakeQsgdCodec(options).status(), "qsgd levels");
  }
  options.qsgd_levels = kMaxQsgdLevels;
  EXPECT_TRUE(MakeQsgdCodec(options).ok());
  options.qsgd_bucket = 0;
  ExpectInvalid(MakeQsgdCodec(options).status(), "bucket size is 0");
}

class QsgdAggregationTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(QsgdAggregationTest, PullIsTheReencodedAverage) {
  const uint64_t n = GetParam();
  const std::unique_ptr<Codec> codec = MakeCodec(16, 512);
  std::vector<Payload> pushes;
  for (uint32_t worker = 0; worker < 3; ++worker) {
    pushes.push_back(
        Encode(*codec, Gaussian(n, 100 + worker), Context(3, worker)));
  }
  const std::unique_ptr<Aggregation> aggregation = codec->NewAggregation(n, 3);
  for (const uint32_t worker : {1u, 2u, 0u}) {
    ASSERT_TRUE(aggregation->Add(worker, pushes[worker]).ok());
  }
  absl::StatusOr<Payload> pull = aggregation->Finish();
  ASSERT_TRUE(pull.ok()) << pull.status();
  EXPECT_EQ(pull->num_summands, 3u);
  ExpectShardEncoding(*codec, *pull, DecodedAverage(*codec, pushes));
}

INSTANTIATE_TEST_SUITE_P(Sizes, QsgdAggregationTest,
                         ::testing::Values(0, 1, 31, 32, 33, 1000, kBig));

TEST(QsgdWireTest, BitsPerElement) {
  // n = 2^20, s = 16 (6-bit fields), buckets of 512: the data bytes plus 4
  // bytes per norm (protobuf framing left out).
  const uint64_t n = uint64_t{1} << 20;
  const Payload payload =
      Encode(*MakeCodec(16, 512), Gaussian(n, 1), Context());
  const double bits =
      8.0 * (payload.data.size() + 4 * payload.scalers.size()) / n;
  std::printf(
      "qsgd n=2^20 s=16 bucket=512: %.5f bits per element on the "
      "wire\n",
      bits);
  EXPECT_DOUBLE_EQ(bits, 6.0 + 8.0 * (8 + 4 * 2048) / n);
}

}  // namespace
}  // namespace tern::kernels
