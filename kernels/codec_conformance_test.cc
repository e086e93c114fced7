// What every codec of the registry must do, whatever it is (DESIGN sections
// 5 to 7): round trips of every size, unbiasedness where the codec claims
// it, bit-reproducible encodes, decoders that refuse every malformed
// payload with INVALID_ARGUMENT and never crash, and aggregations whose pull
// does not depend on arrival order, with the shard's residual conserving
// what error-feedback codecs drop.
//
// Codecs that MakeCodec reports UNIMPLEMENTED are skipped by name; once
// they are registered, they are covered without a change here. The corrupt
// payload loops are meant to run under ASan as well:
//   bazel test --config=asan //kernels:codec_conformance_test
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "common/philox.h"
#include "gtest/gtest.h"
#include "kernels/codec.h"
#include "kernels/codec_options.h"
#include "kernels/codec_registry.h"
#include "kernels/payload.h"

namespace tern::kernels {
namespace {

constexpr double kUnitRoundoff = 1.0 / (1 << 24);  // float, round to nearest
constexpr uint64_t kRowLength = 16;                // the "row" group size

// ---------------------------------------------------------------------------
// The codecs: every id but kUnspecified and kInt8 (a weight codec) with
// default options, TernGrad's other layouts, and a few options that change
// what the sparse and 1-bit codecs write.

struct Variant {
  std::string name;
  CodecOptions options;
};

void PrintTo(const Variant& variant, std::ostream* out) {
  *out << variant.name;
}

Variant Default(CodecId id) {
  Variant variant{CodecName(id), CodecOptions()};
  variant.options.id = id;
  return variant;
}

std::vector<Variant> Variants() {
  std::vector<Variant> variants;
  for (const CodecId id :
       {CodecId::kFp32, CodecId::kFp16, CodecId::kTernGrad, CodecId::kOneBit,
        CodecId::kThreshold, CodecId::kAdaptive, CodecId::kDropping,
        CodecId::kQsgd}) {
    variants.push_back(Default(id));
  }
  const std::pair<Layout, Layout> terngrad_layouts[] = {
      {Layout::kTernaryBase3, Layout::kSumRadix},
      {Layout::kTernary2Bit, Layout::kSumRadix},
      {Layout::kTernaryBase3, Layout::kSumBits},
      {Layout::kTernaryBase3, Layout::kSumHuffman},
      {Layout::kTernary2Bit, Layout::kSumHuffman}};
  for (const auto& [push, pull] : terngrad_layouts) {
    Variant variant = Default(CodecId::kTernGrad);
    variant.name =
        absl::StrFormat("terngrad_%s_%s", LayoutName(push), LayoutName(pull));
    variant.options.push_layout = push;
    variant.options.pull_layout = pull;
    variants.push_back(variant);
  }
  Variant sampled = Default(CodecId::kOneBit);
  sampled.name = "onebit_sampled_means";
  sampled.options.sampled_means = true;
  sampled.options.sample_size = 8;  // below the test sizes' groups
  variants.push_back(sampled);
  Variant one_bit = Default(CodecId::kDropping);
  one_bit.name = "dropping_1bit";
  one_bit.options.drop_survivors = DropSurvivors::k1Bit;
  variants.push_back(one_bit);
  Variant two_bit = Default(CodecId::kDropping);
  two_bit.name = "dropping_2bit";
  two_bit.options.drop_survivors = DropSurvivors::k2Bit;
  variants.push_back(two_bit);
  Variant per_tensor = Default(CodecId::kDropping);
  per_tensor.name = "dropping_per_tensor";
  per_tensor.options.drop_scope = DropScope::kPerTensor;
  variants.push_back(per_tensor);
  return variants;
}

// What the test knows about a codec beyond the interface: the layouts it
// may write with any options (a decoder may accept all of them), and
// whether its decode is an unbiased estimate of its input.
struct Traits {
  std::vector<Layout> layouts;
  bool unbiased = false;
};

Traits TraitsOf(CodecId id) {
  switch (id) {
    case CodecId::kFp32:
    case CodecId::kFp16:
    case CodecId::kInt8:
      return {{Layout::kRaw}, false};
    case CodecId::kTernGrad:
      return {{Layout::kTernary2Bit, Layout::kTernaryBase3, Layout::kSumBits,
               Layout::kSumRadix, Layout::kSumHuffman},
              true};
    case CodecId::kOneBit:
      return {{Layout::kSignBits}, false};
    case CodecId::kThreshold:
    case CodecId::kAdaptive:
      return {{Layout::kIndexSign}, false};
    case CodecId::kDropping:
      return {{Layout::kIndexValue, Layout::kIndexSign, Layout::kIndex2Bit},
              false};
    case CodecId::kQsgd:
      return {{Layout::kQsgdLevels}, true};
    case CodecId::kUnspecified:
      break;
  }
  return {};
}

// A layout whose byte count follows from the header alone: any truncation
// or extension is malformed. (The sparse layouts hold a variable number of
// whole records, so cutting exactly one record off is a valid payload.)
bool IsDense(Layout layout) {
  return layout != Layout::kIndexSign && layout != Layout::kIndexValue &&
         layout != Layout::kIndex2Bit;
}

// ---------------------------------------------------------------------------
// Inputs and helpers. All randomness is Philox.

float Uniform(const RandomStream& stream, uint64_t i) {
  const PhiloxCounter words = RandomWords(stream, static_cast<uint32_t>(i / 4));
  return 2.0f * UniformFloat(words.v[i % 4]) - 1.0f;
}

// Gradient-like values in [-0.01, 0.01), every 7th exactly zero and every
// 97th a tenfold outlier.
std::vector<float> Input(size_t n, uint32_t worker, uint32_t step = 0) {
  const RandomStream stream{
      .seed = 1234, .step = step, .chunk = 77, .worker = worker};
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) {
    const float scale = i % 97 == 3 ? 0.1f : 0.01f;
    values[i] = i % 7 == 5 ? 0.0f : scale * Uniform(stream, i);
  }
  return values;
}

EncodeContext PushContext(uint32_t worker, uint32_t step = 0,
                          uint64_t group_size = 0) {
  EncodeContext context;
  context.stream =
      RandomStream{.seed = 42, .step = step, .chunk = 9, .worker = worker};
  context.group_size = group_size;
  return context;
}

float MaxAbs(absl::Span<const float> values) {
  float max = 0.0f;
  for (const float v : values) max = std::max(max, std::abs(v));
  return max;
}

bool AllFinite(absl::Span<const float> values) {
  for (const float v : values) {
    if (!std::isfinite(v)) return false;
  }
  return true;
}

bool SameBits(absl::Span<const float> a, absl::Span<const float> b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), 4 * a.size()) == 0);
}

