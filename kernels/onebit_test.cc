// The onebit kernels and codec: exact and sampled group means, the
// LAYOUT_SIGN_BITS bytes, validation of malformed payloads, and the
// shard's re-encoding aggregation.
#include "kernels/onebit.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/codec.h"
#include "kernels/codec_options.h"
#include "kernels/codec_test_util.h"
#include "kernels/onebit_codec.h"

namespace tern::kernels {
namespace {

using codec_test::Decode;
using codec_test::DecodedAverage;
using codec_test::Encode;
using codec_test::ExpectInvalid;
using codec_test::ExpectShardEncoding;
using codec_test::Gaussian;

constexpr uint64_t kBig = (uint64_t{1} << 20) + 3;

// Multiples of 2^-10 in [-1, 1], some exactly zero: every sum of up to
// 2^33 of them is exact in double, so means do not depend on the order of
// the additions and a plain sequential reference must match bit for bit.
std::vector<float> Dyadic(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> k(-1024, 1024);
  std::vector<float> values(n);
  for (float& value : values) value = static_cast<float>(k(rng)) / 1024.0f;
  return values;
}

std::unique_ptr<Codec> MakeCodec(bool sampled = false,
                                 uint32_t sample_size = 4096) {
  CodecOptions options;
  options.id = CodecId::kOneBit;
  options.sampled_means = sampled;
  options.sample_size = sample_size;
  absl::StatusOr<std::unique_ptr<Codec>> codec = MakeOneBitCodec(options);
  EXPECT_TRUE(codec.ok()) << codec.status();
  return codec.ok() ? *std::move(codec) : nullptr;
}

EncodeContext Context(uint64_t group_size, uint32_t step = 3) {
  EncodeContext context;
  context.stream =
      RandomStream{.seed = 17, .step = step, .chunk = 2, .worker = 1};
  context.group_size = group_size;
  return context;
}

uint32_t HeaderGroupSize(const Payload& payload) {
  uint32_t group_size = 0;
  if (payload.data.size() >= 4)
    std::memcpy(&group_size, payload.data.data(), 4);
  return group_size;
}

void SetHeaderGroupSize(Payload* payload, uint32_t group_size) {
  std::memcpy(&payload->data[0], &group_size, 4);
}

// The exact means of one group, summed sequentially in double.
std::pair<float, float> ReferenceMeans(const float* group, size_t length) {
  double positive = 0.0, negative = 0.0;
  size_t positives = 0;
  for (size_t k = 0; k < length; ++k) {
    if (group[k] >= 0.0f) {
      positive += group[k];
      ++positives;
    } else {
      negative += group[k];
    }
  }
  const size_t negatives = length - positives;
  return {positives == 0 ? 0.0f : static_cast<float>(positive / positives),
          negatives == 0 ? 0.0f : static_cast<float>(negative / negatives)};
}

// ---------------------------------------------------------------------------
// Round trips with exact means

class OneBitRoundTripTest
    : public ::testing::TestWithParam<std::tuple<uint64_t, uint64_t>> {};

TEST_P(OneBitRoundTripTest, DecodesToTheExactGroupMeans) {
  const auto [n, requested] = GetParam();
  std::vector<float> values = Dyadic(n, static_cast<uint32_t>(n + requested));
  if (n > 2) values[1] = -0.0f;  // non-negative: bit 1
  const std::unique_ptr<Codec> codec = MakeCodec();
  const Payload payload = Encode(*codec, values, Context(requested));

  const uint64_t group =
      requested == 0 || requested > n ? std::max<uint64_t>(n, 1) : requested;
  const uint64_t groups = (n + group - 1) / group;
  EXPECT_EQ(payload.codec, CodecId::kOneBit);
  EXPECT_EQ(payload.layout, Layout::kSignBits);
  EXPECT_EQ(payload.format_version, kFormatVersion);
  EXPECT_EQ(payload.num_elements, n);
  EXPECT_EQ(payload.num_summands, 1u);
  EXPECT_EQ(HeaderGroupSize(payload), group);
  ASSERT_EQ(payload.scalers.size(), 2 * groups);
  EXPECT_EQ(payload.data.size(), 4 + (n + 7) / 8);

  const std::vector<float> decoded = Decode(*codec, payload);
  for (uint64_t g = 0; g < groups; ++g) {
    const uint64_t begin = g * group;
    const uint64_t length = std::min(group, n - begin);
    const auto [positive, negative] =
        ReferenceMeans(values.data() + begin, length);
    ASSERT_EQ(payload.scalers[2 * g], positive) << "group " << g;
    ASSERT_EQ(payload.scalers[2 * g + 1], negative) << "group " << g;
    for (uint64_t i = begin; i < begin + length; ++i) {
      ASSERT_EQ(decoded[i], values[i] >= 0.0f ? positive : negative)
          << "element " << i;
    }
  }
}

TEST_P(OneBitRoundTripTest, GaussianMeansAgreeWithASequentialSum) {
  // Fixed-point summands lose bits below 2^-40 or so of the group's largest
  // magnitude; the float means can differ from a sequential double sum by
  // at most one rounding.
  const auto [n, requested] = GetParam();
  const std::vector<float> values = Gaussian(n, 7, 0.3f);
  const std::unique_ptr<Codec> codec = MakeCodec();
  const Payload payload = Encode(*codec, values, Context(requested));
  const uint64_t group = HeaderGroupSize(payload);
  ASSERT_GE(group, 1u);
  for (uint64_t g = 0; 2 * g < payload.scalers.size(); ++g) {
    const uint64_t begin = g * group;
    const auto [positive, negative] =
        ReferenceMeans(values.data() + begin, std::min(group, n - begin));
    ASSERT_NEAR(payload.scalers[2 * g], positive, 2e-7 * std::fabs(positive));
    ASSERT_NEAR(payload.scalers[2 * g + 1], negative,
                2e-7 * std::fabs(negative));
  }
}

INSTANTIATE_TEST_SUITE_P(SizesAndGroups, OneBitRoundTripTest,
                         ::testing::Combine(::testing::Values(0, 1, 31, 32, 33,
                                                              1000, kBig),
                                            ::testing::Values(0, 1, 7, 64)));

// The GPU adds a group's values in the order its threads finish: the means
// must be the same bits for every order of the same values.
TEST(OneBitTest, MeansDoNotDependOnTheOrderOfTheValues) {
  for (const float scale : {1e-30f, 1.0f, 1e30f}) {
    std::vector<float> values = Gaussian(5000, 11, 0.2f);
    for (float& value : values) value *= scale;
    values[17] = 3.4e38f * (scale >= 1.0f);  // the largest finite magnitudes
    values[18] = -3.4e38f * (scale >= 1.0f);
    values[19] = 1e-45f;  // a subnormal
    std::vector<float> means(2);
    GroupMeans(values, values.size(), 0, RandomStream{}, absl::MakeSpan(means));
    EXPECT_TRUE(std::isfinite(means[0]) && std::isfinite(means[1]));
    EXPECT_GE(means[0], 0.0f);
    EXPECT_LE(means[1], 0.0f);
    std::mt19937 rng(5);
    for (int round = 0; round < 5; ++round) {
      std::shuffle(values.begin(), values.end(), rng);
      std::vector<float> shuffled(2);
      GroupMeans(values, values.size(), 0, RandomStream{},
                 absl::MakeSpan(shuffled));
      ASSERT_EQ(shuffled, means) << "scale " << scale << ", round " << round;
    }
  }
}

TEST(OneBitTest, WritesTheDocumentedBytes) {
  // Groups of 2: {1, 2} has no negative value, {3, -4} both signs; the
  // fifth element is a group of its own with no non-negative value.
  const std::unique_ptr<Codec> codec = MakeCodec();
  const Payload payload = Encode(*codec, {1, 2, 3, -4, -0.5f}, Context(2));
  EXPECT_EQ(payload.data, std::string("\x02\x00\x00\x00\x07", 5));
  EXPECT_EQ(payload.scalers,
            (std::vector<float>{1.5f, 0.0f, 3.0f, -4.0f, 0.0f, -0.5f}));
  EXPECT_EQ(Decode(*codec, payload),
            (std::vector<float>{1.5f, 1.5f, 3.0f, -4.0f, -0.5f}));
}

TEST(OneBitTest, IsDeterministicAndUsesErrorFeedback) {
  const std::unique_ptr<Codec> codec = MakeCodec();
  EXPECT_TRUE(codec->UsesErrorFeedback());
  EXPECT_FALSE(codec->Summable());
  EXPECT_EQ(codec->name(), "onebit");
  const std::vector<float> values = Gaussian(1000, 3);
  const Payload a = Encode(*codec, values, Context(64, 1));
  const Payload b = Encode(*codec, values, Context(64, 1));
  EXPECT_EQ(a.data, b.data);
  EXPECT_EQ(a.scalers, b.scalers);
  // Exact means use no randomness: another step gives the same bytes.
  const Payload c = Encode(*codec, values, Context(64, 2));
  EXPECT_EQ(a.data, c.data);
  EXPECT_EQ(a.scalers, c.scalers);
}

TEST(OneBitTest, RejectsNonFiniteValuesNamingTheElement) {
  const std::unique_ptr<Codec> codec = MakeCodec();
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()}) {
    std::vector<float> values = Gaussian(100, 1);
    values[37] = bad;
    values[80] = bad;
    ExpectInvalid(codec->Encode(values, Context(0)).status(), "element 37");
  }
}

