#include "core/payload_validation.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/codec.h"
#include "kernels/codec_options.h"
#include "kernels/codec_registry.h"
#include "kernels/float_aggregation.h"

namespace tern::core {
namespace {

using ::tern::kernels::CodecId;
using ::tern::kernels::Layout;
using ::testing::HasSubstr;

std::unique_ptr<kernels::Codec> Codec(CodecId id) {
  kernels::CodecOptions options;
  options.id = id;
  if (id == CodecId::kFp32) {
    options.push_layout = options.pull_layout = Layout::kRaw;
  }
  auto codec = kernels::MakeCodec(options);
  EXPECT_TRUE(codec.ok()) << codec.status();
  return *std::move(codec);
}

kernels::Payload TernPush(float scaler) {
  kernels::EncodeContext context;
  context.scaler = scaler;
  auto payload = Codec(CodecId::kTernGrad)
                     ->Encode(std::vector<float>{0.5f, -1, 0, 1, 0.25f},
                              context);
  EXPECT_TRUE(payload.ok());
  return *payload;
}

PayloadExpectation TernExpectation(float shared) {
  PayloadExpectation expect;
  expect.codec = CodecId::kTernGrad;
  expect.layout = TernPush(shared).layout;
  expect.num_elements = 5;
  expect.shared_scaler = shared;
  expect.reader = "this shard";
  return expect;
}

TEST(ValidatePayloadTest, AcceptsAGoodPush) {
  EXPECT_TRUE(ValidatePayload(TernPush(1), TernExpectation(1)).ok());
}

struct Bad {
  std::string name;
  std::function<void(kernels::Payload*)> change;
  std::string expected;
};

class ValidatePayloadBadTest : public ::testing::TestWithParam<Bad> {};

TEST_P(ValidatePayloadBadTest, NamesTheField) {
  kernels::Payload payload = TernPush(1);
  GetParam().change(&payload);
  const absl::Status status = ValidatePayload(payload, TernExpectation(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr(GetParam().expected));
}

INSTANTIATE_TEST_SUITE_P(
    Fields, ValidatePayloadBadTest,
    ::testing::Values(
        Bad{"Codec", [](auto* p) { p->codec = CodecId::kFp32; },
            "codec fp32, but the chunk travels as terngrad"},
        Bad{"Layout", [](auto* p) { p->layout = Layout::kRaw; },
            "layout RAW, but the run sends the chunk as"},
        Bad{"FormatVersion", [](auto* p) { p->format_version = 2; },
            "format version 2 is not supported (this shard reads 1)"},
        Bad{"Elements", [](auto* p) { p->num_elements = 9; },
            "9 elements, but the chunk has 5"},
        Bad{"Summands", [](auto* p) { p->num_summands = 2; },
            "num_summands 2, but a push holds one worker's values"},
        Bad{"NanScaler",
            [](auto* p) {
              p->scalers[0] = std::numeric_limits<float>::quiet_NaN();
            },
            "scaler nan is not finite"},
        Bad{"HugeScaler", [](auto* p) { p->scalers[0] = 3.4e38f; },
            "scaler is 3.4e+38, beyond 1e+30 (the magnitude rule"},
        Bad{"OtherScaler", [](auto* p) { p->scalers[0] = 0.5f; },
            "scaler 0.5 differs from the shared scaler 1 of this step"},
        Bad{"NoScaler", [](auto* p) { p->scalers.clear(); },
            "scaler (none) differs"},
        Bad{"TwoScalers", [](auto* p) { p->scalers.push_back(1); },
            "differs from the shared scaler"}),
    [](const auto& info) { return info.param.name; });

TEST(ValidatePayloadTest, ANegativeSharedScalerIsRefusedByTheKernelsRule) {
  kernels::Payload payload = TernPush(1);
  payload.scalers[0] = -1;
  const absl::Status status = ValidatePayload(payload, TernExpectation(-1));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("want a finite value >= 0"));
}

TEST(DecodeFiniteTest, DecodesOnceAndRefusesNanAndInf) {
  const auto fp32 = Codec(CodecId::kFp32);
  const std::vector<float> values = {1, 2, 3, 4};
  kernels::Payload payload = *fp32->Encode(values, {});
  std::vector<float> out(4);
  ASSERT_TRUE(DecodeFinite(*fp32, payload, absl::MakeSpan(out)).ok());
  EXPECT_EQ(out, values);
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::infinity()}) {
    kernels::Payload broken = payload;
    std::memcpy(&broken.data[2 * sizeof(float)], &bad, sizeof(float));
    const absl::Status status =
        DecodeFinite(*fp32, broken, absl::MakeSpan(out));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr("element 2 is"));
    EXPECT_THAT(status.message(), HasSubstr("NaN/Inf gradients are refused"));
  }
  kernels::Payload truncated = payload;
  truncated.data.pop_back();
  EXPECT_EQ(DecodeFinite(*fp32, truncated, absl::MakeSpan(out)).code(),
            absl::StatusCode::kInvalidArgument);
}

