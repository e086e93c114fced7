// LpsState: serial momentum SGD against hand-computed and reference
// sequences, the LR schedule, local-step completion, validation (nothing is
// applied on error), the weight codecs' error bounds, and the checksum.
#include "server/lps_state.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "common/checksum.h"
#include "gtest/gtest.h"
#include "kernels/codec_registry.h"
#include "kernels/codec_test_util.h"

namespace tern::server {
namespace {

using ::tern::kernels::codec_test::Gaussian;
using ::testing::HasSubstr;

LrSchedule Constant(double lr) {
  return *LrSchedule::Create(LrScheduleKind::kConstant, lr, 0, 0, 0);
}

std::unique_ptr<LpsState> MakeState(const LpsStateOptions& options,
                                    LrSchedule lr,
                                    std::vector<LpsChunk> chunks) {
  absl::StatusOr<std::unique_ptr<LpsState>> state =
      LpsState::Create(options, lr, std::move(chunks));
  EXPECT_TRUE(state.ok()) << state.status();
  return state.ok() ? *std::move(state) : nullptr;
}

std::vector<float> WeightsOf(const LpsState& state, uint32_t key) {
  absl::Span<const float> w = *state.Weights(key);
  return std::vector<float>(w.begin(), w.end());
}

void ExpectStatus(const absl::Status& status, absl::StatusCode code,
                  const std::string& why) {
  EXPECT_EQ(status.code(), code) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(why));
}

// The checksum of the chunks' float bytes laid end to end, as a worker's
// flat ParamBuffer holds them.
uint64_t ChecksumOfConcatenation(
    const std::vector<std::vector<float>>& chunks) {
  std::string bytes;
  for (const std::vector<float>& chunk : chunks) {
    bytes.append(reinterpret_cast<const char*>(chunk.data()),
                 chunk.size() * sizeof(float));
  }
  return ChecksumOf(bytes);
}

TEST(LpsStateTest, SerialMomentumSgdByHand) {
  // Powers of two only, so every value below is exact.
  LpsStateOptions options;
  options.num_workers = 2;
  options.momentum = 0.5f;
  std::unique_ptr<LpsState> state =
      MakeState(options, Constant(0.5), {{7, {1.0f, -2.0f}}});
  ASSERT_NE(state, nullptr);

  // Worker 0, step 0: v = g = (1, 2); W = W - 0.5 v = (0.5, -3).
  absl::StatusOr<ApplyResult> r =
      state->ApplyGradient(0, 0, 7, std::vector<float>{1.0f, 2.0f});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->step_completed);
  EXPECT_EQ(WeightsOf(*state, 7), (std::vector<float>{0.5f, -3.0f}));
  // Worker 1, step 0, at once and on top (no averaging):
  // v = 0.5 (1, 2) + (2, 0) = (2.5, 1); W = (0.5, -3) - 0.5 v.
  r = state->ApplyGradient(1, 0, 7, std::vector<float>{2.0f, 0.0f});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->step_completed);
  EXPECT_EQ(r->completed_steps, 1u);
  EXPECT_EQ(WeightsOf(*state, 7), (std::vector<float>{-0.75f, -3.5f}));
  absl::Span<const float> v = *state->Momentum(7);
  EXPECT_EQ(std::vector<float>(v.begin(), v.end()),
            (std::vector<float>{2.5f, 1.0f}));
  // Worker 0, step 1, zero gradient: the velocity still moves W.
  r = state->ApplyGradient(0, 1, 7, std::vector<float>{0.0f, 0.0f});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(WeightsOf(*state, 7), (std::vector<float>{-1.375f, -3.75f}));
  EXPECT_EQ(*state->AppliedCount(7), 3u);
  EXPECT_EQ(state->completed_steps(), 1u);
}

TEST(LpsStateTest, WeightDecayJoinsTheVelocity) {
  LpsStateOptions options;
  options.momentum = 0.0f;
  options.weight_decay = 0.5f;
  std::unique_ptr<LpsState> state =
      MakeState(options, Constant(0.25), {{0, {2.0f}}});
  // v = g + 0.5 W = 1 + 1 = 2; W = 2 - 0.25 * 2 = 1.5.
  ASSERT_TRUE(state->ApplyGradient(0, 0, 0, std::vector<float>{1.0f}).ok());
  EXPECT_EQ(WeightsOf(*state, 0), std::vector<float>{1.5f});
}