// Every field, the floats bit for bit.
void ExpectSamePayload(const Payload& a, const Payload& b) {
  EXPECT_EQ(a.codec, b.codec);
  EXPECT_EQ(a.layout, b.layout);
  EXPECT_EQ(a.format_version, b.format_version);
  EXPECT_EQ(a.num_elements, b.num_elements);
  EXPECT_EQ(a.num_summands, b.num_summands);
  EXPECT_TRUE(SameBits(a.scalers, b.scalers));
  EXPECT_TRUE(a.data == b.data);
}

uint32_t ReadU32(const std::string& data, size_t offset) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) {
    value |= static_cast<uint32_t>(static_cast<uint8_t>(data[offset + i]))
             << (8 * i);
  }
  return value;
}

// The spread of one element's decode, for the unbiased codecs: the two
// values it is rounded between are this far apart. TernGrad: {0, +-s}.
// QSGD: adjacent levels norm_b / s apart (header: uint32 bucket_size,
// uint32 s).
std::vector<double> Spread(CodecId id, const Payload& payload) {
  std::vector<double> spread(payload.num_elements, 0.0);
  if (id == CodecId::kTernGrad && payload.num_elements > 0) {
    std::fill(spread.begin(), spread.end(), payload.scalers.at(0));
  } else if (id == CodecId::kQsgd && payload.num_elements > 0) {
    const uint32_t bucket = ReadU32(payload.data, 0);
    const uint32_t levels = ReadU32(payload.data, 4);
    for (size_t i = 0; i < spread.size(); ++i) {
      spread[i] = double{payload.scalers.at(i / bucket)} / levels;
    }
  }
  return spread;
}

// ---------------------------------------------------------------------------
// The fixture: builds the codec or skips it, by name, when it is not built.

class ConformanceTest : public ::testing::Test {
 protected:
  void Build(const Variant& variant) {
    absl::StatusOr<std::unique_ptr<Codec>> codec = MakeCodec(variant.options);
    if (codec.status().code() == absl::StatusCode::kUnimplemented) {
      GTEST_SKIP() << "codec " << variant.name
                   << " is not built yet: " << codec.status();
    }
    ASSERT_TRUE(codec.ok()) << variant.name << ": " << codec.status();
    codec_ = *std::move(codec);
    id_ = variant.options.id;
    traits_ = TraitsOf(id_);
    EXPECT_EQ(codec_->id(), id_);
    EXPECT_EQ(codec_->name(), CodecName(id_));
  }

  Payload Encode(absl::Span<const float> values,
                 const EncodeContext& context) const {
    absl::StatusOr<Payload> payload = codec_->Encode(values, context);
    EXPECT_TRUE(payload.ok()) << payload.status();
    return payload.ok() ? *std::move(payload) : Payload();
  }

  std::vector<float> Decode(const Payload& payload) const {
    std::vector<float> out(payload.num_elements, -1234.5f);
    const absl::Status status = codec_->Decode(payload, absl::MakeSpan(out));
    EXPECT_TRUE(status.ok()) << status;
    return out;
  }