// ---------------------------------------------------------------------------
// Sampled means

// The sampled means as onebit.h documents them, summed sequentially (the
// test data are dyadic, so the order does not matter).
std::vector<float> ReferenceSampledMeans(const std::vector<float>& values,
                                         uint64_t group, uint32_t sample,
                                         const RandomStream& stream) {
  const uint64_t n = values.size();
  std::vector<float> means;
  for (uint64_t g = 0; g * group < n; ++g) {
    const uint64_t begin = g * group;
    const uint64_t length = std::min(group, n - begin);
    if (length <= sample) {
      const auto [p, q] = ReferenceMeans(values.data() + begin, length);
      means.push_back(p);
      means.push_back(q);
      continue;
    }
    std::vector<float> drawn;
    for (uint32_t j = 0; j < sample; ++j) {
      const uint64_t draw = g * sample + j;
      const uint32_t word =
          RandomWords(stream, static_cast<uint32_t>(draw / 4)).v[draw % 4];
      drawn.push_back(values[begin + ((uint64_t{word} * length) >> 32)]);
    }
    const auto [p, q] = ReferenceMeans(drawn.data(), drawn.size());
    means.push_back(p);
    means.push_back(q);
  }
  return means;
}

TEST(OneBitSampledTest, FollowsTheDocumentedDraws) {
  for (const uint64_t n : {0ul, 1ul, 33ul, 1000ul, 10000ul}) {
    for (const uint64_t group : {0ul, 7ul, 300ul}) {
      for (const uint32_t sample : {1u, 5u, 64u}) {
        const std::vector<float> values = Dyadic(n, 11);
        const EncodeContext context = Context(group);
        const Payload payload =
            Encode(*MakeCodec(true, sample), values, context);
        EXPECT_EQ(payload.scalers,
                  ReferenceSampledMeans(values, HeaderGroupSize(payload),
                                        sample, context.stream))
            << "n " << n << " group " << group << " sample " << sample;
      }
    }
  }
}

