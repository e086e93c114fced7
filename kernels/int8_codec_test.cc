// The int8 weight codec: the error bound at every size, the exact bytes of
// a small chunk, validation of everything a decoder reads, the shard's
// re-encoding aggregation and the registry entry.
#include "kernels/int8_codec.h"

#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/codec_registry.h"
#include "kernels/codec_test_util.h"

namespace tern::kernels {
namespace {

using codec_test::DecodedAverage;
using codec_test::ExpectInvalid;
using codec_test::ExpectShardEncoding;
using codec_test::Gaussian;

constexpr uint64_t kSizes[] = {0, 1, 31, 32, 33, 4096, (1u << 20) + 3};

// int8 draws no random numbers: the default context.
Payload Encode(const Codec& codec, absl::Span<const float> values) {
  return codec_test::Encode(codec, values, EncodeContext());
}

class Int8SizeTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(Int8SizeTest, RoundTripsWithinHalfAStep) {
  const Int8Codec codec;
  const std::vector<float> w = Gaussian(GetParam(), 11, 0.0f, 0.05f);
  const Payload payload = Encode(codec, w);
  EXPECT_EQ(payload.codec, CodecId::kInt8);
  EXPECT_EQ(payload.layout, Layout::kRaw);
  EXPECT_EQ(payload.num_elements, w.size());
  EXPECT_EQ(payload.num_summands, 1u);
  ASSERT_EQ(payload.scalers.size(), 1u);
  ASSERT_EQ(payload.data.size(), w.size());
  float max_abs = 0.0f;
  for (const float v : w) max_abs = std::max(max_abs, std::fabs(v));
  const float scale = payload.scalers[0];
  EXPECT_EQ(scale, max_abs / 127.0f);

  std::vector<float> out(w.size(), -7.0f);
  ASSERT_TRUE(codec.Decode(payload, absl::MakeSpan(out)).ok());
  bool saw_extreme = w.empty();
  for (size_t i = 0; i < w.size(); ++i) {
    const int code = static_cast<int8_t>(payload.data[i]);
    ASSERT_GE(code, -127);
    ASSERT_LE(code, 127);
    saw_extreme |= std::abs(code) == 127;
    // Half a step, plus the rounding of w / scale and of scale * q.
    ASSERT_LE(std::fabs(out[i] - w[i]), 0.5f * scale + 4e-7f * max_abs)
        << "element " << i;
  }
  EXPECT_TRUE(saw_extreme) << "the largest |w| must use code +-127";
}

INSTANTIATE_TEST_SUITE_P(Sizes, Int8SizeTest, ::testing::ValuesIn(kSizes));

TEST(Int8CodecTest, KnownBytes) {
  const Int8Codec codec;
  const std::vector<float> w = {1.0f, -0.3f, 0.0f, 0.6f, -1.0f};
  const Payload payload = Encode(codec, w);
  ASSERT_EQ(payload.data.size(), 5u);
  const int8_t want[] = {127, -38, 0, 76, -127};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(static_cast<int8_t>(payload.data[i]), want[i]) << i;
  }
  EXPECT_EQ(payload.scalers[0], 1.0f / 127.0f);
}

TEST(Int8CodecTest, DeterministicAndIgnoresTheContext) {
  const Int8Codec codec;
  const std::vector<float> w = Gaussian(1000, 3);
  EncodeContext other;
  other.stream = RandomStream{.seed = 9, .step = 4, .chunk = 2, .worker = 1};
  other.scaler = 5.0f;
  const Payload a = Encode(codec, w);
  absl::StatusOr<Payload> b = codec.Encode(w, other);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a.data, b->data);
  EXPECT_EQ(a.scalers, b->scalers);
}

TEST(Int8CodecTest, ZeroChunkHasScaleZero) {
  const Int8Codec codec;
  const std::vector<float> w(33, 0.0f);
  const Payload payload = Encode(codec, w);
  EXPECT_EQ(payload.scalers[0], 0.0f);
  EXPECT_EQ(payload.data, std::string(33, '\0'));
  std::vector<float> out(33, 1.0f);
  ASSERT_TRUE(codec.Decode(payload, absl::MakeSpan(out)).ok());
  for (const float v : out) EXPECT_EQ(v, 0.0f);
}

TEST(Int8CodecTest, NonFiniteValuesEncodeAsZeroAndLeaveTheScaleAlone) {
  const Int8Codec codec;
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> w = {0.5f, std::nanf(""), inf, -inf, -0.125f};
  const Payload payload = Encode(codec, w);
  EXPECT_EQ(payload.scalers[0], 0.5f / 127.0f);
  EXPECT_EQ(static_cast<int8_t>(payload.data[0]), 127);
  EXPECT_EQ(payload.data[1], 0);
  EXPECT_EQ(payload.data[2], 0);
  EXPECT_EQ(payload.data[3], 0);
  EXPECT_EQ(static_cast<int8_t>(payload.data[4]), -32);  // -31.75
}