  // What every payload this codec writes looks like.
  void ExpectHeader(const Payload& payload, uint64_t n,
                    uint32_t summands) const {
    EXPECT_EQ(payload.codec, id_);
    EXPECT_EQ(payload.format_version, kFormatVersion);
    EXPECT_EQ(payload.num_elements, n);
    EXPECT_EQ(payload.num_summands, summands);
    EXPECT_NE(std::find(traits_.layouts.begin(), traits_.layouts.end(),
                        payload.layout),
              traits_.layouts.end())
        << LayoutName(payload.layout);
  }

  // A shared scaler for the summable codec (TernGrad adds codes only under
  // one scaler, DESIGN section 3 step 3); others ignore it.
  float SharedScaler(const std::vector<std::vector<float>>& inputs) const {
    if (!codec_->Summable()) return 0.0f;
    float max = 0.0f;
    for (const auto& input : inputs) max = std::max(max, MaxAbs(input));
    return max > 0 ? max : 1.0f;
  }

  std::unique_ptr<Codec> codec_;
  CodecId id_ = CodecId::kUnspecified;
  Traits traits_;
};

// ---------------------------------------------------------------------------
// Round trips

constexpr uint64_t kSizes[] = {0, 1, 31, 32, 33, 4097, (uint64_t{1} << 20) + 3};

class RoundTripTest
    : public ConformanceTest,
      public ::testing::WithParamInterface<std::tuple<Variant, uint64_t>> {};

TEST_P(RoundTripTest, DecodesToFiniteValuesOfTheRightSize) {
  const auto& [variant, n] = GetParam();
  Build(variant);
  if (codec_ == nullptr) return;
  const std::vector<float> x = Input(n, 0);
  for (const uint64_t group_size : {uint64_t{0}, kRowLength}) {
    SCOPED_TRACE(absl::StrFormat("group_size %d", group_size));
    const Payload payload = Encode(x, PushContext(0, 0, group_size));
    ExpectHeader(payload, n, 1);
    const std::vector<float> decoded = Decode(payload);
    ASSERT_EQ(decoded.size(), n);
    ASSERT_TRUE(AllFinite(decoded));
    // The codecs whose error has a closed form.
    const std::vector<double> spread = Spread(id_, payload);
    for (size_t i = 0; i < n; ++i) {
      if (id_ == CodecId::kFp32) {
        ASSERT_EQ(decoded[i], x[i]) << i;
      } else if (id_ == CodecId::kFp16) {
        // binary16 rounding: half an ulp (2^-11 relative), or half the
        // subnormal step 2^-24 below 2^-14.
        ASSERT_LE(std::abs(decoded[i] - x[i]),
                  std::ldexp(std::abs(x[i]), -11) + std::ldexp(1.0f, -25))
            << i;
      } else if (id_ == CodecId::kTernGrad) {
        const float s = payload.scalers.at(0);
        ASSERT_TRUE(decoded[i] == 0.0f || std::abs(decoded[i]) == s) << i;
      } else if (id_ == CodecId::kQsgd) {
        // Adjacent levels of the element's bucket.
        ASSERT_LE(std::abs(decoded[i] - x[i]), spread[i] * (1 + 1e-5) + 1e-12)
            << i;
      }
    }
  }
}

class UnbiasedTest : public RoundTripTest {};

// The mean of K = 200 decodes from independent streams estimates x (the
// unbiased codecs). Each decode of element i lies in an interval of length
// L_i (Spread), so by Hoeffding P(|mean - E| >= t) <= 2 exp(-2 K t^2 /
// L_i^2): t = 0.24 L_i makes that ~1e-10 per element, so even 2^20 elements
// fail with probability ~1e-4, and the streams are fixed, so a pass is
// reproducible. The average of those errors over all elements (and
// streams) is an average of n K bounded independent terms: 0.24 L / sqrt(n)
// bounds it the same way and catches a small bias shared by all elements.
// TernGrad quantizes with a shared scaler >= max|x| here, since with its
// local scaler the expectation is the clipped gradient (DESIGN section 3).
TEST_P(UnbiasedTest, MeanOfManyStreamsIsTheInput) {
  const auto& [variant, n] = GetParam();
  Build(variant);
  if (codec_ == nullptr) return;
  ASSERT_TRUE(traits_.unbiased);
  constexpr int kStreams = 200;
  const std::vector<float> x = Input(n, 0);
  std::vector<double> mean(n, 0.0);
  std::vector<double> spread;
  for (uint32_t k = 0; k < kStreams; ++k) {
    EncodeContext context = PushContext(0, k);
    context.scaler = MaxAbs(x) > 0 ? MaxAbs(x) : 1.0f;
    // TernGrad clips at the worker's own bound (ClipRule::kWorker); at
    // max|x| nothing is clipped, so the codes are unbiased for x itself.
    context.clip_bound = context.scaler;
    const Payload payload = Encode(x, context);
    const std::vector<float> decoded = Decode(payload);
    ASSERT_EQ(decoded.size(), n);
    for (size_t i = 0; i < n; ++i) mean[i] += decoded[i];
    if (k == 0) spread = Spread(id_, payload);
  }
  double bias_sum = 0, spread_sum = 0;
  for (size_t i = 0; i < n; ++i) {
    mean[i] /= kStreams;
    ASSERT_LE(std::abs(mean[i] - x[i]), 0.24 * spread[i] + 1e-9) << i;
    bias_sum += mean[i] - x[i];
    spread_sum += spread[i];
  }
  if (n > 0) {
    EXPECT_LE(std::abs(bias_sum) / n,
              0.24 * (spread_sum / n) / std::sqrt(double(n)) + 1e-9);
  }
}