// The magnitude rule: finite and |x| <= 1e30, both ends inclusive.
TEST(MagnitudeTest, TheBoundIsInclusiveAndRefusesNanAndInf) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float above = std::nextafter(kMaxMagnitude, kInf);
  for (const float good : {0.0f, -0.0f, 1e-45f, 1.0f, 1e30f, -1e30f}) {
    EXPECT_TRUE(WithinMagnitude(good)) << good;
    EXPECT_TRUE(CheckMagnitude("x", good).ok()) << good;
  }
  for (const float bad : {above, -above, std::numeric_limits<float>::max(),
                          kInf, -kInf, std::numeric_limits<float>::quiet_NaN()}) {
    EXPECT_FALSE(WithinMagnitude(bad)) << bad;
    EXPECT_EQ(CheckMagnitude("x", bad).code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_EQ(CheckMagnitude("element 3", -3e38f).message(),
            "element 3 is -3e+38, beyond 1e+30 (the magnitude rule: no value "
            "or scaler a peer sends may exceed 1e30 in magnitude, far beyond "
            "any sane run; see global/README.md)");
  EXPECT_THAT(CheckMagnitude("element 3", kInf).message(),
              HasSubstr("element 3 is inf (NaN/Inf gradients are refused"));
}

// The scan runs 16 values at a time and then one by one: every bad kind at
// every position of lengths around those blocks (and a bad value after an
// earlier one) gives the index the plain loop gives.
TEST(MagnitudeTest, FirstBeyondMagnitudeFindsTheFirstAtEveryPosition) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float bads[] = {std::nextafter(kMaxMagnitude, kInf), -kInf, kInf,
                        std::numeric_limits<float>::quiet_NaN(),
                        -std::numeric_limits<float>::quiet_NaN()};
  for (const size_t n : {0, 1, 15, 16, 17, 31, 32, 33, 100}) {
    std::vector<float> values(n, -1e30f);
    for (size_t i = 0; i < n; i += 2) values[i] = 1e30f;
    EXPECT_EQ(FirstBeyondMagnitude(values), n) << n;
    for (size_t at = 0; at < n; ++at) {
      for (const float bad : bads) {
        std::vector<float> broken = values;
        broken[at] = bad;
        if (at + 3 < n) broken[at + 3] = kInf;  // a later one is not reported
        EXPECT_EQ(FirstBeyondMagnitude(broken), at) << n << " " << bad;
      }
    }
  }
  // Unaligned: a span starting one float into a vector.
  std::vector<float> shifted(40, 0.5f);
  shifted[20] = kInf;
  EXPECT_EQ(FirstBeyondMagnitude(absl::MakeSpan(shifted).subspan(1)), 19u);
}