TEST(OneBitSampledTest, SmallGroupsAreExact) {
  // Groups no longer than the sample are used whole.
  const std::vector<float> values = Gaussian(5000, 2);
  for (const uint64_t group : {0ul, 64ul, 4096ul}) {
    const Payload exact = Encode(*MakeCodec(), values, Context(group));
    const Payload sampled = Encode(*MakeCodec(true, group == 0 ? 5000 : 4096),
                                   values, Context(group));
    EXPECT_EQ(exact.scalers, sampled.scalers) << group;
    EXPECT_EQ(exact.data, sampled.data) << group;
  }
}

TEST(OneBitSampledTest, EstimatesTheMeansWithinTheirStandardError) {
  // N(0, 1) data: the mean of the positive half is sqrt(2/pi) with the
  // half-normal's sd sqrt(1 - 2/pi) ~ 0.603 per draw; about half of the
  // 4096 draws land on each side, so the standard error is about
  // 0.603 / sqrt(2048) ~ 0.0133. Allow 5 of them.
  const std::vector<float> values = Gaussian(kBig, 9);
  const Payload exact = Encode(*MakeCodec(), values, Context(0));
  const Payload sampled = Encode(*MakeCodec(true, 4096), values, Context(0));
  ASSERT_EQ(sampled.scalers.size(), 2u);
  EXPECT_NEAR(exact.scalers[0], std::sqrt(2.0 / M_PI), 0.005);
  EXPECT_NEAR(sampled.scalers[0], exact.scalers[0], 5 * 0.0133);
  EXPECT_NEAR(sampled.scalers[1], exact.scalers[1], 5 * 0.0133);
  EXPECT_NE(sampled.scalers[0], exact.scalers[0]);
  // The sign bits never depend on the sampling.
  EXPECT_EQ(sampled.data, exact.data);
}