TEST(LpsStateTest, UsesTheLrOfTheStep) {
  // lr_t = 2^-t: with m = 0 and g = 1, W goes 0, -1, -1.5, -1.75.
  LpsStateOptions options;
  options.momentum = 0.0f;
  std::unique_ptr<LpsState> state = MakeState(
      options, *LrSchedule::Create(LrScheduleKind::kStep, 1.0, 0, 1, 0.5),
      {{0, {0.0f}}});
  for (const float want : {-1.0f, -1.5f, -1.75f}) {
    const uint64_t step = state->completed_steps();
    ASSERT_TRUE(
        state->ApplyGradient(0, step, 0, std::vector<float>{1.0f}).ok());
    EXPECT_EQ(WeightsOf(*state, 0), std::vector<float>{want});
  }
  EXPECT_EQ(state->LearningRate(3), 0.125);
  // A poly schedule reaches 0 and the weights stop.
  std::unique_ptr<LpsState> poly = MakeState(
      options, *LrSchedule::Create(LrScheduleKind::kPoly, 1.0, 1, 0, 0),
      {{0, {0.0f}}});
  ASSERT_TRUE(poly->ApplyGradient(0, 0, 0, std::vector<float>{1.0f}).ok());
  ASSERT_TRUE(poly->ApplyGradient(0, 1, 0, std::vector<float>{1.0f}).ok());
  EXPECT_EQ(WeightsOf(*poly, 0), std::vector<float>{-1.0f});
}

class LpsSizeTest : public ::testing::TestWithParam<uint64_t> {};

// The documented float recurrence, element by element, over many steps of
// three workers applied in a shuffled order.
TEST_P(LpsSizeTest, MatchesTheReferenceRecurrence) {
  const size_t n = GetParam();
  LpsStateOptions options;
  options.num_workers = 3;
  options.momentum = 0.9f;
  options.weight_decay = 1e-4f;
  const LrSchedule lr =
      *LrSchedule::Create(LrScheduleKind::kPoly, 0.1, 10, 0, 0);
  const std::vector<float> w0 = Gaussian(n, 1);
  std::unique_ptr<LpsState> state = MakeState(options, lr, {{3, w0}});
  std::vector<float> w = w0, v(n, 0.0f);
  std::mt19937 rng(2);
  for (uint64_t step = 0; step < 5; ++step) {
    std::vector<uint32_t> order = {0, 1, 2};
    std::shuffle(order.begin(), order.end(), rng);
    for (const uint32_t worker : order) {
      const std::vector<float> g = Gaussian(n, 100 * step + worker);
      ASSERT_TRUE(state->ApplyGradient(worker, step, 3, g).ok());
      const float rate = static_cast<float>(lr.Rate(step));
      for (size_t i = 0; i < n; ++i) {
        const float decayed = g[i] + options.weight_decay * w[i];
        v[i] = options.momentum * v[i] + decayed;
        w[i] = w[i] - rate * v[i];
      }
    }
  }
  EXPECT_EQ(state->completed_steps(), 5u);
  ASSERT_EQ(WeightsOf(*state, 3), w);
  double norm = 0;
  for (const float x : v) norm += double{x} * x;
  EXPECT_DOUBLE_EQ(state->MomentumNorm(), std::sqrt(norm));
}