// Reports the error the LPS's `int8` weights have on N(0, 1) weights
// (server/WEIGHTGRAD.md quotes it), and bounds it: a step of max|w| / 127
// with max|w| ~ 5 gives an rms error of ~ step / sqrt(12) ~ 1.1%.
TEST(Int8CodecTest, RelativeErrorOnStandardNormal) {
  const Int8Codec codec;
  const std::vector<float> w = Gaussian(1 << 20, 5);
  const Payload payload = Encode(codec, w);
  std::vector<float> out(w.size());
  ASSERT_TRUE(codec.Decode(payload, absl::MakeSpan(out)).ok());
  double err2 = 0, norm2 = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    err2 += (double{out[i]} - w[i]) * (double{out[i]} - w[i]);
    norm2 += double{w[i]} * w[i];
  }
  const double relative = std::sqrt(err2 / norm2);
  std::cout << "int8 relative L2 error on N(0,1), 2^20 elements: " << relative
            << "\n";
  EXPECT_GT(relative, 0.005);
  EXPECT_LT(relative, 0.02);
}

TEST(Int8CodecTest, DecodeRejectsWhatItCannotRead) {
  const Int8Codec codec;
  const Payload good = Encode(codec, Gaussian(10, 1));
  std::vector<float> out(10, 42.0f);
  const auto decode = [&](const Payload& p) {
    return codec.Decode(p, absl::MakeSpan(out));
  };
  ASSERT_TRUE(decode(good).ok());

  Payload bad = good;
  bad.codec = CodecId::kFp32;
  ExpectInvalid(decode(bad), "codec");
  bad = good;
  bad.format_version = 2;
  ExpectInvalid(decode(bad), "format version");
  bad = good;
  bad.num_elements = 11;
  ExpectInvalid(decode(bad), "elements");
  bad = good;
  bad.layout = Layout::kTernary2Bit;
  ExpectInvalid(decode(bad), "layout");
  bad = good;
  bad.num_summands = 0;
  ExpectInvalid(decode(bad), "0 summands");
  bad = good;
  bad.scalers = {};
  ExpectInvalid(decode(bad), "scalers");
  bad = good;
  bad.scalers = {0.1f, 0.1f};
  ExpectInvalid(decode(bad), "scalers");
  for (const float s :
       {-1.0f, std::nanf(""), std::numeric_limits<float>::infinity()}) {
    bad = good;
    bad.scalers = {s};
    ExpectInvalid(decode(bad), "scaler 0");
  }
  bad = good;
  bad.data.pop_back();
  ExpectInvalid(decode(bad), "has 9 bytes");
  bad = good;
  bad.data.push_back('\0');
  ExpectInvalid(decode(bad), "has 11 bytes");

  // -128 is outside the symmetric range; nothing is written before the
  // whole payload is checked.
  ASSERT_TRUE(decode(good).ok());
  const std::vector<float> before = out;
  bad = good;
  bad.data[7] = static_cast<char>(0x80);
  ExpectInvalid(decode(bad), "element 7 is -128");
  EXPECT_EQ(out, before);
}

TEST(Int8CodecTest, AggregationIsTheInt8OfTheAverage) {
  const Int8Codec codec;
  constexpr uint32_t kWorkers = 3;
  constexpr size_t kN = 257;
  std::vector<Payload> pushes;
  for (uint32_t w = 0; w < kWorkers; ++w) {
    pushes.push_back(Encode(codec, Gaussian(kN, 20 + w)));
  }
  std::unique_ptr<Aggregation> aggregation = codec.NewAggregation(kN, kWorkers);
  // Arrival order 2, 0, 1: the average is added in worker order anyway.
  for (const uint32_t w : {2u, 0u, 1u}) {
    ASSERT_TRUE(aggregation->Add(w, pushes[w]).ok());
  }
  EXPECT_EQ(aggregation->Add(1, pushes[1]).code(),
            absl::StatusCode::kAlreadyExists);
  absl::StatusOr<Payload> pull = aggregation->Finish();
  ASSERT_TRUE(pull.ok()) << pull.status();
  EXPECT_EQ(pull->num_summands, kWorkers);
  const std::vector<float> average = DecodedAverage(codec, pushes);
  ExpectShardEncoding(codec, *pull, average);
  ASSERT_EQ(pull->scalers.size(), 1u);
  const std::vector<float> out = codec_test::Decode(codec, *pull);
  for (size_t i = 0; i < kN; ++i) {
    EXPECT_NEAR(out[i], average[i], 0.5f * pull->scalers[0] * 1.0001f);
  }
}

TEST(Int8CodecTest, Registry) {
  CodecOptions options;
  options.id = CodecId::kInt8;
  absl::StatusOr<std::unique_ptr<Codec>> codec = MakeCodec(options);
  ASSERT_TRUE(codec.ok()) << codec.status();
  EXPECT_EQ((*codec)->id(), CodecId::kInt8);
  EXPECT_EQ((*codec)->name(), "int8");
  EXPECT_FALSE((*codec)->Summable());
  EXPECT_EQ(*ParseCodecName("int8"), CodecId::kInt8);
  options.push_layout = Layout::kRaw;
  EXPECT_TRUE(MakeCodec(options).ok());
  options.push_layout = Layout::kTernary2Bit;
  ExpectInvalid(MakeCodec(options).status(), "no layout TERNARY_2BIT");
}

}  // namespace
}  // namespace tern::kernels