TEST(OneBitSampledTest, GroupsAndStepsDrawDifferently) {
  // Four identical groups: if groups reused each other's draws, their
  // sampled means would be equal.
  const std::vector<float> block = Dyadic(5000, 4);
  std::vector<float> values;
  for (int copy = 0; copy < 4; ++copy) {
    values.insert(values.end(), block.begin(), block.end());
  }
  const std::unique_ptr<Codec> codec = MakeCodec(true, 100);
  const Payload payload = Encode(*codec, values, Context(5000, 1));
  ASSERT_EQ(payload.scalers.size(), 8u);
  std::set<float> positives;
  for (int g = 0; g < 4; ++g) positives.insert(payload.scalers[2 * g]);
  EXPECT_EQ(positives.size(), 4u);

  const Payload again = Encode(*codec, values, Context(5000, 1));
  EXPECT_EQ(payload.scalers, again.scalers);
  const Payload next_step = Encode(*codec, values, Context(5000, 2));
  EXPECT_NE(payload.scalers, next_step.scalers);
  EXPECT_EQ(payload.data, next_step.data);
}

// ---------------------------------------------------------------------------
// Malformed payloads

class OneBitMalformedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    codec_ = MakeCodec();
    // 33 elements in groups of 7: 5 groups, 10 scalers, 5 bytes of bits
    // with 7 padding bits.
    good_ = Encode(*codec_, Gaussian(33, 5), Context(7));
    ASSERT_EQ(good_.scalers.size(), 10u);
    ASSERT_EQ(good_.data.size(), 4u + 5u);
    ASSERT_TRUE(Check(good_).ok());
  }

  absl::Status Check(const Payload& payload, size_t size = 33) const {
    std::vector<float> out(size);
    return codec_->Decode(payload, absl::MakeSpan(out));
  }

  std::unique_ptr<Codec> codec_;
  Payload good_;
};

TEST_F(OneBitMalformedTest, RejectsWrongLengths) {
  Payload bad = good_;
  bad.data.pop_back();
  ExpectInvalid(Check(bad), "has 4 bytes of sign bits, want 5");
  bad = good_;
  bad.data.push_back('\0');
  ExpectInvalid(Check(bad), "has 6 bytes of sign bits, want 5");
  bad = good_;
  bad.data.resize(3);
  ExpectInvalid(Check(bad), "too few for the group_size header");
  ExpectInvalid(Check(good_, 32), "payload has 33 elements, want 32");
}

TEST_F(OneBitMalformedTest, RejectsBadHeaderAndScalers) {
  Payload bad = good_;
  SetHeaderGroupSize(&bad, 0);
  ExpectInvalid(Check(bad), "group_size 0");
  bad = good_;
  SetHeaderGroupSize(&bad, 8);  // 5 groups either way: still valid
  EXPECT_TRUE(Check(bad).ok());
  SetHeaderGroupSize(&bad, 6);  // 6 groups: 12 scalers
  ExpectInvalid(Check(bad), "has 10 scalers, want 12");
  bad = good_;
  bad.scalers.pop_back();
  ExpectInvalid(Check(bad), "has 9 scalers, want 10");
  bad = good_;
  bad.scalers.push_back(0.0f);
  ExpectInvalid(Check(bad), "has 11 scalers, want 10");
  bad = good_;
  bad.scalers[4] = std::numeric_limits<float>::quiet_NaN();
  ExpectInvalid(Check(bad), "scaler 4");
  bad = good_;
  bad.scalers[5] = std::numeric_limits<float>::infinity();
  ExpectInvalid(Check(bad), "scaler 5");
  bad = good_;
  bad.scalers[2] = -0.25f;  // a non-negative value below 0
  ExpectInvalid(Check(bad), "scaler 2 (the non-negative value of group 1)");
  bad = good_;
  bad.scalers[3] = 0.25f;  // a negative value above 0
  ExpectInvalid(Check(bad), "scaler 3 (the negative value of group 1)");
}

TEST_F(OneBitMalformedTest, RejectsNonzeroPadding) {
  for (int bit = 1; bit < 8; ++bit) {
    Payload bad = good_;
    bad.data.back() = static_cast<char>(bad.data.back() | (1 << bit));
    ExpectInvalid(Check(bad), "nonzero padding");
  }
}