TEST_P(RoundTripTest, SameInputAndStreamGiveTheSameBytes) {
  const auto& [variant, n] = GetParam();
  Build(variant);
  if (codec_ == nullptr) return;
  const std::vector<float> x = Input(n, 3);
  for (const uint64_t group_size : {uint64_t{0}, kRowLength}) {
    EncodeContext context = PushContext(3, 17, group_size);
    context.scaler = SharedScaler({x});
    const Payload first = Encode(x, context);
    const std::vector<float> copy = x;  // another buffer, same values
    ExpectSamePayload(Encode(copy, context), first);
  }
}

// Decode writes every element, whatever `out` held: the shard decodes into
// memory it does not zero-fill first (kernels/decoded_values.h).
TEST_P(RoundTripTest, DecodeOverwritesWhateverTheOutputHeld) {
  const auto& [variant, n] = GetParam();
  Build(variant);
  if (codec_ == nullptr) return;
  const Payload payload = Encode(Input(n, 4), PushContext(4, 2, 0));
  std::vector<float> from_zeros(n, 0.0f);
  ASSERT_TRUE(codec_->Decode(payload, absl::MakeSpan(from_zeros)).ok());
  ASSERT_EQ(Decode(payload), from_zeros);  // Decode starts from -1234.5
}

// EncodeInto writes Encode's payload over whatever `out` held before: a
// payload of another codec with scalers and a longer, then a shorter, buffer
// (a kept payload is reused with the capacity of an earlier step).
TEST_P(RoundTripTest, EncodeIntoGivesEncodesPayloadOverAnyOldOne) {
  const auto& [variant, n] = GetParam();
  Build(variant);
  if (codec_ == nullptr) return;
  const std::vector<float> x = Input(n, 5);
  EncodeContext context = PushContext(5, 9, 0);
  context.scaler = SharedScaler({x});
  const Payload want = Encode(x, context);
  for (const size_t old_size : {want.data.size() + 100, size_t{1}}) {
    Payload out;
    out.codec = CodecId::kInt8;
    out.layout = Layout::kIndexValue;
    out.format_version = 7;
    out.num_elements = 3;
    out.num_summands = 5;
    out.scalers = {1.0f, 2.0f, 3.0f};
    out.data.assign(old_size, '\xAB');
    ASSERT_TRUE(codec_->EncodeInto(x, context, &out).ok());
    ExpectSamePayload(out, want);
  }
}

// The biased codecs (the others) have an error that error feedback carries:
// error_feedback_test checks that nothing is lost.
std::vector<Variant> UnbiasedVariants() {
  std::vector<Variant> unbiased;
  for (const Variant& variant : Variants()) {
    if (TraitsOf(variant.options.id).unbiased) unbiased.push_back(variant);
  }
  return unbiased;
}

INSTANTIATE_TEST_SUITE_P(
    Codecs, UnbiasedTest,
    ::testing::Combine(::testing::ValuesIn(UnbiasedVariants()),
                       ::testing::ValuesIn(kSizes)),
    [](const ::testing::TestParamInfo<UnbiasedTest::ParamType>& info) {
      return absl::StrFormat("%s_%d", std::get<0>(info.param).name,
                             std::get<1>(info.param));
    });

INSTANTIATE_TEST_SUITE_P(
    Codecs, RoundTripTest,
    ::testing::Combine(::testing::ValuesIn(Variants()),
                       ::testing::ValuesIn(kSizes)),
    [](const ::testing::TestParamInfo<RoundTripTest::ParamType>& info) {
      return absl::StrFormat("%s_%d", std::get<0>(info.param).name,
                             std::get<1>(info.param));
    });

// ---------------------------------------------------------------------------
// Malformed payloads