// Weights as the workers get them, for every weight codec.
TEST_P(LpsSizeTest, QuantizedWeightsDecodeWithinTheirBounds) {
  const size_t n = GetParam();
  const std::vector<float> w0 = Gaussian(n, 4, 0.0f, 0.1f);
  float max_abs = 0;
  for (const float x : w0) max_abs = std::max(max_abs, std::fabs(x));
  const RandomStream stream{1, 2, 3, 4};
  for (const kernels::CodecId id :
       {kernels::CodecId::kFp32, kernels::CodecId::kInt8,
        kernels::CodecId::kTernGrad}) {
    SCOPED_TRACE(kernels::CodecName(id));
    LpsStateOptions options;
    options.weight_codec = id;
    std::unique_ptr<LpsState> state =
        MakeState(options, Constant(0.1), {{5, w0}});
    absl::StatusOr<kernels::Payload> payload =
        state->QuantizedWeights(5, stream);
    ASSERT_TRUE(payload.ok()) << payload.status();
    EXPECT_EQ(payload->codec, id);
    EXPECT_EQ(payload->num_elements, n);
    kernels::CodecOptions codec_options;
    codec_options.id = id;
    std::unique_ptr<kernels::Codec> codec = *kernels::MakeCodec(codec_options);
    std::vector<float> out(n);
    ASSERT_TRUE(codec->Decode(*payload, absl::MakeSpan(out)).ok());
    if (id == kernels::CodecId::kFp32) {
      EXPECT_EQ(out, w0);
    } else if (id == kernels::CodecId::kInt8) {
      const float scale = payload->scalers[0];
      EXPECT_EQ(scale, max_abs / 127.0f);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_LE(std::fabs(out[i] - w0[i]), 0.5f * scale + 1e-6f * max_abs);
      }
    } else {
      // {-s, 0, +s} with the chunk's own clipped scaler; a nonzero value
      // keeps the weight's sign, and |w| >= s always gives +-s.
      const float s = payload->scalers[0];
      EXPECT_LE(s, max_abs);
      if (n >= 4096) {
        EXPECT_LT(s, max_abs) << "2.5 sigma clips N(0, sigma) at this size";
      }
      for (size_t i = 0; i < n; ++i) {
        ASSERT_TRUE(out[i] == 0.0f || std::fabs(out[i]) == s) << out[i];
        if (out[i] != 0.0f) {
          ASSERT_EQ(out[i] > 0, w0[i] > 0);
        }
        if (std::fabs(w0[i]) >= s) {
          ASSERT_EQ(std::fabs(out[i]), s);
        }
      }
      // The same stream gives the same bytes; another stream others.
      EXPECT_EQ(state->QuantizedWeights(5, stream)->data, payload->data);
      if (n >= 32) {
        EXPECT_NE(state->QuantizedWeights(5, RandomStream{1, 2, 3, 5})->data,
                  payload->data);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, LpsSizeTest,
                         ::testing::Values(0, 1, 31, 32, 33, 4096));

// The ternary weights are unbiased up to the clipping: averaged over many
// streams they approach min(max(w, -s), s).
TEST(LpsStateTest, TernaryWeightsAreUnbiasedUpToClipping) {
  const std::vector<float> w0 = Gaussian(64, 8);
  std::unique_ptr<LpsState> state =
      MakeState(LpsStateOptions(), Constant(0.1), {{0, w0}});
  std::unique_ptr<kernels::Codec> codec =
      *kernels::MakeCodec(kernels::CodecOptions());
  constexpr int kDraws = 4000;
  std::vector<double> mean(w0.size(), 0.0);
  float s = 0;
  for (int d = 0; d < kDraws; ++d) {
    kernels::Payload p =
        *state->QuantizedWeights(0, RandomStream{9, 0, 0, uint32_t(d)});
    s = p.scalers[0];
    std::vector<float> out(w0.size());
    ASSERT_TRUE(codec->Decode(p, absl::MakeSpan(out)).ok());
    for (size_t i = 0; i < out.size(); ++i) mean[i] += out[i] / kDraws;
  }
  for (size_t i = 0; i < w0.size(); ++i) {
    const double clipped = std::clamp(w0[i], -s, s);
    // Bernoulli with p <= 1: sd of the mean <= s / (2 sqrt(kDraws)).
    EXPECT_NEAR(mean[i], clipped, 5 * s / (2 * std::sqrt(kDraws))) << i;
  }
}

// A constant chunk has sigma = 0; clipping at 2.5 sigma would zero it.
TEST(LpsStateTest, ConstantChunksKeepTheirTernaryWeights) {
  std::unique_ptr<LpsState> state = MakeState(
      LpsStateOptions(), Constant(0.1),
      {{0, std::vector<float>(33, 1.0f)}, {1, {-0.5f}}, {2, {0.0f, 0.0f}}});
  std::unique_ptr<kernels::Codec> codec =
      *kernels::MakeCodec(kernels::CodecOptions());
  for (const uint32_t key : {0u, 1u, 2u}) {
    kernels::Payload payload = *state->QuantizedWeights(key, RandomStream());
    std::vector<float> out(payload.num_elements);
    ASSERT_TRUE(codec->Decode(payload, absl::MakeSpan(out)).ok());
    EXPECT_EQ(out, WeightsOf(*state, key)) << "chunk " << key;
  }
  EXPECT_EQ(OwnTernaryScaler(std::vector<float>{2.0f, 2.0f}, 2.5f), 2.0f);
  EXPECT_EQ(OwnTernaryScaler(std::vector<float>{}, 2.5f), 0.0f);
  // Otherwise TernGrad's clipped scaler: sigma = 1, max = 3.
  const std::vector<float> spread = {1, -1, 1, -1, 1, -1, 1, -1, 3, -3};
  EXPECT_LT(OwnTernaryScaler(spread, 1.0f), 3.0f);
  EXPECT_EQ(OwnTernaryScaler(spread, 0.0f), 3.0f);
}

// What the workers' weights lose on N(0, 1) weights, per codec
// (server/WEIGHTGRAD.md quotes these numbers).
TEST(LpsStateTest, RelativeErrorOfEachWeightCodecOnStandardNormal) {
  const std::vector<float> w0 = Gaussian(1 << 20, 12);
  for (const kernels::CodecId id :
       {kernels::CodecId::kFp32, kernels::CodecId::kInt8,
        kernels::CodecId::kTernGrad}) {
    LpsStateOptions options;
    options.weight_codec = id;
    std::unique_ptr<LpsState> state =
        MakeState(options, Constant(0.1), {{0, w0}});
    kernels::Payload payload =
        *state->QuantizedWeights(0, RandomStream{3, 0, 0, 0});
    kernels::CodecOptions codec_options;
    codec_options.id = id;
    std::vector<float> out(w0.size());
    ASSERT_TRUE((*kernels::MakeCodec(codec_options))
                    ->Decode(payload, absl::MakeSpan(out))
                    .ok());
    double err2 = 0, norm2 = 0;
    for (size_t i = 0; i < w0.size(); ++i) {
      err2 += (double{out[i]} - w0[i]) * (double{out[i]} - w0[i]);
      norm2 += double{w0[i]} * w0[i];
    }
    const double relative = std::sqrt(err2 / norm2);
    std::cout << "weight codec " << kernels::CodecName(id)
              << ": relative L2 error on N(0,1), 2^20 elements: " << relative
              << ", " << payload.data.size() << " bytes\n";
    switch (id) {
      case kernels::CodecId::kFp32:
        EXPECT_EQ(relative, 0.0);
        break;
      case kernels::CodecId::kInt8:
        EXPECT_LT(relative, 0.02);
        break;
      default:
        // E|w| s - E w^2 over E w^2 with s = 2.5: sqrt(2.5 * 0.8 - 1) ~ 1.
        EXPECT_GT(relative, 0.8);
        EXPECT_LT(relative, 1.2);
    }
  }
}

TEST(LpsStateTest, StepsCompleteWhenEveryWorkerAndChunkIsIn) {
  LpsStateOptions options;
  options.num_workers = 3;
  std::unique_ptr<LpsState> state =
      MakeState(options, Constant(0.1), {{0, {0.0f}}, {4, {0.0f, 0.0f}}});
  const std::vector<float> g1 = {1.0f}, g2 = {1.0f, 1.0f};
  int applied = 0;
  for (uint32_t worker = 0; worker < 3; ++worker) {
    for (const uint32_t key : {4u, 0u}) {
      absl::StatusOr<ApplyResult> r =
          state->ApplyGradient(worker, 0, key, key == 0 ? g1 : g2);
      ASSERT_TRUE(r.ok()) << r.status();
      ++applied;
      EXPECT_EQ(r->step_completed, applied == 6);
      EXPECT_EQ(r->completed_steps, applied == 6 ? 1u : 0u);
    }
  }
}

TEST(LpsStateTest, StepOrderRetriesAndLead) {
  LpsStateOptions options;
  options.num_workers = 2;
  std::unique_ptr<LpsState> state =
      MakeState(options, Constant(0.1), {{0, {0.0f}}});
  const std::vector<float> g = {1.0f};
  ASSERT_TRUE(state->ApplyGradient(0, 0, 0, g).ok());
  // A retry of an applied step changes nothing.
  const std::vector<float> before = WeightsOf(*state, 0);
  ExpectStatus(state->ApplyGradient(0, 0, 0, g).status(),
               absl::StatusCode::kAlreadyExists, "applied already");
  EXPECT_EQ(WeightsOf(*state, 0), before);
  EXPECT_EQ(*state->AppliedCount(0), 1u);
  // Worker 1 may not skip its step 0.
  ExpectStatus(state->ApplyGradient(1, 1, 0, g).status(),
               absl::StatusCode::kFailedPrecondition,
               "its next step there is 0");
  // Worker 0 may run one step ahead of the open local step 0, not two.
  ASSERT_TRUE(state->ApplyGradient(0, 1, 0, g).ok());
  ExpectStatus(state->ApplyGradient(0, 2, 0, g).status(),
               absl::StatusCode::kFailedPrecondition, "local step 0 is open");
  ASSERT_TRUE(state->ApplyGradient(1, 0, 0, g).ok());
  EXPECT_EQ(state->completed_steps(), 1u);
  ASSERT_TRUE(state->ApplyGradient(0, 2, 0, g).ok());

  // max_lead_steps = 0: fully synchronous.
  options.max_lead_steps = 0;
  std::unique_ptr<LpsState> sync =
      MakeState(options, Constant(0.1), {{0, {0.0f}}});
  ASSERT_TRUE(sync->ApplyGradient(0, 0, 0, g).ok());
  ExpectStatus(sync->ApplyGradient(0, 1, 0, g).status(),
               absl::StatusCode::kFailedPrecondition, "at most 0 step(s)");
}

TEST(LpsStateTest, InvalidGradientsApplyNothing) {
  LpsStateOptions options;
  options.num_workers = 2;
  std::unique_ptr<LpsState> state =
      MakeState(options, Constant(0.1), {{2, {1.0f, 2.0f, 3.0f}}});
  const uint64_t checksum = state->Checksum();
  const float inf = std::numeric_limits<float>::infinity();
  ExpectStatus(
      state->ApplyGradient(0, 0, 9, std::vector<float>{1, 2, 3}).status(),
      absl::StatusCode::kInvalidArgument, "chunk 9 is not on");
  ExpectStatus(state->ApplyGradient(0, 0, 2, std::vector<float>{1, 2}).status(),
               absl::StatusCode::kInvalidArgument,
               "chunk 2 has 2 values, want 3");
  ExpectStatus(
      state->ApplyGradient(0, 0, 2, std::vector<float>{1, std::nanf(""), 3})
          .status(),
      absl::StatusCode::kInvalidArgument, "nan at element 1");
  ExpectStatus(
      state->ApplyGradient(1, 0, 2, std::vector<float>{1, 2, -inf}).status(),
      absl::StatusCode::kInvalidArgument, "-inf at element 2");
  ExpectStatus(
      state->ApplyGradient(2, 0, 2, std::vector<float>{1, 2, 3}).status(),
      absl::StatusCode::kInvalidArgument, "worker 2 is out of range");
  EXPECT_EQ(state->Checksum(), checksum);
  EXPECT_EQ(*state->AppliedCount(2), 0u);
  EXPECT_EQ(state->MomentumNorm(), 0.0);
  // The rejected pushes did not use up the step: it still applies.
  EXPECT_TRUE(state->ApplyGradient(0, 0, 2, std::vector<float>{1, 2, 3}).ok());
  ExpectStatus(state->QuantizedWeights(9, RandomStream()).status(),
               absl::StatusCode::kInvalidArgument, "chunk 9");
  ExpectStatus(state->Weights(9).status(), absl::StatusCode::kInvalidArgument,
               "chunk 9");
}

TEST(LpsStateTest, CreateRejectsWhatCannotWork) {
  const auto create = [](LpsStateOptions options,
                         std::vector<LpsChunk> chunks = {{0, {1.0f}}}) {
    return LpsState::Create(options, Constant(0.1), std::move(chunks)).status();
  };
  LpsStateOptions options;
  options.num_workers = 0;
  ExpectStatus(create(options), absl::StatusCode::kInvalidArgument,
               "at least one worker");
  for (const float m : {-0.1f, 1.0f, std::nanf("")}) {
    options = LpsStateOptions();
    options.momentum = m;
    ExpectStatus(create(options), absl::StatusCode::kInvalidArgument,
                 "momentum");
  }
  options = LpsStateOptions();
  options.weight_decay = -1.0f;
  ExpectStatus(create(options), absl::StatusCode::kInvalidArgument,
               "weight_decay");
  options = LpsStateOptions();
  options.weight_codec = kernels::CodecId::kFp16;
  ExpectStatus(create(options), absl::StatusCode::kInvalidArgument,
               "weight codec fp16");
  options = LpsStateOptions();
  options.weight_clip = -1.0f;
  ExpectStatus(create(options), absl::StatusCode::kInvalidArgument, "clip");
  options = LpsStateOptions();
  ExpectStatus(create(options, {}), absl::StatusCode::kInvalidArgument,
               "at least one chunk");
  ExpectStatus(create(options, {{1, {0.0f}}, {1, {0.0f}}}),
               absl::StatusCode::kInvalidArgument, "chunk 1 is given twice");
  ExpectStatus(create(options, {{1, {0.0f, std::nanf("")}}}),
               absl::StatusCode::kInvalidArgument,
               "initial weight 1 of chunk 1");
}

TEST(LpsStateTest, CreateForShardCutsTheFlatWeights) {
  // Tensors of 5, 3 and 4 elements, at most 2 elements per chunk.
  const std::vector<uint64_t> sizes = {5, 3, 4};
  const Partition partition = *Partition::Create(sizes, 8, 2);
  std::vector<float> flat(12);
  for (size_t i = 0; i < flat.size(); ++i) flat[i] = static_cast<float>(i);
  for (uint32_t shard = 0; shard < 2; ++shard) {
    absl::StatusOr<std::unique_ptr<LpsState>> state = LpsState::CreateForShard(
        LpsStateOptions(), Constant(0.1), partition, shard, flat);
    ASSERT_TRUE(state.ok()) << state.status();
    EXPECT_EQ((*state)->chunk_keys(), partition.ChunksOfShard(shard));
    for (const uint32_t key : (*state)->chunk_keys()) {
      const Chunk& chunk = partition.chunks()[key];
      const std::vector<float> want(
          flat.begin() + chunk.flat_offset,
          flat.begin() + chunk.flat_offset + chunk.num_elements);
      EXPECT_EQ(WeightsOf(**state, key), want);
    }
    EXPECT_EQ((*state)->total_elements(), partition.ShardElements(shard));
  }
  ExpectStatus(
      LpsState::CreateForShard(LpsStateOptions(), Constant(0.1), partition, 0,
                               absl::MakeSpan(flat).subspan(1))
          .status(),
      absl::StatusCode::kInvalidArgument, "11 values, the model 12");
  ExpectStatus(LpsState::CreateForShard(LpsStateOptions(), Constant(0.1),
                                        partition, 2, flat)
                   .status(),
               absl::StatusCode::kInvalidArgument, "shard 2 is out of range");
}

TEST(LpsStateTest, ChecksumIsOfTheWeightsInKeyOrder) {
  const std::vector<float> a = Gaussian(33, 1), b = Gaussian(5, 2);
  // Given out of order; hashed in key order, like a flat ParamBuffer.
  std::unique_ptr<LpsState> state =
      MakeState(LpsStateOptions(), Constant(0.1), {{8, b}, {3, a}, {5, {}}});
  EXPECT_EQ(state->chunk_keys(), (std::vector<uint32_t>{3, 5, 8}));
  EXPECT_EQ(state->Checksum(), ChecksumOfConcatenation({a, {}, b}));
  std::unique_ptr<LpsState> empty =
      MakeState(LpsStateOptions(), Constant(0.1), {{0, {}}});
  EXPECT_EQ(empty->Checksum(), ChecksumOf(""));
  // Any bit of any weight changes it.
  const uint64_t before = state->Checksum();
  absl::Span<float> w = *state->MutableWeights(8);
  uint32_t bits;
  std::memcpy(&bits, &w[4], 4);
  bits ^= 1;
  std::memcpy(&w[4], &bits, 4);
  EXPECT_NE(state->Checksum(), before);
}

}  // namespace
}  // namespace tern::server
