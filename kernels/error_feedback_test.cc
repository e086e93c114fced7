// ErrorFeedback around a fake codec whose rounding error is known exactly,
// and around every codec of the registry: nothing a push drops is lost
// (sum of the decoded pushes + the last residual = sum of the gradients),
// the residual of an error-feedback codec stays bounded, and the saved
// state is a validated, versioned record.
#include "kernels/error_feedback.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "common/philox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/codec_options.h"
#include "kernels/codec_registry.h"

namespace tern::kernels {
namespace {

using ::testing::HasSubstr;

constexpr double kUnitRoundoff = 1.0 / (1 << 24);  // float, round to nearest

// A uniform value in [-1, 1) for element i of `stream`.
float Uniform(const RandomStream& stream, uint64_t i) {
  const PhiloxCounter words = RandomWords(stream, static_cast<uint32_t>(i / 4));
  return 2.0f * UniformFloat(words.v[i % 4]) - 1.0f;
}

std::vector<float> UniformVector(size_t n, const RandomStream& stream,
                                 float scale) {
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = scale * Uniform(stream, i);
  return values;
}

// ---------------------------------------------------------------------------
// A fake codec: every value rounded to the nearest multiple of `step`, sent
// as int32 multiples (RAW layout, codec id of the caller's choice). Its
// rounding error is at most step / 2, so error feedback around it keeps
// |residual| <= step / 2 exactly. Knobs break it on purpose.

struct FakeOptions {
  CodecId id = CodecId::kOneBit;
  float step = 0.5f;
  bool decode_fails = false;
  float decode_sign = 1.0f;  // -1: decodes to the opposite value
};

class FakeCodec final : public Codec {
 public:
  explicit FakeCodec(const FakeOptions& options) : options_(options) {}

  CodecId id() const override { return options_.id; }
  std::string name() const override { return "fake"; }
  bool Summable() const override { return false; }
  bool UsesErrorFeedback() const override { return true; }

  absl::StatusOr<Payload> Encode(absl::Span<const float> values,
                                 const EncodeContext&) const override {
    Payload payload;
    payload.codec = options_.id;
    payload.layout = Layout::kRaw;
    payload.num_elements = values.size();
    for (size_t i = 0; i < values.size(); ++i) {
      const float multiple = std::nearbyint(values[i] / options_.step);
      if (!(std::abs(multiple) < 2e9f)) {
        return absl::InvalidArgumentError(
            absl::StrFormat("fake: value %d is %g", i, values[i]));
      }
      const int32_t code = static_cast<int32_t>(multiple);
      payload.data.append(reinterpret_cast<const char*>(&code), 4);
    }
    return payload;
  }

  absl::Status Decode(const Payload& payload,
                      absl::Span<float> out) const override {
    if (options_.decode_fails) return absl::InvalidArgumentError("fake: no");
    if (payload.num_elements != out.size() ||
        payload.data.size() != 4 * out.size()) {
      return absl::InvalidArgumentError("fake: wrong size");
    }
    for (size_t i = 0; i < out.size(); ++i) {
      int32_t code;
      std::memcpy(&code, payload.data.data() + 4 * i, 4);
      out[i] = options_.decode_sign * options_.step * static_cast<float>(code);
    }
    return absl::OkStatus();
  }

  using Codec::NewAggregation;
  std::unique_ptr<Aggregation> NewAggregation(
      uint64_t, uint32_t, const AggregationContext&) const override {
    return nullptr;  // never used here
  }

 private:
  const FakeOptions options_;
};

ErrorFeedback MakeFake(const FakeOptions& options = FakeOptions()) {
  return ErrorFeedback(std::make_unique<FakeCodec>(options));
}

EncodeContext Context(uint32_t step, uint32_t chunk) {
  EncodeContext context;
  context.stream =
      RandomStream{.seed = 11, .step = step, .chunk = chunk, .worker = 3};
  return context;
}

std::vector<float> ResidualOf(const ErrorFeedback& feedback, uint32_t key) {
  absl::StatusOr<absl::Span<const float>> residual = feedback.Residual(key);
  EXPECT_TRUE(residual.ok()) << residual.status();
  if (!residual.ok()) return {};
  return std::vector<float>(residual->begin(), residual->end());
}

// Bitwise equality, so that -0.0 and NaN payloads count.
bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), 4 * a.size()) == 0);
}