class MalformedTest : public ConformanceTest,
                      public ::testing::WithParamInterface<Variant> {
 protected:
  // A push and a pull of 2 workers, n elements, in groups of 4 where the
  // codec has groups.
  std::vector<Payload> Payloads(uint64_t n) {
    std::vector<std::vector<float>> inputs = {Input(n, 0), Input(n, 1)};
    const float scaler = SharedScaler(inputs);
    std::vector<Payload> pushes;
    for (uint32_t w = 0; w < 2; ++w) {
      EncodeContext context = PushContext(w, 0, 4);
      context.scaler = scaler;
      pushes.push_back(Encode(inputs[w], context));
    }
    AggregationContext context;
    context.stream = PushContext(kShardStreamWorker).stream;
    context.group_size = 4;
    std::vector<float> residual;
    context.residual = &residual;
    std::unique_ptr<Aggregation> aggregation =
        codec_->NewAggregation(n, 2, context);
    for (uint32_t w = 0; w < 2; ++w) {
      EXPECT_TRUE(aggregation->Add(w, pushes[w]).ok());
    }
    absl::StatusOr<Payload> pull = aggregation->Finish();
    EXPECT_TRUE(pull.ok()) << pull.status();
    return {pushes[0], pull.ok() ? *pull : Payload()};
  }

  absl::Status DecodeInto(const Payload& payload, size_t n) const {
    std::vector<float> out(n, 0.0f);
    absl::Status status = codec_->Decode(payload, absl::MakeSpan(out));
    // A decode that succeeds on damaged bytes must still give finite
    // values: the layout's own floats (RAW) excepted, whose bytes are the
    // values and whose non-finite ones the server refuses after decoding
    // (server/aggregator.cc).
    if (status.ok() && payload.layout != Layout::kRaw) {
      for (size_t i = 0; i < n; ++i) {
        if (!std::isfinite(out[i])) {
          return absl::InternalError(
              absl::StrFormat("decoded element %d is %g", i, out[i]));
        }
      }
    }
    return status;
  }

  void ExpectInvalid(const Payload& payload, size_t n,
                     const std::string& what) const {
    const absl::Status status = DecodeInto(payload, n);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument)
        << what << ": " << status;
  }

  // OK with finite values, or INVALID_ARGUMENT; nothing else, no crash.
  void ExpectRefusedOrFinite(const Payload& payload, size_t n,
                             const std::string& what) const {
    const absl::Status status = DecodeInto(payload, n);
    EXPECT_TRUE(status.ok() ||
                status.code() == absl::StatusCode::kInvalidArgument)
        << what << ": " << status;
  }
};

TEST_P(MalformedTest, HeaderFieldsThatDoNotMatch) {
  Build(GetParam());
  if (codec_ == nullptr) return;
  for (const uint64_t n : {uint64_t{1}, uint64_t{33}, uint64_t{4097}}) {
    for (const Payload& good : Payloads(n)) {
      SCOPED_TRACE(absl::StrFormat("n %d, %d summands", n, good.num_summands));
      ASSERT_TRUE(DecodeInto(good, n).ok());
      for (uint32_t other = 0; other <= 10; ++other) {
        if (other == static_cast<uint32_t>(id_)) continue;
        Payload bad = good;
        bad.codec = static_cast<CodecId>(other == 10 ? 77 : other);
        ExpectInvalid(bad, n, absl::StrFormat("codec %d", other));
      }
      for (uint32_t layout = 0; layout <= 10; ++layout) {
        const Layout other = static_cast<Layout>(layout == 10 ? 77 : layout);
        if (std::find(traits_.layouts.begin(), traits_.layouts.end(), other) !=
            traits_.layouts.end()) {
          continue;
        }
        Payload bad = good;
        bad.layout = other;
        ExpectInvalid(bad, n, absl::StrFormat("layout %d", layout));
      }
      for (const uint32_t version : {0u, 2u, 0xFFFFFFFFu}) {
        Payload bad = good;
        bad.format_version = version;
        ExpectInvalid(bad, n, absl::StrFormat("format_version %d", version));
      }
      for (const uint64_t elements : {n - 1, n + 1, uint64_t{1} << 40}) {
        Payload bad = good;
        bad.num_elements = elements;
        ExpectInvalid(bad, n, absl::StrFormat("num_elements %d", elements));
      }
      ExpectInvalid(good, n + 1, "a longer output");
      ExpectInvalid(good, n - 1, "a shorter output");
      Payload bad = good;
      bad.num_summands = 0;
      ExpectInvalid(bad, n, "0 summands");
    }
  }
}

TEST_P(MalformedTest, ScalersThatAreNotFiniteOrMiscounted) {
  Build(GetParam());
  if (codec_ == nullptr) return;
  const float inf = std::numeric_limits<float>::infinity();
  for (const uint64_t n : {uint64_t{1}, uint64_t{33}, uint64_t{4097}}) {
    for (const Payload& good : Payloads(n)) {
      SCOPED_TRACE(absl::StrFormat("n %d, %d summands", n, good.num_summands));
      const size_t count = good.scalers.size();
      for (size_t j = 0; j < count; ++j) {
        if (count > 16 && j > 2 && j + 2 < count) continue;
        for (const float value :
             {std::numeric_limits<float>::quiet_NaN(), inf, -inf}) {
          Payload bad = good;
          bad.scalers[j] = value;
          ExpectInvalid(bad, n, absl::StrFormat("scaler %d = %g", j, value));
        }
      }
      Payload bad = good;
      bad.scalers.push_back(0.0f);
      ExpectInvalid(bad, n, "one scaler more");
      if (count > 0) {
        bad = good;
        bad.scalers.pop_back();
        ExpectInvalid(bad, n, "one scaler less");
      }
    }
  }
}