TEST_F(OneBitMalformedTest, RejectsWrongCodecLayoutVersionSummands) {
  Payload bad = good_;
  bad.codec = CodecId::kQsgd;
  ExpectInvalid(Check(bad), "codec is qsgd");
  bad = good_;
  bad.layout = Layout::kIndexSign;
  ExpectInvalid(Check(bad), "layout INDEX_SIGN, want SIGN_BITS");
  bad = good_;
  bad.format_version = 2;
  ExpectInvalid(Check(bad), "format version 2");
  bad = good_;
  bad.num_summands = 0;
  ExpectInvalid(Check(bad), "0 summands");
  // A pull is read as it is: num_summands does not divide it again.
  Payload pull = good_;
  pull.num_summands = 5;
  EXPECT_EQ(Decode(*codec_, pull), Decode(*codec_, good_));
}

TEST_F(OneBitMalformedTest, EmptyChunks) {
  const Payload empty = Encode(*codec_, {}, Context(0));
  EXPECT_EQ(empty.data, std::string("\x01\x00\x00\x00", 4));
  EXPECT_TRUE(empty.scalers.empty());
  EXPECT_TRUE(Check(empty, 0).ok());
  Payload bad = empty;
  bad.scalers = {0.0f, 0.0f};
  ExpectInvalid(Check(bad, 0), "has 2 scalers, want 0");
}

// ---------------------------------------------------------------------------
// The factory and the aggregation

TEST(OneBitFactoryTest, ValidatesOptions) {
  CodecOptions options;
  options.id = CodecId::kOneBit;
  EXPECT_TRUE(MakeOneBitCodec(options).ok());
  options.push_layout = Layout::kSignBits;
  options.pull_layout = Layout::kSignBits;
  EXPECT_TRUE(MakeOneBitCodec(options).ok());
  options.pull_layout = Layout::kRaw;
  ExpectInvalid(MakeOneBitCodec(options).status(), "no layout RAW");
  options.pull_layout = Layout::kUnspecified;
  options.push_layout = Layout::kIndexSign;
  ExpectInvalid(MakeOneBitCodec(options).status(), "no layout INDEX_SIGN");
  options.push_layout = Layout::kUnspecified;
  options.sampled_means = true;
  options.sample_size = 0;
  ExpectInvalid(MakeOneBitCodec(options).status(), "sample_size");
  options.sampled_means = false;  // the sample size is then unused
  EXPECT_TRUE(MakeOneBitCodec(options).ok());
}

class OneBitAggregationTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(OneBitAggregationTest, PullIsTheReencodedAverage) {
  const uint64_t n = GetParam();
  const std::unique_ptr<Codec> codec = MakeCodec();
  std::vector<Payload> pushes;
  for (uint32_t worker = 0; worker < 3; ++worker) {
    EncodeContext context = Context(7);
    context.stream.worker = worker;
    pushes.push_back(Encode(*codec, Gaussian(n, 100 + worker), context));
  }
  const std::unique_ptr<Aggregation> aggregation = codec->NewAggregation(n, 3);
  for (const uint32_t worker : {2u, 0u, 1u}) {
    ASSERT_TRUE(aggregation->Add(worker, pushes[worker]).ok());
  }
  absl::StatusOr<Payload> pull = aggregation->Finish();
  ASSERT_TRUE(pull.ok()) << pull.status();
  EXPECT_EQ(pull->num_summands, 3u);
  ExpectShardEncoding(*codec, *pull, DecodedAverage(*codec, pushes));
}

INSTANTIATE_TEST_SUITE_P(Sizes, OneBitAggregationTest,
                         ::testing::Values(0, 1, 31, 32, 33, 1000, kBig));

TEST(OneBitWireTest, BitsPerElement) {
  // n = 2^20 in groups of 1024: the data bytes plus 4 bytes per scaler
  // (protobuf framing left out).
  const uint64_t n = uint64_t{1} << 20;
  const Payload payload = Encode(*MakeCodec(), Gaussian(n, 1), Context(1024));
  const double bits =
      8.0 * (payload.data.size() + 4 * payload.scalers.size()) / n;
  std::printf("onebit n=2^20 group=1024: %.5f bits per element on the wire\n",
              bits);
  EXPECT_DOUBLE_EQ(bits, 1.0 + 8.0 * (4 + 4 * 2 * 1024) / n);
}

}  // namespace
}  // namespace tern::kernels