TEST(DecodeFiniteTest, RefusesValuesBeyondTheMagnitudeRule) {
  const auto fp32 = Codec(CodecId::kFp32);
  std::vector<float> out(3);
  const std::vector<float> edge = {1e30f, -1e30f, 0};
  ASSERT_TRUE(
      DecodeFinite(*fp32, *fp32->Encode(edge, {}), absl::MakeSpan(out)).ok());
  EXPECT_EQ(out, edge);
  const absl::Status status = DecodeFinite(
      *fp32, *fp32->Encode(std::vector<float>{1, 2, 3.4e38f}, {}),
      absl::MakeSpan(out));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("element 2 is 3.4e+38, beyond"));
  // A ternary chunk decodes to scaler * code: a scaler within the bound
  // gives values within it.
  kernels::Payload ternary = TernPush(1e30f);
  std::vector<float> five(5);
  EXPECT_TRUE(ValidatePayload(ternary, TernExpectation(1e30f)).ok());
  EXPECT_TRUE(DecodeFinite(*Codec(CodecId::kTernGrad), ternary,
                           absl::MakeSpan(five))
                  .ok());
}

TEST(DecodeFiniteTest, RefusesCorruptTernaryCodes) {
  const auto codec = Codec(CodecId::kTernGrad);
  kernels::Payload payload = TernPush(1);
  payload.data[0] = static_cast<char>(0xff);  // 0b11 is no ternary code
  std::vector<float> out(5);
  EXPECT_EQ(DecodeFinite(*codec, payload, absl::MakeSpan(out)).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tern::core

namespace tern::core {
namespace {

// Decode-once: a shard that decoded a push with DecodeFinite and adds the
// values (Aggregation::AddDecoded) pulls the very bytes of one that adds
// the payload (Aggregation::Add, which decodes it again), in any order.
TEST(DecodeOnceTest, AddDecodedPullsTheSameBytesAsAdd) {
  for (const CodecId id : {CodecId::kFp32, CodecId::kFp16, CodecId::kOneBit}) {
    const auto codec = Codec(id);
    ASSERT_FALSE(codec->Summable());
    constexpr uint32_t kWorkers = 3;
    constexpr uint64_t kElements = 37;
    std::vector<kernels::Payload> pushes;
    for (uint32_t w = 0; w < kWorkers; ++w) {
      std::vector<float> values(kElements);
      for (uint64_t j = 0; j < kElements; ++j) {
        values[j] = std::sin(0.7f * j + w) * (w + 1);
      }
      kernels::EncodeContext context;
      context.stream.worker = w;
      pushes.push_back(*codec->Encode(values, context));
    }
    auto by_payload = codec->NewAggregation(kElements, kWorkers);
    auto aggregation = codec->NewAggregation(kElements, kWorkers);
    auto* by_values =
        dynamic_cast<kernels::FloatAggregation*>(aggregation.get());
    ASSERT_NE(by_values, nullptr) << "non-summable codecs add floats";
    for (const uint32_t w : {2u, 0u, 1u}) {
      ASSERT_TRUE(by_payload->Add(w, pushes[w]).ok());
      kernels::DecodedValues decoded(kElements);
      ASSERT_TRUE(
          DecodeFinite(*codec, pushes[w], absl::MakeSpan(decoded)).ok());
      ASSERT_TRUE(by_values->AddDecoded(w, std::move(decoded)).ok());
    }
    EXPECT_EQ(
        by_values->AddDecoded(0, kernels::DecodedValues(kElements)).code(),
        absl::StatusCode::kAlreadyExists);
    const auto a = by_payload->Finish();
    const auto b = by_values->Finish();
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->data, b->data) << kernels::CodecName(id);
    EXPECT_EQ(a->scalers, b->scalers) << kernels::CodecName(id);
  }
  const auto terngrad = Codec(CodecId::kTernGrad);
  EXPECT_EQ(dynamic_cast<kernels::FloatAggregation*>(
                terngrad->NewAggregation(4, 1).get()),
            nullptr)
      << "summable codecs add their codes";
}

}  // namespace
}  // namespace tern::core