// One compensate + encode step; returns the payload.
Payload Step(ErrorFeedback& feedback, uint32_t key, std::vector<float> values,
             const EncodeContext& context) {
  EXPECT_TRUE(feedback.Compensate(key, absl::MakeSpan(values)).ok());
  absl::StatusOr<Payload> payload =
      feedback.EncodeCompensated(key, values, context);
  EXPECT_TRUE(payload.ok()) << payload.status();
  return payload.ok() ? *std::move(payload) : Payload();
}

// ---------------------------------------------------------------------------
// Registration, compensation and the residual

TEST(ErrorFeedbackTest, RegisterCreatesAZeroResidual) {
  ErrorFeedback feedback = MakeFake();
  ASSERT_TRUE(feedback.Register(4, 5).ok());
  EXPECT_EQ(ResidualOf(feedback, 4), std::vector<float>(5, 0.0f));
  EXPECT_TRUE(feedback.Register(4, 5).ok());  // same size: nothing changes
  const absl::Status status = feedback.Register(4, 6);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("chunk 4 is registered with 5 elements, not 6"));
  EXPECT_TRUE(feedback.Register(5, 0).ok());
  EXPECT_TRUE(ResidualOf(feedback, 5).empty());
  EXPECT_EQ(feedback.codec().name(), "fake");
}