TEST_P(MalformedTest, TruncatedAndExtendedData) {
  Build(GetParam());
  if (codec_ == nullptr) return;
  for (const uint64_t n : {uint64_t{1}, uint64_t{33}, uint64_t{4097}}) {
    for (const Payload& good : Payloads(n)) {
      SCOPED_TRACE(absl::StrFormat("n %d, %d summands, %d bytes", n,
                                   good.num_summands, good.data.size()));
      const bool dense = IsDense(good.layout);
      for (size_t size = 0; size < good.data.size(); ++size) {
        if (n > 33 && size > 64 && size + 64 < good.data.size()) continue;
        Payload bad = good;
        bad.data.resize(size);
        const std::string what = absl::StrFormat("truncated to %d", size);
        if (dense || size + 1 == good.data.size()) {
          ExpectInvalid(bad, n, what);
        } else {
          ExpectRefusedOrFinite(bad, n, what);
        }
      }
      for (size_t extra = 1; extra <= 9; ++extra) {
        for (const char fill : {'\0', '\xFF'}) {
          Payload bad = good;
          bad.data.append(extra, fill);
          const std::string what =
              absl::StrFormat("%d bytes %d appended", extra, fill);
          if (dense || extra == 1) {
            ExpectInvalid(bad, n, what);
          } else {
            ExpectRefusedOrFinite(bad, n, what);
          }
        }
      }
    }
  }
}

