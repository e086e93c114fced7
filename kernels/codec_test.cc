// The codecs through the Codec interface, as servers and workers use them:
// encode and decode, the server's aggregation (validation, order
// independence, duplicates), and the registry.
#include "kernels/codec.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/codec_registry.h"
#include "kernels/codec_test_util.h"
#include "kernels/fp16_math.h"
#include "kernels/terngrad.h"

namespace tern::kernels {
namespace {

using codec_test::Decode;
using codec_test::Encode;
using codec_test::ExpectInvalid;
using codec_test::Gaussian;

constexpr uint64_t kSizes[] = {0, 1, 4, 5, 63, 64, 65, (1u << 20) + 3};

std::vector<float> Gradient(size_t n, uint32_t seed) {
  return Gaussian(n, seed, 0.0f, 0.01f);
}

std::unique_ptr<Codec> Make(CodecId id, Layout push = Layout::kUnspecified,
                            Layout pull = Layout::kUnspecified) {
  CodecOptions options;
  options.id = id;
  options.push_layout = push;
  options.pull_layout = pull;
  absl::StatusOr<std::unique_ptr<Codec>> codec = MakeCodec(options);
  EXPECT_TRUE(codec.ok()) << codec.status();
  return codec.ok() ? *std::move(codec) : nullptr;
}

EncodeContext Context(uint32_t worker, float scaler = 0.0f) {
  EncodeContext context;
  context.stream =
      RandomStream{.seed = 5, .step = 9, .chunk = 1, .worker = worker};
  context.scaler = scaler;
  return context;
}

// ---------------------------------------------------------------------------
// Encode and decode

class CodecSizeTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(CodecSizeTest, Fp32RoundTripsExactly) {
  const std::unique_ptr<Codec> codec = Make(CodecId::kFp32);
  std::vector<float> g = Gradient(GetParam(), 1);
  if (!g.empty()) g[0] = std::numeric_limits<float>::quiet_NaN();
  const Payload payload = Encode(*codec, g, Context(0));
  EXPECT_EQ(payload.codec, CodecId::kFp32);
  EXPECT_EQ(payload.layout, Layout::kRaw);
  EXPECT_EQ(payload.data.size(), 4 * g.size());
  const std::vector<float> decoded = Decode(*codec, payload);
  ASSERT_EQ(decoded.size(), g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_EQ(std::memcmp(&decoded[i], &g[i], 4), 0) << i;  // NaN too
  }
}

TEST_P(CodecSizeTest, Fp16RoundTripsThroughBinary16) {
  const std::unique_ptr<Codec> codec = Make(CodecId::kFp16);
  const std::vector<float> g = Gradient(GetParam(), 2);
  const Payload payload = Encode(*codec, g, Context(0));
  EXPECT_EQ(payload.data.size(), 2 * g.size());
  const std::vector<float> decoded = Decode(*codec, payload);
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_EQ(decoded[i], HalfToFloat(FloatToHalf(g[i])));
  }
}

// Whatever conversion the codec uses (F16C where the CPU has it), the bytes
// are fp16_math.h's, specials and rounding ties included.
TEST(Fp16CodecTest, BytesAreTheSoftwareConversion) {
  const std::unique_ptr<Codec> codec = Make(CodecId::kFp16);
  std::vector<float> values = Gradient(1000, 12);
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {0.0f,
                            -0.0f,
                            inf,
                            -inf,
                            65504.0f,
                            65520.0f,
                            -1e10f,
                            1.0f + 1.0f / 2048,
                            1.0f + 3.0f / 2048,
                            std::ldexp(1.0f, -25),
                            std::ldexp(1.5f, -25),
                            std::ldexp(1.0f, -140),
                            6.1e-5f};
  for (size_t i = 0; i < std::size(specials); ++i) values[3 * i] = specials[i];
  for (const uint32_t bits : {0x7FC00000u, 0xFF812345u, 0x7F800001u}) {
    float nan;
    std::memcpy(&nan, &bits, 4);
    values.push_back(nan);
  }
  const Payload payload = Encode(*codec, values, Context(0));
  for (size_t i = 0; i < values.size(); ++i) {
    uint16_t half;
    std::memcpy(&half, payload.data.data() + 2 * i, 2);
    ASSERT_EQ(half, FloatToHalf(values[i])) << i;
  }
  const std::vector<float> decoded = Decode(*codec, payload);
  for (size_t i = 0; i < values.size(); ++i) {
    uint16_t half;
    std::memcpy(&half, payload.data.data() + 2 * i, 2);
    const float want = HalfToFloat(half);
    ASSERT_EQ(std::memcmp(&decoded[i], &want, 4), 0) << i;
  }
}

TEST_P(CodecSizeTest, TernGradPushDecodesToScaledCodes) {
  for (const Layout layout : {Layout::kTernary2Bit, Layout::kTernaryBase3}) {
    const std::unique_ptr<Codec> codec = Make(CodecId::kTernGrad, layout);
    const std::vector<float> g = Gradient(GetParam(), 3);
    const Payload payload = Encode(*codec, g, Context(0));
    EXPECT_EQ(payload.layout, layout);
    EXPECT_EQ(payload.num_summands, 1u);
    ASSERT_EQ(payload.scalers.size(), 1u);
    const float s = payload.scalers[0];
    EXPECT_EQ(s, LocalScaler(ComputeStats(g), 2.5f));
    std::vector<int8_t> codes(g.size());
    ASSERT_TRUE(
        UnpackTernary(absl::Span<const uint8_t>(
                          reinterpret_cast<const uint8_t*>(payload.data.data()),
                          payload.data.size()),
                      g.size(), layout, absl::MakeSpan(codes))
            .ok());
    const std::vector<float> decoded = Decode(*codec, payload);
    for (size_t i = 0; i < g.size(); ++i) ASSERT_EQ(decoded[i], s * codes[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, CodecSizeTest, ::testing::ValuesIn(kSizes));

TEST(TernGradCodecTest, UsesTheSharedScalerWhenGiven) {
  const std::unique_ptr<Codec> codec = Make(CodecId::kTernGrad);
  const std::vector<float> g = Gradient(1000, 4);
  const Payload shared = Encode(*codec, g, Context(1, 0.05f));
  EXPECT_EQ(shared.scalers, std::vector<float>{0.05f});
  // Clipped at the worker's own bound s_ik (ClipRule::kWorker, the default).
  const float own = LocalScaler(ComputeStats(g), 2.5f);
  std::vector<uint8_t> want(PackedTernaryBytes(g.size(), Layout::kTernary2Bit));
  QuantizePack(g, own, 0.05f, Context(1).stream, Layout::kTernary2Bit,
               absl::MakeSpan(want));
  EXPECT_EQ(shared.data, std::string(want.begin(), want.end()));
  // <= 0 means "my own": the local scaler, which differs here.
  const Payload local = Encode(*codec, g, Context(1, 0.0f));
  EXPECT_EQ(local.scalers[0], LocalScaler(ComputeStats(g), 2.5f));
  EXPECT_NE(local.scalers[0], 0.05f);
  EXPECT_EQ(Encode(*codec, g, Context(1, -1.0f)).scalers, local.scalers);
}

// Issue 18 (Wen et al. 2017, Sec. 3.3): a worker whose own bound s_ik =
// c * sigma_i is below the shared scaler s_k clips at s_ik, so a value above
// s_ik is sent with probability s_ik / s_k, never always; the shared rule
// (tern before) clipped at s_k and sent every value above s_k.
TEST(TernGradCodecTest, ClipsAtTheWorkersOwnBoundBelowTheSharedScaler) {
  std::vector<float> g = Gradient(20000, 18);  // sigma ~ 0.01
  // 100 outliers far above this worker's own bound (and above s_k).
  for (size_t i = 0; i < g.size(); i += 200) g[i] = i % 400 ? 1.0f : -1.0f;
  const float own = LocalScaler(ComputeStats(g), 2.5f);
  const float shared = 4 * own;  // another worker's larger bound
  ASSERT_LT(shared, 1.0f);
  const std::unique_ptr<Codec> codec = Make(CodecId::kTernGrad);
  EncodeContext context = Context(1, shared);
  const Payload given = Encode(*codec, g, context);
  EXPECT_EQ(given.scalers, std::vector<float>{shared});
  std::vector<int8_t> codes(g.size());
  ASSERT_TRUE(
      UnpackTernary(absl::Span<const uint8_t>(
                        reinterpret_cast<const uint8_t*>(given.data.data()),
                        given.data.size()),
                    g.size(), Layout::kTernary2Bit, absl::MakeSpan(codes))
          .ok());
  // Every code is Ternarize's with p = min(|g|, s_ik) / s_k, bit for bit.
  for (size_t i = 0; i < g.size(); ++i) {
    const PhiloxCounter words =
        RandomWords(context.stream, static_cast<uint32_t>(i / 4));
    ASSERT_EQ(codes[i], Ternarize(g[i], own, shared, words.v[i % 4]))
        << "element " << i;
  }
  // The outliers are sent with probability s_ik / s_k = 1/4 (the shared
  // rule sent every one of them), always with their sign.
  int sent = 0;
  for (size_t i = 0; i < g.size(); i += 200) {
    if (codes[i] == 0) continue;
    ++sent;
    EXPECT_EQ(codes[i], g[i] > 0 ? 1 : -1);
  }
  EXPECT_NEAR(sent / 100.0, 0.25, 0.13);
  // The caller's s_ik (context.clip_bound) gives the same bytes.
  context.clip_bound = own;
  EXPECT_EQ(Encode(*codec, g, context).data, given.data);
  // ClipRule::kShared keeps the old rule: p = min(|g|, s_k) / s_k.
  CodecOptions options;
  options.clip_rule = ClipRule::kShared;
  const std::unique_ptr<Codec> shared_rule = *MakeCodec(options);
  std::vector<uint8_t> old(PackedTernaryBytes(g.size(), Layout::kTernary2Bit));
  QuantizePack(g, shared, context.stream, Layout::kTernary2Bit,
               absl::MakeSpan(old));
  EXPECT_EQ(Encode(*shared_rule, g, context).data,
            std::string(old.begin(), old.end()));
  EXPECT_NE(given.data, std::string(old.begin(), old.end()));
}

TEST(TernGradCodecTest, RejectsABadClipBoundOrRule) {
  const std::unique_ptr<Codec> codec = Make(CodecId::kTernGrad);
  const std::vector<float> g = Gradient(10, 6);
  for (const float bound : {-1.0f, std::numeric_limits<float>::infinity()}) {
    EncodeContext context = Context(0, 0.05f);
    context.clip_bound = bound;
    absl::StatusOr<Payload> payload = codec->Encode(g, context);
    EXPECT_EQ(payload.status().code(), absl::StatusCode::kInvalidArgument)
        << bound;
  }
  CodecOptions options;
  options.clip_rule = static_cast<ClipRule>(7);
  EXPECT_EQ(MakeCodec(options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TernGradCodecTest, ClipOptionChangesTheLocalScaler) {
  CodecOptions options;
  options.clip = 0.0f;
  const std::unique_ptr<Codec> codec = *MakeCodec(options);
  const std::vector<float> g = Gradient(1000, 5);
  EXPECT_EQ(Encode(*codec, g, Context(0)).scalers[0], ComputeStats(g).max_abs);
}

TEST(TernGradCodecTest, RejectsANonFiniteScaler) {
  const std::unique_ptr<Codec> codec = Make(CodecId::kTernGrad);
  const std::vector<float> g = Gradient(10, 6);
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity()}) {
    ExpectInvalid(codec->Encode(g, Context(0, bad)).status(), "not finite");
  }
}

TEST(TernGradCodecTest, NonFiniteGradientValuesEncodeAsZero) {
  const std::unique_ptr<Codec> codec = Make(CodecId::kTernGrad);
  std::vector<float> g(100);
  for (size_t i = 0; i < g.size(); ++i) g[i] = i % 2 == 0 ? 1.0f : -1.0f;
  g[10] = std::numeric_limits<float>::quiet_NaN();
  g[11] = -std::numeric_limits<float>::infinity();
  const Payload payload = Encode(*codec, g, Context(0));
  // From the finite values only: sigma ~ 1, so s = max|g| = 1.
  EXPECT_EQ(payload.scalers[0], 1.0f);
  const std::vector<float> decoded = Decode(*codec, payload);
  EXPECT_EQ(decoded[10], 0.0f);
  EXPECT_EQ(decoded[11], 0.0f);
  EXPECT_EQ(decoded[12], 1.0f);  // |g| = s: always kept
  EXPECT_EQ(decoded[13], -1.0f);
}

// Every header field a decoder checks, for each codec.
TEST(DecodeTest, RejectsMismatchedHeaders) {
  for (const CodecId id :
       {CodecId::kFp32, CodecId::kFp16, CodecId::kTernGrad}) {
    SCOPED_TRACE(CodecName(id));
    const std::unique_ptr<Codec> codec = Make(id);
    const Payload good = Encode(*codec, Gradient(37, 7), Context(0));
    std::vector<float> out(37);
    ASSERT_TRUE(codec->Decode(good, absl::MakeSpan(out)).ok());

    Payload bad = good;
    bad.codec = id == CodecId::kFp32 ? CodecId::kFp16 : CodecId::kFp32;
    ExpectInvalid(codec->Decode(bad, absl::MakeSpan(out)), "payload codec");
    bad = good;
    bad.codec = static_cast<CodecId>(77);
    ExpectInvalid(codec->Decode(bad, absl::MakeSpan(out)), "unknown");
    bad = good;
    bad.format_version = 2;
    ExpectInvalid(codec->Decode(bad, absl::MakeSpan(out)), "format version 2");
    bad = good;
    bad.num_elements = 36;
    ExpectInvalid(codec->Decode(bad, absl::MakeSpan(out)),
                  "36 elements, want 37");
    std::vector<float> longer(38);
    ExpectInvalid(codec->Decode(good, absl::MakeSpan(longer)),
                  "37 elements, want 38");
    bad = good;
    bad.data.pop_back();
    EXPECT_EQ(codec->Decode(bad, absl::MakeSpan(out)).code(),
              absl::StatusCode::kInvalidArgument);
    bad = good;
    bad.data.push_back('\0');
    EXPECT_EQ(codec->Decode(bad, absl::MakeSpan(out)).code(),
              absl::StatusCode::kInvalidArgument);
    bad = good;
    bad.layout = Layout::kUnspecified;
    ExpectInvalid(codec->Decode(bad, absl::MakeSpan(out)), "layout");
    bad = good;
    bad.scalers.push_back(1.0f);
    ExpectInvalid(codec->Decode(bad, absl::MakeSpan(out)), "scalers, want");
    bad = good;
    bad.num_summands = 0;
    EXPECT_EQ(codec->Decode(bad, absl::MakeSpan(out)).code(),
              absl::StatusCode::kInvalidArgument);
  }
}

TEST(DecodeTest, TernGradRejectsBadScalersAndSummands) {
  const std::unique_ptr<Codec> codec = Make(CodecId::kTernGrad);
  const Payload good = Encode(*codec, Gradient(37, 8), Context(0));
  std::vector<float> out(37);
  Payload bad = good;
  bad.scalers.clear();
  ExpectInvalid(codec->Decode(bad, absl::MakeSpan(out)), "0 scalers, want 1");
  for (const float scaler : {std::numeric_limits<float>::quiet_NaN(),
                             std::numeric_limits<float>::infinity(), -1.0f}) {
    bad = good;
    bad.scalers = {scaler};
    ExpectInvalid(codec->Decode(bad, absl::MakeSpan(out)),
                  "want a finite value >= 0");
  }
  bad = good;
  bad.num_summands = 2;  // a push layout with a pull's summand count
  ExpectInvalid(codec->Decode(bad, absl::MakeSpan(out)), "2 summands, want 1");
  bad = good;
  bad.data[3] = static_cast<char>(0xFF);  // codes 11
  ExpectInvalid(codec->Decode(bad, absl::MakeSpan(out)), "invalid code 11");
}

// ---------------------------------------------------------------------------
// Aggregation

struct Pushes {
  std::vector<std::vector<float>> gradients;
  std::vector<Payload> payloads;
};

Pushes MakePushes(const Codec& codec, uint64_t n, uint32_t workers,
                  float shared_scaler) {
  Pushes pushes;
  for (uint32_t w = 0; w < workers; ++w) {
    pushes.gradients.push_back(Gradient(n, 100 + w));
    pushes.payloads.push_back(
        Encode(codec, pushes.gradients.back(), Context(w, shared_scaler)));
  }
  return pushes;
}

Payload Aggregate(const Codec& codec, const Pushes& pushes, uint64_t n,
                  const std::vector<uint32_t>& order) {
  std::unique_ptr<Aggregation> aggregation =
      codec.NewAggregation(n, static_cast<uint32_t>(order.size()));
  for (const uint32_t w : order) {
    const absl::Status status = aggregation->Add(w, pushes.payloads[w]);
    EXPECT_TRUE(status.ok()) << status;
  }
  absl::StatusOr<Payload> pull = aggregation->Finish();
  EXPECT_TRUE(pull.ok()) << pull.status();
  return pull.ok() ? *std::move(pull) : Payload();
}

class TernGradAggregationTest
    : public ::testing::TestWithParam<std::tuple<uint64_t, Layout, Layout>> {};

TEST_P(TernGradAggregationTest, PullIsTheSharedScalerTimesTheMeanCode) {
  const auto [n, push_layout, pull_layout] = GetParam();
  const std::unique_ptr<Codec> codec =
      Make(CodecId::kTernGrad, push_layout, pull_layout);
  for (const uint32_t workers : {1u, 3u, 4u}) {
    const float s = 0.02f;
    const Pushes pushes = MakePushes(*codec, n, workers, s);
    std::vector<uint32_t> order(workers);
    std::iota(order.begin(), order.end(), 0);
    const Payload pull = Aggregate(*codec, pushes, n, order);
    EXPECT_EQ(pull.layout, pull_layout);
    EXPECT_EQ(pull.num_summands, workers);
    EXPECT_EQ(pull.scalers, std::vector<float>{s});
    EXPECT_EQ(pull.data.size(), PackedSumBytes(n, workers, pull_layout));

    // The sum of the pushes' codes, from the pushes' own decodes.
    std::vector<int32_t> sums(n, 0);
    for (const Payload& push : pushes.payloads) {
      const std::vector<float> decoded = Decode(*codec, push);
      for (uint64_t i = 0; i < n; ++i) {
        sums[i] += static_cast<int32_t>(std::lround(decoded[i] / s));
      }
    }
    const std::vector<float> average = Decode(*codec, pull);
    std::set<float> levels;
    for (uint64_t i = 0; i < n; ++i) {
      ASSERT_EQ(average[i], DecodeValue(sums[i], DecodeFactor(s, workers)));
      levels.insert(average[i]);
    }
    EXPECT_LE(levels.size(), 2 * workers + 1);

    // Any arrival order gives the same bytes.
    std::reverse(order.begin(), order.end());
    EXPECT_EQ(Aggregate(*codec, pushes, n, order).data, pull.data);
  }
}

INSTANTIATE_TEST_SUITE_P(
    SizesAndLayouts, TernGradAggregationTest,
    ::testing::Combine(::testing::Values(0, 1, 5, 64, 65, 1000, (1u << 20) + 3),
                       ::testing::Values(Layout::kTernary2Bit,
                                         Layout::kTernaryBase3),
                       ::testing::Values(Layout::kSumBits, Layout::kSumRadix)));

TEST(FloatAggregationTest, AverageIsTheSameForEveryArrivalOrder) {
  for (const CodecId id : {CodecId::kFp32, CodecId::kFp16}) {
    SCOPED_TRACE(CodecName(id));
    const std::unique_ptr<Codec> codec = Make(id);
    const uint64_t n = 4097;
    const Pushes pushes = MakePushes(*codec, n, 5, 0.0f);
    const Payload pull = Aggregate(*codec, pushes, n, {0, 1, 2, 3, 4});
    EXPECT_EQ(pull.num_summands, 5u);
    EXPECT_EQ(pull.layout, Layout::kRaw);
    for (const std::vector<uint32_t>& order :
         std::vector<std::vector<uint32_t>>{
             {4, 3, 2, 1, 0}, {2, 0, 4, 1, 3}, {1, 2, 3, 4, 0}}) {
      EXPECT_EQ(Aggregate(*codec, pushes, n, order).data, pull.data);
    }
    // The value: the fp32 sum in worker order, divided by N, then encoded.
    std::vector<float> want(n, 0.0f);
    for (const Payload& push : pushes.payloads) {
      const std::vector<float> values = Decode(*codec, push);
      for (uint64_t i = 0; i < n; ++i) want[i] += values[i];
    }
    for (float& value : want) value /= 5.0f;
    const std::vector<float> got = Decode(*codec, pull);
    for (uint64_t i = 0; i < n; ++i) {
      const float expected =
          id == CodecId::kFp16 ? HalfToFloat(FloatToHalf(want[i])) : want[i];
      ASSERT_EQ(got[i], expected) << i;
    }
  }
}

// A bad push is refused with nothing added, the aggregation keeps working,
// and the final pull equals the one without the bad push.
TEST(AggregationTest, RejectsBadPushesAndStaysUsable) {
  for (const CodecId id :
       {CodecId::kFp32, CodecId::kFp16, CodecId::kTernGrad}) {
    SCOPED_TRACE(CodecName(id));
    const std::unique_ptr<Codec> codec = Make(id);
    const uint64_t n = 301;
    const Pushes pushes = MakePushes(*codec, n, 3, 0.03f);
    const Payload want = Aggregate(*codec, pushes, n, {0, 1, 2});

    std::unique_ptr<Aggregation> aggregation = codec->NewAggregation(n, 3);
    ASSERT_TRUE(aggregation->Add(1, pushes.payloads[1]).ok());
    EXPECT_EQ(aggregation->Finish().status().code(),
              absl::StatusCode::kFailedPrecondition);

    std::vector<Payload> bad(10, pushes.payloads[0]);
    bad[0].codec = CodecId::kQsgd;
    bad[1].layout = Layout::kSumBits;
    bad[2].format_version = 0;
    bad[3].num_elements = n + 1;
    bad[4].data.pop_back();
    bad[5].num_summands = 2;
    bad[6].scalers.push_back(0.5f);
    bad[7].data[0] = static_cast<char>(0xFF);  // 11 codes; fp: still floats
    bad[8].scalers = {std::numeric_limits<float>::quiet_NaN()};
    bad[9].scalers = {0.5f};  // a scaler that is not the shared one
    for (size_t b = 0; b < bad.size(); ++b) {
      // Raw floats have no invalid bytes: that one is a ternary case only.
      if (b == 7 && id != CodecId::kTernGrad) continue;
      EXPECT_EQ(aggregation->Add(0, bad[b]).code(),
                absl::StatusCode::kInvalidArgument)
          << "bad push " << b;
    }
    // Worker 0 may still push, once; out-of-range workers never.
    ASSERT_TRUE(aggregation->Add(0, pushes.payloads[0]).ok());
    EXPECT_EQ(aggregation->Add(0, pushes.payloads[0]).code(),
              absl::StatusCode::kAlreadyExists);
    ExpectInvalid(aggregation->Add(3, pushes.payloads[2]), "out of range");
    ASSERT_TRUE(aggregation->Add(2, pushes.payloads[2]).ok());
    absl::StatusOr<Payload> pull = aggregation->Finish();
    ASSERT_TRUE(pull.ok()) << pull.status();
    EXPECT_EQ(pull->data, want.data);
    // The pull moved out (a retried pull is answered from the shard's
    // record of the step, never from the aggregation again).
    EXPECT_EQ(aggregation->Finish().status().code(),
              absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(aggregation->Add(1, pushes.payloads[1]).code(),
              absl::StatusCode::kAlreadyExists);
  }
}

TEST(AggregationTest, TernGradRefusesAPushInTheOtherLayout) {
  const std::unique_ptr<Codec> two_bit = Make(CodecId::kTernGrad);
  const std::unique_ptr<Codec> base3 =
      Make(CodecId::kTernGrad, Layout::kTernaryBase3);
  const Payload push = Encode(*base3, Gradient(50, 9), Context(0, 0.01f));
  ExpectInvalid(two_bit->NewAggregation(50, 2)->Add(0, push),
                "layout TERNARY_BASE3, want TERNARY_2BIT");
}

TEST(AggregationTest, TernGradAllZeroChunk) {
  const std::unique_ptr<Codec> codec = Make(CodecId::kTernGrad);
  const std::vector<float> zeros(77, 0.0f);
  std::unique_ptr<Aggregation> aggregation = codec->NewAggregation(77, 2);
  for (uint32_t w = 0; w < 2; ++w) {
    const Payload push = Encode(*codec, zeros, Context(w));
    EXPECT_EQ(push.scalers, std::vector<float>{0.0f});
    ASSERT_TRUE(aggregation->Add(w, push).ok());
  }
  const Payload pull = *aggregation->Finish();
  EXPECT_EQ(Decode(*codec, pull), zeros);
}

// ---------------------------------------------------------------------------
// Registry

TEST(RegistryTest, ParsesNamesBothWays) {
  for (const CodecId id :
       {CodecId::kFp32, CodecId::kFp16, CodecId::kTernGrad, CodecId::kQsgd}) {
    EXPECT_EQ(*ParseCodecName(CodecName(id)), id);
  }
  EXPECT_EQ(*ParseCodecName("terngrad"), CodecId::kTernGrad);
  ExpectInvalid(ParseCodecName("TernGrad").status(), "unknown codec");
  ExpectInvalid(ParseCodecName("").status(), "known: fp32, fp16, terngrad");
  ExpectInvalid(ParseCodecName("unspecified").status(), "unknown codec");
}

TEST(RegistryTest, BuildsEachCodecWithItsDefaults) {
  for (const CodecId id :
       {CodecId::kFp32, CodecId::kFp16, CodecId::kTernGrad}) {
    const std::unique_ptr<Codec> codec = Make(id);
    ASSERT_NE(codec, nullptr);
    EXPECT_EQ(codec->id(), id);
    EXPECT_EQ(codec->name(), CodecName(id));
    EXPECT_EQ(codec->Summable(), id == CodecId::kTernGrad);
  }
  const Payload push =
      Encode(*Make(CodecId::kTernGrad), Gradient(8, 1), Context(0));
  EXPECT_EQ(push.layout, Layout::kTernary2Bit);
}

TEST(RegistryTest, RejectsBadOptions) {
  CodecOptions options;
  options.id = CodecId::kFp32;
  options.push_layout = Layout::kTernary2Bit;
  ExpectInvalid(MakeCodec(options).status(), "no layout TERNARY_2BIT");
  options.id = CodecId::kTernGrad;  // push TERNARY_2BIT, default pull
  EXPECT_TRUE(MakeCodec(options).ok());
  options.pull_layout = Layout::kSumRadix;
  EXPECT_TRUE(MakeCodec(options).ok());
  options.push_layout = Layout::kSumBits;
  ExpectInvalid(MakeCodec(options).status(), "push layout SUM_BITS");
  options.push_layout = Layout::kUnspecified;
  options.pull_layout = Layout::kTernary2Bit;
  ExpectInvalid(MakeCodec(options).status(), "pull layout TERNARY_2BIT");
  options.pull_layout = Layout::kUnspecified;
  for (const float clip : {-1.0f, std::numeric_limits<float>::quiet_NaN()}) {
    options.clip = clip;
    ExpectInvalid(MakeCodec(options).status(), "clip");
  }
  options = CodecOptions();
  options.id = CodecId::kUnspecified;
  ExpectInvalid(MakeCodec(options).status(), "no codec with id 0");
  options.id = static_cast<CodecId>(1234);
  ExpectInvalid(MakeCodec(options).status(), "no codec with id 1234");
}

}  // namespace
}  // namespace tern::kernels