TEST(ErrorFeedbackTest, UnknownChunksAndWrongLengthsAreRefused) {
  ErrorFeedback feedback = MakeFake();
  ASSERT_TRUE(feedback.Register(1, 3).ok());
  std::vector<float> values = {0.1f, 0.2f, 0.3f};
  EXPECT_EQ(feedback.Compensate(2, absl::MakeSpan(values)).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(
      feedback.EncodeCompensated(2, values, Context(0, 2)).status().code(),
      absl::StatusCode::kNotFound);
  EXPECT_EQ(feedback.Residual(2).status().code(), absl::StatusCode::kNotFound);
  std::vector<float> longer = {0.1f, 0.2f, 0.3f, 0.4f};
  EXPECT_EQ(feedback.Compensate(1, absl::MakeSpan(longer)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      feedback.EncodeCompensated(1, longer, Context(0, 1)).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(values, (std::vector<float>{0.1f, 0.2f, 0.3f}));  // untouched
}

TEST(ErrorFeedbackTest, ResidualIsWhatThePushDidNotCarry) {
  ErrorFeedback feedback = MakeFake();
  ASSERT_TRUE(feedback.Register(0, 4).ok());
  // 0.3 -> 0.5, -0.2 -> -0, 1.1 -> 1, -0.8 -> -1.
  const Payload first =
      Step(feedback, 0, {0.3f, -0.2f, 1.1f, -0.8f}, Context(0, 0));
  EXPECT_EQ(first.num_elements, 4u);
  std::vector<float> residual = ResidualOf(feedback, 0);
  const std::vector<float> want = {0.3f - 0.5f, -0.2f, 1.1f - 1.0f,
                                   -0.8f + 1.0f};
  EXPECT_EQ(residual, want);
  // Compensate adds the residual and leaves it in place.
  std::vector<float> values = {0.0f, 0.0f, 0.0f, 0.0f};
  ASSERT_TRUE(feedback.Compensate(0, absl::MakeSpan(values)).ok());
  EXPECT_EQ(values, want);
  EXPECT_EQ(ResidualOf(feedback, 0), want);
  // A value of 0.45 with residual 0.1: 0.55 is sent as 0.5.
  values = {0.45f + want[0], want[1], want[2], want[3]};
  absl::StatusOr<Payload> second =
      feedback.EncodeCompensated(0, values, Context(1, 0));
  ASSERT_TRUE(second.ok());
  std::vector<float> decoded(4);
  ASSERT_TRUE(feedback.codec().Decode(*second, absl::MakeSpan(decoded)).ok());
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(ResidualOf(feedback, 0)[i], values[i] - decoded[i]) << i;
  }
}

TEST(ErrorFeedbackTest, FailuresLeaveTheResidual) {
  ErrorFeedback feedback = MakeFake();
  ASSERT_TRUE(feedback.Register(0, 3).ok());
  Step(feedback, 0, {0.3f, 0.1f, -0.4f}, Context(0, 0));
  const std::vector<float> before = ResidualOf(feedback, 0);
  ASSERT_FALSE(before.empty());

  const float inf = std::numeric_limits<float>::infinity();
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), inf, -inf}) {
    const std::vector<float> values = {0.1f, bad, 0.2f};
    const absl::Status status =
        feedback.EncodeCompensated(0, values, Context(1, 0)).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()),
                HasSubstr("chunk 0: compensated value 1 is"));
    EXPECT_TRUE(SameBits(ResidualOf(feedback, 0), before));
  }
  // The inner codec refuses (its int32 codes overflow).
  EXPECT_EQ(feedback.EncodeCompensated(0, {1e30f, 0.0f, 0.0f}, Context(1, 0))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(SameBits(ResidualOf(feedback, 0), before));

  // A codec that cannot decode its own push.
  FakeOptions broken;
  broken.decode_fails = true;
  ErrorFeedback no_decode = MakeFake(broken);
  ASSERT_TRUE(no_decode.Register(0, 2).ok());
  EXPECT_EQ(no_decode.EncodeCompensated(0, {1.0f, 2.0f}, Context(0, 0))
                .status()
                .code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(ResidualOf(no_decode, 0), std::vector<float>(2, 0.0f));

  // A residual that would overflow: the push decodes to minus the value.
  FakeOptions flipped;
  flipped.step = 1e37f;
  flipped.decode_sign = -1.0f;
  ErrorFeedback overflow = MakeFake(flipped);
  ASSERT_TRUE(overflow.Register(0, 2).ok());
  const absl::Status status =
      overflow.EncodeCompensated(0, {1.0f, 3e38f}, Context(0, 0)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("element 1 overflows"));
  EXPECT_EQ(ResidualOf(overflow, 0), std::vector<float>(2, 0.0f));
}

// Chunks are independent: a step of one never touches another's residual.
TEST(ErrorFeedbackTest, ChunksKeepTheirOwnResiduals) {
  ErrorFeedback feedback = MakeFake();
  ASSERT_TRUE(feedback.Register(0, 2).ok());
  ASSERT_TRUE(feedback.Register(9, 3).ok());
  Step(feedback, 0, {0.3f, 0.1f}, Context(0, 0));
  EXPECT_EQ(ResidualOf(feedback, 9), std::vector<float>(3, 0.0f));
  Step(feedback, 9, {0.2f, 0.2f, 0.2f}, Context(0, 9));
  EXPECT_EQ(ResidualOf(feedback, 0), (std::vector<float>{0.3f - 0.5f, 0.1f}));
  EXPECT_EQ(ResidualOf(feedback, 9), std::vector<float>(3, 0.2f));
}

// ---------------------------------------------------------------------------
// The conservation law, over T steps of random gradients.
//
// In exact arithmetic r_T = sum_t g_t - sum_t d_t (d_t the decoded push).
// In floats, c_t = fl(g_t + r_{t-1}) and r_t = fl(c_t - d_t) each add one
// rounding of at most u |result| (u = 2^-24), so
//   |sum_t d_t + r_T - sum_t g_t| <= u * sum_t (|c_t| + |r_t|) * (1 + u),
// computed per element next to the sums, which are kept in double.

struct Conservation {
  std::vector<double> gradient_sum, decoded_sum, bound;

  explicit Conservation(size_t n)
      : gradient_sum(n, 0.0), decoded_sum(n, 0.0), bound(n, 0.0) {}

  // One step: g, the compensated c, the decoded push d, the new residual r.
  void Add(const std::vector<float>& g, const std::vector<float>& c,
           const std::vector<float>& d, const std::vector<float>& r) {
    for (size_t i = 0; i < g.size(); ++i) {
      gradient_sum[i] += g[i];
      decoded_sum[i] += d[i];
      bound[i] += kUnitRoundoff * (1 + kUnitRoundoff) *
                  (std::abs(double{c[i]}) + std::abs(double{r[i]}));
    }
  }

  // Asserts the law for the residual r_T; returns the largest error.
  double Check(const std::vector<float>& residual) const {
    double worst = 0;
    for (size_t i = 0; i < residual.size(); ++i) {
      const double error =
          std::abs(decoded_sum[i] + residual[i] - gradient_sum[i]);
      // The double sums add at most ~T * 2^-53 relative; 1e-12 absolute
      // covers them at these magnitudes.
      EXPECT_LE(error, bound[i] + 1e-12) << "element " << i;
      if (error > bound[i] + 1e-12) return error;
      worst = std::max(worst, error);
    }
    return worst;
  }
};

double Norm2(const std::vector<float>& values) {
  double sum = 0;
  for (const float v : values) sum += double{v} * v;
  return std::sqrt(sum);
}

double Norm2(const std::vector<double>& values) {
  double sum = 0;
  for (const double v : values) sum += v * v;
  return std::sqrt(sum);
}

TEST(ErrorFeedbackTest, FakeCodecConservesAndStaysWithinHalfAStep) {
  ErrorFeedback feedback = MakeFake();
  const size_t n = 1000;
  ASSERT_TRUE(feedback.Register(2, n).ok());
  Conservation law(n);
  for (uint32_t t = 0; t < 200; ++t) {
    const EncodeContext context = Context(t, 2);
    const std::vector<float> g = UniformVector(n, context.stream, 0.7f);
    std::vector<float> c = g;
    ASSERT_TRUE(feedback.Compensate(2, absl::MakeSpan(c)).ok());
    absl::StatusOr<Payload> push = feedback.EncodeCompensated(2, c, context);
    ASSERT_TRUE(push.ok());
    std::vector<float> d(n);
    ASSERT_TRUE(feedback.codec().Decode(*push, absl::MakeSpan(d)).ok());
    const std::vector<float> r = ResidualOf(feedback, 2);
    for (const float value : r) ASSERT_LE(std::abs(value), 0.25f);
    law.Add(g, c, d, r);
  }
  law.Check(ResidualOf(feedback, 2));
}

// Every codec of the registry, wrapped. The law holds for any codec; the
// residual must stay bounded for the codecs that rely on error feedback.
//
// Gradients: g_t = tau * (m + u_t) / 2 per element, m in [-1, 1] fixed (a
// drift, as real gradients have) and u_t in [-1, 1] fresh each step, so
// |g| <= tau (the threshold codec's residual then stays below tau, Strom
// 2015) and a codec that sent nothing would see its residual grow linearly.
// "Bounded" is then checked two ways after T = 1000 steps: the residual no
// longer grows (its largest norm over the last half of the run is at most
// 1.5x its largest over the second quarter; linear growth gives 2x), and
// the pushes carried most of the drift (|r_T| <= 0.3 |sum g|).

struct ConservationCase {
  CodecId id;
  uint64_t group_size;
};

void PrintTo(const ConservationCase& param, std::ostream* out) {
  *out << CodecName(param.id) << ", group_size " << param.group_size;
}

class RegisteredCodecTest : public ::testing::TestWithParam<ConservationCase> {
};

TEST_P(RegisteredCodecTest, ConservesAndStaysBounded) {
  const ConservationCase param = GetParam();
  CodecOptions options;
  options.id = param.id;
  absl::StatusOr<std::unique_ptr<Codec>> codec = MakeCodec(options);
  if (codec.status().code() == absl::StatusCode::kUnimplemented) {
    GTEST_SKIP() << "codec " << CodecName(param.id)
                 << " is not built yet: " << codec.status();
  }
  ASSERT_TRUE(codec.ok()) << codec.status();
  const bool uses_feedback = (*codec)->UsesErrorFeedback();
  ErrorFeedback feedback(*std::move(codec));

  const size_t n = 4096;
  const uint32_t steps = 1000;
  const uint32_t key = 6;
  ASSERT_TRUE(feedback.Register(key, n).ok());
  const float scale = options.tau / 2;
  const std::vector<float> drift =
      UniformVector(n, RandomStream{.seed = 99, .chunk = key}, 1.0f);
  Conservation law(n);
  double quarter_norm = 0, second_half_norm = 0;
  for (uint32_t t = 0; t < steps; ++t) {
    EncodeContext context = Context(t, key);
    context.group_size = param.group_size;
    std::vector<float> g = UniformVector(n, context.stream, 1.0f);
    for (size_t i = 0; i < n; ++i) g[i] = scale * (drift[i] + g[i]);
    std::vector<float> c = g;
    ASSERT_TRUE(feedback.Compensate(key, absl::MakeSpan(c)).ok());
    absl::StatusOr<Payload> push = feedback.EncodeCompensated(key, c, context);
    ASSERT_TRUE(push.ok()) << "step " << t << ": " << push.status();
    std::vector<float> d(n);
    ASSERT_TRUE(feedback.codec().Decode(*push, absl::MakeSpan(d)).ok());
    const std::vector<float> r = ResidualOf(feedback, key);
    law.Add(g, c, d, r);
    const double norm = Norm2(r);
    ASSERT_TRUE(std::isfinite(norm)) << "step " << t;
    if (t >= steps / 4 && t < steps / 2) {
      quarter_norm = std::max(quarter_norm, norm);
    }
    if (t >= steps / 2) second_half_norm = std::max(second_half_norm, norm);
  }
  const std::vector<float> residual = ResidualOf(feedback, key);
  const double worst = law.Check(residual);
  const double carried = Norm2(residual) / Norm2(law.gradient_sum);
  std::printf(
      "%s, group_size %llu: |sum d + r - sum g| <= %.3g; |r_T| / |sum g| = "
      "%.3f; max |r| over steps [250, 500) %.3g, [500, 1000) %.3g\n",
      CodecName(param.id), static_cast<unsigned long long>(param.group_size),
      worst, carried, quarter_norm, second_half_norm);
  if (uses_feedback) {
    EXPECT_LE(second_half_norm, 1.5 * quarter_norm);
    EXPECT_LE(carried, 0.3);
  }
  if (param.id == CodecId::kThreshold) {
    // Strom's bound: with |g| <= tau, |r| >= tau is sent and shrinks by
    // tau, so |r| stays below tau (plus a rounding).
    for (const float value : residual) {
      ASSERT_LE(std::abs(value), options.tau * (1 + 1e-6f));
    }
  }
}

std::vector<ConservationCase> AllCases() {
  std::vector<ConservationCase> cases;
  for (uint32_t id = 1; id <= static_cast<uint32_t>(CodecId::kInt8); ++id) {
    for (const uint64_t group_size : {uint64_t{0}, uint64_t{64}}) {
      cases.push_back({static_cast<CodecId>(id), group_size});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(
    Codecs, RegisteredCodecTest, ::testing::ValuesIn(AllCases()),
    [](const ::testing::TestParamInfo<ConservationCase>& info) {
      return absl::StrFormat("%s_group%d", CodecName(info.param.id),
                             info.param.group_size);
    });

// ---------------------------------------------------------------------------
// SaveState / RestoreState

// Residuals of three chunks (one empty), after a few steps.
ErrorFeedback Trained(const FakeOptions& options = FakeOptions()) {
  ErrorFeedback feedback = MakeFake(options);
  EXPECT_TRUE(feedback.Register(7, 5).ok());
  EXPECT_TRUE(feedback.Register(1, 0).ok());
  EXPECT_TRUE(feedback.Register(300, 33).ok());
  for (uint32_t t = 0; t < 3; ++t) {
    for (const uint32_t key : {7u, 300u}) {
      const EncodeContext context = Context(t, key);
      const size_t n = key == 7 ? 5 : 33;
      Step(feedback, key, UniformVector(n, context.stream, 2.0f), context);
    }
  }
  return feedback;
}

// A fresh wrapper with the same chunks, all residuals zero.
ErrorFeedback SameChunks(const FakeOptions& options = FakeOptions()) {
  ErrorFeedback feedback = MakeFake(options);
  EXPECT_TRUE(feedback.Register(300, 33).ok());
  EXPECT_TRUE(feedback.Register(1, 0).ok());
  EXPECT_TRUE(feedback.Register(7, 5).ok());
  return feedback;
}

TEST(ErrorFeedbackStateTest, RoundTripsBitForBit) {
  const ErrorFeedback trained = Trained();
  const std::string state = trained.SaveState();
  EXPECT_EQ(state.size(), 16 + 3 * 12 + 4 * (5 + 33));
  ErrorFeedback restored = SameChunks();
  // Registration order does not change the bytes.
  EXPECT_EQ(restored.SaveState().size(), state.size());
  ASSERT_TRUE(restored.RestoreState(state).ok());
  for (const uint32_t key : {1u, 7u, 300u}) {
    EXPECT_TRUE(SameBits(ResidualOf(restored, key), ResidualOf(trained, key)))
        << key;
  }
  EXPECT_EQ(restored.SaveState(), state);
  EXPECT_NE(ResidualOf(restored, 300), std::vector<float>(33, 0.0f));
}

// The format itself, pinned: a reader elsewhere (or a later version) relies
// on it.
TEST(ErrorFeedbackStateTest, FormatIsLittleEndianByKey) {
  ErrorFeedback feedback = MakeFake();  // codec id 4
  ASSERT_TRUE(feedback.Register(0x0102, 1).ok());
  ASSERT_TRUE(feedback.Register(2, 0).ok());
  // 1.25 / 0.5 = 2.5 rounds to 2 (ties to even): sent 1, residual 0.25.
  Step(feedback, 0x0102, {1.25f}, Context(0, 0));
  const std::string want(
      "TNEF"
      "\x01\x00\x00\x00"                  // version
      "\x04\x00\x00\x00"                  // codec id
      "\x02\x00\x00\x00"                  // chunks
      "\x02\x00\x00\x00"                  // key 2
      "\x00\x00\x00\x00\x00\x00\x00\x00"  // no values
      "\x02\x01\x00\x00"                  // key 0x0102
      "\x01\x00\x00\x00\x00\x00\x00\x00"  // one value
      "\x00\x00\x80\x3e",                 // 0.25f
      44);
  EXPECT_EQ(feedback.SaveState(), want);
}

// Every way a state can be wrong, each refused with INVALID_ARGUMENT and no
// residual changed.
class RestoreErrorTest : public ::testing::Test {
 protected:
  void ExpectRefused(ErrorFeedback& target, const std::string& state,
                     const std::string& why) {
    std::vector<std::vector<float>> before;
    for (const uint32_t key : {1u, 7u, 300u}) {
      before.push_back(target.Residual(key).ok() ? ResidualOf(target, key)
                                                 : std::vector<float>());
    }
    const absl::Status status = target.RestoreState(state);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(why));
    int k = 0;
    for (const uint32_t key : {1u, 7u, 300u}) {
      const std::vector<float> after = target.Residual(key).ok()
                                           ? ResidualOf(target, key)
                                           : std::vector<float>();
      EXPECT_TRUE(SameBits(after, before[k++])) << "chunk " << key;
    }
  }

  // A target whose residuals are not zero, so a partial restore would show.
  ErrorFeedback Target() {
    ErrorFeedback target = SameChunks();
    Step(target, 7, {0.1f, 0.2f, 0.3f, 0.4f, 0.6f}, Context(5, 7));
    return target;
  }

  const std::string state_ = Trained().SaveState();
};

TEST_F(RestoreErrorTest, EveryTruncationAndTrailingBytes) {
  ErrorFeedback target = Target();
  for (size_t size = 0; size < state_.size(); ++size) {
    SCOPED_TRACE(size);
    ExpectRefused(target, state_.substr(0, size),
                  size < 16 ? "header" : "ends inside");
  }
  ExpectRefused(target, state_ + std::string(1, '\0'),
                "1 bytes after its last chunk");
  ExpectRefused(target, state_ + state_.substr(16, 12), "after its last chunk");
}

TEST_F(RestoreErrorTest, HeaderFields) {
  ErrorFeedback target = Target();
  std::string bad = state_;
  bad[0] = 'X';
  ExpectRefused(target, bad, "does not start with");
  bad = state_;
  bad[4] = 2;
  ExpectRefused(target, bad, "version 2 is not supported");
  bad = state_;
  bad[8] = static_cast<char>(CodecId::kThreshold);
  ExpectRefused(target, bad, "codec threshold (5), this one is fake");
  bad = state_;
  bad[12] = 2;
  ExpectRefused(target, bad, "has 2 chunks, 3 are registered");
  bad[12] = 4;
  ExpectRefused(target, bad, "has 4 chunks, 3 are registered");
}

TEST_F(RestoreErrorTest, AStateOfAnotherCodec) {
  FakeOptions other;
  other.id = CodecId::kDropping;
  ErrorFeedback target = SameChunks(other);
  ExpectRefused(target, state_, "codec onebit (4), this one is fake");
}

TEST_F(RestoreErrorTest, ChunksThatDoNotMatch) {
  // Another key set of the same count.
  ErrorFeedback other_keys = MakeFake();
  ASSERT_TRUE(other_keys.Register(1, 0).ok());
  ASSERT_TRUE(other_keys.Register(7, 5).ok());
  ASSERT_TRUE(other_keys.Register(301, 33).ok());
  ExpectRefused(other_keys, state_, "chunk 300, which is not registered");
  // Another length for one key.
  ErrorFeedback other_length = MakeFake();
  ASSERT_TRUE(other_length.Register(1, 0).ok());
  ASSERT_TRUE(other_length.Register(7, 6).ok());
  ASSERT_TRUE(other_length.Register(300, 33).ok());
  ExpectRefused(other_length, state_, "5 values for chunk 7, which has 6");
  // Fewer chunks registered.
  ErrorFeedback fewer = MakeFake();
  ASSERT_TRUE(fewer.Register(7, 5).ok());
  ExpectRefused(fewer, state_, "3 chunks, 1 are registered");
  // The same key twice: chunk 1 (empty) in place of chunk 7's entry, whose
  // values then read as a header.
  ErrorFeedback target = Target();
  std::string twice = state_;
  twice.replace(16 + 12, 4, std::string("\x01\x00\x00\x00", 4));
  ExpectRefused(target, twice, "5 values for chunk 1, which has 0");
  std::string duplicate = state_.substr(0, 16 + 12);  // count 3, chunk 1
  duplicate += state_.substr(16, 12);                 // chunk 1 again
  duplicate += state_.substr(16 + 12);                // chunk 7 ...
  ExpectRefused(target, duplicate, "chunk 1 twice");
}

TEST_F(RestoreErrorTest, NonFiniteValues) {
  ErrorFeedback target = Target();
  const size_t first_value_of_chunk_7 = 16 + 12 + 12;
  const size_t last_value_of_chunk_300 = state_.size() - 4;
  for (const uint32_t bits : {0x7FC00000u, 0x7F800000u, 0xFF800000u}) {
    for (const size_t pos : {first_value_of_chunk_7, last_value_of_chunk_300}) {
      std::string bad = state_;
      bad.replace(pos, 4, reinterpret_cast<const char*>(&bits), 4);
      ExpectRefused(target, bad,
                    pos == first_value_of_chunk_7 ? "chunk 7 value 0 is"
                                                  : "chunk 300 value 32 is");
    }
  }
}

TEST_F(RestoreErrorTest, AGoodStateStillRestoresAfterRefusals) {
  ErrorFeedback target = Target();
  ExpectRefused(target, state_.substr(0, 20), "ends inside");
  ASSERT_TRUE(target.RestoreState(state_).ok());
  EXPECT_EQ(target.SaveState(), state_);
}

}  // namespace
}  // namespace tern::kernels