// Every byte of a small push and pull, replaced by six others: the decode
// refuses or gives finite values, and never reads out of bounds (ASan).
TEST_P(MalformedTest, EverySingleByteCorruption) {
  Build(GetParam());
  if (codec_ == nullptr) return;
  for (const uint64_t n : {uint64_t{1}, uint64_t{33}}) {
    for (const Payload& good : Payloads(n)) {
      SCOPED_TRACE(absl::StrFormat("n %d, %d summands, %d bytes", n,
                                   good.num_summands, good.data.size()));
      int refused = 0, accepted = 0;
      for (size_t pos = 0; pos < good.data.size(); ++pos) {
        const uint8_t byte = static_cast<uint8_t>(good.data[pos]);
        for (const uint8_t value :
             {uint8_t(byte ^ 0x01), uint8_t(byte ^ 0x10), uint8_t(byte ^ 0x80),
              uint8_t(byte ^ 0xFF), uint8_t{0x00}, uint8_t{0xFF}}) {
          if (value == byte) continue;
          Payload bad = good;
          bad.data[pos] = static_cast<char>(value);
          const absl::Status status = DecodeInto(bad, n);
          EXPECT_TRUE(status.ok() ||
                      status.code() == absl::StatusCode::kInvalidArgument)
              << "byte " << pos << " = " << int{value} << ": " << status;
          (status.ok() ? accepted : refused)++;
        }
      }
      std::printf("%s n=%d summands=%d: %d corruptions refused, %d accepted\n",
                  GetParam().name.c_str(), static_cast<int>(n),
                  good.num_summands, refused, accepted);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Codecs, MalformedTest, ::testing::ValuesIn(Variants()),
                         [](const ::testing::TestParamInfo<Variant>& info) {
                           return info.param.name;
                         });

// ---------------------------------------------------------------------------
// Aggregation

constexpr uint64_t kAggregationSizes[] = {0, 1, 33, 4097};

class AggregationTest
    : public ConformanceTest,
      public ::testing::WithParamInterface<std::tuple<Variant, uint64_t>> {
 protected:
  struct Step {
    std::vector<std::vector<float>> inputs;
    std::vector<Payload> pushes;
    // The average of the decoded pushes, added in worker order in fp32 as
    // the contract says (codec.h, Aggregation).
    std::vector<float> average;
    // sum_w |decoded_w| / N, for rounding bounds.
    std::vector<double> magnitude;
  };

  Step MakeStep(uint64_t n, uint32_t workers, uint32_t step,
                uint64_t group_size) {
    Step s;
    for (uint32_t w = 0; w < workers; ++w) {
      s.inputs.push_back(Input(n, w, step));
    }
    const float scaler = SharedScaler(s.inputs);
    s.average.assign(n, 0.0f);
    s.magnitude.assign(n, 0.0);
    for (uint32_t w = 0; w < workers; ++w) {
      EncodeContext context = PushContext(w, step, group_size);
      context.scaler = scaler;
      s.pushes.push_back(Encode(s.inputs[w], context));
      const std::vector<float> decoded = Decode(s.pushes.back());
      for (size_t i = 0; i < n; ++i) {
        s.average[i] += decoded[i];
        s.magnitude[i] += std::abs(decoded[i]) / workers;
      }
    }
    for (float& value : s.average) value /= static_cast<float>(workers);
    return s;
  }

  // Adds the pushes in `order` and finishes; checks every Add.
  Payload Aggregate(const Step& s, uint64_t n,
                    const std::vector<uint32_t>& order) {
    std::unique_ptr<Aggregation> aggregation =
        codec_->NewAggregation(n, static_cast<uint32_t>(order.size()));
    for (const uint32_t w : order) {
      const absl::Status status = aggregation->Add(w, s.pushes[w]);
      EXPECT_TRUE(status.ok()) << "worker " << w << ": " << status;
    }
    absl::StatusOr<Payload> pull = aggregation->Finish();
    EXPECT_TRUE(pull.ok()) << pull.status();
    return pull.ok() ? *std::move(pull) : Payload();
  }
};

// A Philox Fisher-Yates shuffle of 0..n-1.
std::vector<uint32_t> Shuffled(uint32_t n, uint32_t seed) {
  std::vector<uint32_t> order(n);
  for (uint32_t i = 0; i < n; ++i) order[i] = i;
  const RandomStream stream{.seed = 555, .step = seed};
  for (uint32_t i = n; i > 1; --i) {
    const uint32_t word = RandomWords(stream, i).v[0];
    std::swap(order[i - 1],
              order[static_cast<uint32_t>((uint64_t{word} * i) >> 32)]);
  }
  return order;
}

TEST_P(AggregationTest, PullIsTheSameInEveryOrder) {
  const auto& [variant, n] = GetParam();
  Build(variant);
  if (codec_ == nullptr) return;
  for (const uint32_t workers : {1u, 2u, 5u}) {
    SCOPED_TRACE(absl::StrFormat("%d workers", workers));
    const Step s = MakeStep(n, workers, 0, 0);
    const Payload pull = Aggregate(s, n, Shuffled(workers, 0));
    ExpectHeader(pull, n, workers);
    std::vector<uint32_t> reversed = Shuffled(workers, 0);
    std::reverse(reversed.begin(), reversed.end());
    std::vector<std::vector<uint32_t>> orders = {reversed};
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      orders.push_back(Shuffled(workers, seed));
    }
    for (const std::vector<uint32_t>& order : orders) {
      ExpectSamePayload(Aggregate(s, n, order), pull);
    }

    // The pull's value, where the codec bounds it: the average of the
    // decoded pushes, re-encoded. The error-feedback codecs are checked
    // with the shard residual below.
    const std::vector<float> got = Decode(pull);
    ASSERT_EQ(got.size(), n);
    ASSERT_TRUE(AllFinite(got));
    const std::vector<double> spread = Spread(id_, pull);
    for (size_t i = 0; i < n; ++i) {
      const double error = std::abs(double{got[i]} - s.average[i]);
      if (id_ == CodecId::kFp32) {
        ASSERT_EQ(got[i], s.average[i]) << i;
      } else if (id_ == CodecId::kFp16) {
        ASSERT_LE(error, std::ldexp(std::abs(s.average[i]), -11) +
                             std::ldexp(1.0, -25))
            << i;
      } else if (id_ == CodecId::kTernGrad) {
        // s * sum / N against the fp32 average of s * code: a few roundings.
        ASSERT_LE(error, 8 * kUnitRoundoff * spread[i]) << i;
      } else if (id_ == CodecId::kQsgd) {
        // One stochastic rounding of the average between adjacent levels.
        ASSERT_LE(error, spread[i] * (1 + 1e-5) + 1e-12) << i;
      }
    }
  }
}

TEST_P(AggregationTest, DuplicatesEarlyFinishAndBadPushesChangeNothing) {
  const auto& [variant, n] = GetParam();
  Build(variant);
  if (codec_ == nullptr) return;
  for (const uint32_t workers : {1u, 2u, 5u}) {
    SCOPED_TRACE(absl::StrFormat("%d workers", workers));
    const Step s = MakeStep(n, workers, 0, 0);
    const std::vector<uint32_t> order = Shuffled(workers, 7);
    const Payload want = Aggregate(s, n, order);

    std::unique_ptr<Aggregation> aggregation =
        codec_->NewAggregation(n, workers);
    EXPECT_EQ(aggregation->Finish().status().code(),
              absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(aggregation->Add(workers, s.pushes[0]).code(),
              absl::StatusCode::kInvalidArgument);
    for (size_t k = 0; k < order.size(); ++k) {
      const uint32_t w = order[k];
      // A bad push first: refused, and the worker can still push.
      Payload bad = s.pushes[w];
      bad.codec = id_ == CodecId::kFp32 ? CodecId::kFp16 : CodecId::kFp32;
      EXPECT_EQ(aggregation->Add(w, bad).code(),
                absl::StatusCode::kInvalidArgument);
      bad = s.pushes[w];
      bad.format_version = 2;
      EXPECT_EQ(aggregation->Add(w, bad).code(),
                absl::StatusCode::kInvalidArgument);
      // One whose data is cut short, refused only once its data is read.
      bad = s.pushes[w];
      if (!bad.data.empty()) {
        bad.data.pop_back();
        EXPECT_EQ(aggregation->Add(w, bad).code(),
                  absl::StatusCode::kInvalidArgument);
      }
      ASSERT_TRUE(aggregation->Add(w, s.pushes[w]).ok());
      // Then duplicates, of the same push and of another worker's.
      EXPECT_EQ(aggregation->Add(w, s.pushes[w]).code(),
                absl::StatusCode::kAlreadyExists);
      EXPECT_EQ(aggregation->Add(w, s.pushes[order[0]]).code(),
                absl::StatusCode::kAlreadyExists);
      if (k + 1 < order.size()) {
        EXPECT_EQ(aggregation->Finish().status().code(),
                  absl::StatusCode::kFailedPrecondition);
      }
    }
    absl::StatusOr<Payload> pull = aggregation->Finish();
    ASSERT_TRUE(pull.ok()) << pull.status();
    ExpectSamePayload(*pull, want);
    // The pull moved out; a second Finish has none to give.
    EXPECT_EQ(aggregation->Finish().status().code(),
              absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(aggregation->Add(order[0], s.pushes[order[0]]).code(),
              absl::StatusCode::kAlreadyExists);
  }
}

// The shard's residual (AggregationContext::residual), one vector kept
// across 3 steps as a shard keeps it: with r_0 = 0, a_t the average of the
// decoded pushes and p_t the decoded pull,
//   sum_t p_t + r_3 = sum_t a_t,
// up to the roundings of c_t = a_t + r_{t-1} and r_t = c_t - p_t (u |c_t|
// and u |r_t| each), plus the rounding of a sum of N pushes that may be
// ordered differently inside the codec (N u sum_w |d_w| / N). For the other
// codecs the residual is not touched.
TEST_P(AggregationTest, ShardResidualConservesWhatPullsDrop) {
  const auto& [variant, n] = GetParam();
  Build(variant);
  if (codec_ == nullptr) return;
  if (codec_->Summable()) return;  // no re-encoding, no residual
  for (const uint64_t group_size : {uint64_t{0}, kRowLength}) {
    for (const uint32_t workers : {1u, 2u, 5u}) {
      SCOPED_TRACE(
          absl::StrFormat("group_size %d, %d workers", group_size, workers));
      const bool feedback = codec_->UsesErrorFeedback();
      // A non-feedback codec gets a residual it must leave alone.
      std::vector<float> residual =
          feedback ? std::vector<float>() : Input(n, 99);
      const std::vector<float> untouched = residual;
      std::vector<double> pulled(n, 0.0), averaged(n, 0.0), bound(n, 0.0);
      for (uint32_t t = 0; t < 3; ++t) {
        const Step s = MakeStep(n, workers, t, group_size);
        const std::vector<float> before =
            residual.empty() ? std::vector<float>(n, 0.0f) : residual;
        AggregationContext context;
        context.stream = PushContext(kShardStreamWorker, t).stream;
        context.group_size = group_size;
        context.residual = &residual;
        std::unique_ptr<Aggregation> aggregation =
            codec_->NewAggregation(n, workers, context);
        for (const uint32_t w : Shuffled(workers, t)) {
          ASSERT_TRUE(aggregation->Add(w, s.pushes[w]).ok());
        }
        absl::StatusOr<Payload> pull = aggregation->Finish();
        ASSERT_TRUE(pull.ok()) << pull.status();
        ExpectHeader(*pull, n, workers);
        const std::vector<float> got = Decode(*pull);
        ASSERT_TRUE(AllFinite(got));
        if (!feedback) continue;
        ASSERT_EQ(residual.size(), n);
        ASSERT_TRUE(AllFinite(residual));
        for (size_t i = 0; i < n; ++i) {
          pulled[i] += got[i];
          averaged[i] += s.average[i];
          const double compensated = double{s.average[i]} + before[i];
          bound[i] += (1 + kUnitRoundoff) * kUnitRoundoff *
                      (std::abs(compensated) + std::abs(residual[i]) +
                       workers * s.magnitude[i]);
        }
      }
      if (!feedback) {
        EXPECT_TRUE(SameBits(residual, untouched));
        continue;
      }
      for (size_t i = 0; i < n; ++i) {
        ASSERT_LE(std::abs(pulled[i] + residual[i] - averaged[i]),
                  bound[i] + 1e-12)
            << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Codecs, AggregationTest,
    ::testing::Combine(::testing::ValuesIn(Variants()),
                       ::testing::ValuesIn(kAggregationSizes)),
    [](const ::testing::TestParamInfo<AggregationTest::ParamType>& info) {
      return absl::StrFormat("%s_%d", std::get<0>(info.param).name,
                             std::get<1>(info.param));
    });

}  // namespace
}  // namespace tern::kernels
