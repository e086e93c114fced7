// GradientSynchronizer: the significance test against hand-computed cases,
// the fixed and the dynamic threshold (epoch rescaling), K simulated data
// centers converging through a GS average computed here, error feedback of
// the ternary and gaia modes, heartbeats, rounds in flight, hold timing,
// validation, and the fraction of chunks a default run sends.
#include "server/gradient_synchronizer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
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

double Norm(const std::vector<float>& values) {
  double sum = 0;
  for (const float v : values) sum += double{v} * v;
  return std::sqrt(sum);
}

std::vector<float> Copy(absl::Span<const float> values) {
  return std::vector<float>(values.begin(), values.end());
}

void ExpectStatus(const absl::Status& status, absl::StatusCode code,
                  const std::string& why) {
  EXPECT_EQ(status.code(), code) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(why));
}

std::unique_ptr<kernels::Codec> CodecFor(kernels::CodecId id) {
  kernels::CodecOptions options;
  options.id = id;
  return *kernels::MakeCodec(options);
}

std::vector<float> DecodePayload(const kernels::Payload& payload) {
  std::vector<float> out(payload.num_elements);
  const absl::Status status =
      CodecFor(payload.codec)->Decode(payload, absl::MakeSpan(out));
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

ChunkPayload Fp32Chunk(uint32_t key, const std::vector<float>& values) {
  return ChunkPayload{key,
                      *CodecFor(kernels::CodecId::kFp32)->Encode(values, {})};
}

// A fake clock the tests move by hand.
struct FakeClock {
  absl::Time now = absl::UnixEpoch();
  std::function<absl::Time()> Fn() {
    return [this] { return now; };
  }
};

// One data center: an LPS shard and its synchronizer.
struct DataCenter {
  std::unique_ptr<LpsState> state;
  std::unique_ptr<GradientSynchronizer> sync;

  DataCenter(const LpsStateOptions& lps, LrSchedule lr,
             std::vector<LpsChunk> chunks, SynchronizerOptions options) {
    absl::StatusOr<std::unique_ptr<LpsState>> s =
        LpsState::Create(lps, lr, std::move(chunks));
    EXPECT_TRUE(s.ok()) << s.status();
    state = *std::move(s);
    absl::StatusOr<std::unique_ptr<GradientSynchronizer>> g =
        GradientSynchronizer::Create(std::move(options), state.get());
    EXPECT_TRUE(g.ok()) << g.status();
    sync = *std::move(g);
  }

  // Every worker's gradient of every chunk for the open local step.
  void Step(const std::map<uint32_t, std::vector<std::vector<float>>>& g) {
    const uint64_t step = state->completed_steps();
    for (uint32_t w = 0; w < state->options().num_workers; ++w) {
      for (const auto& [key, by_worker] : g) {
        absl::StatusOr<ApplyResult> r =
            sync->ApplyGradient(w, step, key, by_worker[w]);
        ASSERT_TRUE(r.ok()) << r.status();
      }
    }
    ASSERT_EQ(state->completed_steps(), step + 1);
  }

  std::vector<float> U(uint32_t key) const {
    std::vector<float> w = Copy(*state->Weights(key));
    const absl::Span<const float> last = *sync->LastRoundWeights(key);
    for (size_t i = 0; i < w.size(); ++i) w[i] -= last[i];
    return w;
  }
};

// The GS: A_k = (1/K) * sum_d U_sent_dk (absent = 0), in fp32, datacenter
// order, as an fp32 payload per chunk any data center sent.
std::vector<ChunkPayload> Average(const std::vector<SyncRound>& rounds) {
  std::map<uint32_t, std::vector<float>> sums;
  for (const SyncRound& round : rounds) {
    for (const ChunkPayload& chunk : round.updates) {
      std::vector<float>& sum = sums[chunk.chunk_key];
      const std::vector<float> u = DecodePayload(chunk.payload);
      if (sum.empty()) sum.assign(u.size(), 0.0f);
      for (size_t i = 0; i < u.size(); ++i) sum[i] += u[i];
    }
  }
  std::vector<ChunkPayload> average;
  for (auto& [key, sum] : sums) {
    for (float& v : sum) v /= static_cast<float>(rounds.size());
    average.push_back(Fp32Chunk(key, sum));
  }
  return average;
}

SynchronizerOptions Fp32Options(std::optional<double> g_thresh,
                                uint64_t sync_every = 1) {
  SynchronizerOptions options;
  options.mode = SyncMode::kFp32;
  options.g_thresh = g_thresh;
  options.sync_every = sync_every;
  return options;
}

LpsStateOptions PlainSgd(uint32_t workers = 1) {
  LpsStateOptions options;
  options.num_workers = workers;
  options.momentum = 0.0f;
  return options;
}

TEST(GradientSynchronizerTest, SignificanceIsDisplacementOverPathLength) {
  // lr 1, no momentum, two steps per round: the path of each chunk is 2.
  DataCenter dc(PlainSgd(), Constant(1.0),
                {{0, {0.0f, 0.0f}}, {1, {0.0f, 0.0f}}, {2, {0.0f, 0.0f}}},
                Fp32Options(0.8, 2));
  dc.Step({{0, {{1, 0}}}, {1, {{1, 0}}}, {2, {{1, 0}}}});
  EXPECT_FALSE(dc.sync->RoundDue());
  dc.Step({{0, {{1, 0}}}, {1, {{0, 1}}}, {2, {{-1, 0}}}});
  ASSERT_TRUE(dc.sync->RoundDue());
  absl::StatusOr<SyncRound> round = dc.sync->BuildRound(0);
  ASSERT_TRUE(round.ok()) << round.status();
  EXPECT_EQ(round->round, 0u);
  EXPECT_EQ(round->local_step, 2u);
  EXPECT_EQ(round->g_thresh, 0.8);
  ASSERT_EQ(round->decisions.size(), 3u);
  // Straight on: |U| = 2 = path. At right angles: sqrt(2) / 2. Back and
  // forth: U = 0, nothing to send.
  EXPECT_DOUBLE_EQ(round->decisions[0].significance, 1.0);
  EXPECT_DOUBLE_EQ(round->decisions[1].significance, std::sqrt(0.5));
  EXPECT_EQ(round->decisions[2].significance, 0.0);
  EXPECT_TRUE(round->decisions[0].sent);
  EXPECT_FALSE(round->decisions[1].sent);
  EXPECT_FALSE(round->decisions[2].sent);
  ASSERT_EQ(round->updates.size(), 1u);
  EXPECT_EQ(round->updates[0].chunk_key, 0u);
  EXPECT_EQ(DecodePayload(round->updates[0].payload),
            (std::vector<float>{-2.0f, 0.0f}));

  // One data center: the average is its own update.
  ASSERT_TRUE(dc.sync->ApplyAnswer(0, Average({*round})).ok());
  EXPECT_EQ(Copy(*dc.sync->LastRoundWeights(0)),
            (std::vector<float>{-2.0f, 0.0f}));
  // Chunk 1 was not sent: its U carries over into the next round, where
  // two more steps of (0, 1) make it significant, sent whole.
  EXPECT_EQ(dc.U(1), (std::vector<float>{-1.0f, -1.0f}));
  EXPECT_EQ(Copy(*dc.sync->LastRoundWeights(1)),
            (std::vector<float>{0.0f, 0.0f}));
  dc.Step({{0, {{0, 0}}}, {1, {{0, 1}}}, {2, {{0, 0}}}});
  dc.Step({{0, {{0, 0}}}, {1, {{0, 1}}}, {2, {{0, 0}}}});
  round = dc.sync->BuildRound(1);
  ASSERT_TRUE(round.ok());
  EXPECT_DOUBLE_EQ(round->decisions[1].significance, std::sqrt(10.0) / 2);
  ASSERT_EQ(round->updates.size(), 1u);
  EXPECT_EQ(round->updates[0].chunk_key, 1u);
  EXPECT_EQ(DecodePayload(round->updates[0].payload),
            (std::vector<float>{-1.0f, -3.0f}));
  // Chunk 0 did not move (0 / 0): not significant, not sent.
  EXPECT_EQ(round->decisions[0].significance, 0.0);
}

TEST(GradientSynchronizerTest, MomentumCountsInThePath) {
  // m = 0.5, lr 1: steps of g = 1 move W by 1, then 1.5 (v = 1.5). The path
  // is 2 * 1 / (1 - 0.5) = 4, so a straight run has significance 2.5 / 4.
  LpsStateOptions lps = PlainSgd();
  lps.momentum = 0.5f;
  DataCenter dc(lps, Constant(1.0), {{0, {0.0f}}}, Fp32Options(0.0, 2));
  dc.Step({{0, {{1}}}});
  dc.Step({{0, {{1}}}});
  absl::StatusOr<SyncRound> round = dc.sync->BuildRound(0);
  ASSERT_TRUE(round.ok());
  EXPECT_DOUBLE_EQ(round->decisions[0].significance, 2.5 / 4.0);
}

TEST(GradientSynchronizerTest, DynamicThresholdStartsAtRmsOverMax) {
  // Two workers whose mean gradient over the round is (3, 4 | 0, 0):
  // rms = sqrt(25 / 4) = 2.5, max = 4, G = 0.625.
  DataCenter dc(PlainSgd(2), Constant(0.1),
                {{0, {0.0f, 0.0f}}, {1, {0.0f, 0.0f}}},
                Fp32Options(std::nullopt));
  EXPECT_FALSE(dc.sync->g_thresh().has_value());
  dc.Step({{0, {{2, 4}, {4, 4}}}, {1, {{1, 0}, {-1, 0}}}});
  absl::StatusOr<SyncRound> round = dc.sync->BuildRound(0);
  ASSERT_TRUE(round.ok());
  ASSERT_TRUE(dc.sync->g_thresh().has_value());
  EXPECT_DOUBLE_EQ(*dc.sync->g_thresh(), 0.625);
  EXPECT_DOUBLE_EQ(round->g_thresh, 0.625);
  // Chunk 0 went straight (significance 1), chunk 1 back and forth (0).
  EXPECT_TRUE(round->decisions[0].sent);
  EXPECT_FALSE(round->decisions[1].sent);
}

TEST(GradientSynchronizerTest, DynamicThresholdWaitsForANonzeroGradient) {
  DataCenter dc(PlainSgd(), Constant(0.1), {{0, {1.0f}}},
                Fp32Options(std::nullopt));
  dc.Step({{0, {{0}}}});
  absl::StatusOr<SyncRound> round = dc.sync->BuildRound(0);
  ASSERT_TRUE(round.ok());
  EXPECT_FALSE(dc.sync->g_thresh().has_value());
  EXPECT_TRUE(round->updates.empty());
  ASSERT_TRUE(dc.sync->ApplyAnswer(0, {}).ok());
  dc.Step({{0, {{2}}}});
  ASSERT_TRUE(dc.sync->BuildRound(1).ok());
  EXPECT_DOUBLE_EQ(*dc.sync->g_thresh(), 1.0);  // one element: rms = max
}

TEST(GradientSynchronizerTest, DynamicThresholdScalesEachEpoch) {
  // The LR halves every 2 steps = 1 epoch; the momentum norm changes with
  // the gradients. G is multiplied at rounds that cross an epoch boundary.
  LpsStateOptions lps = PlainSgd();
  lps.momentum = 0.5f;
  SynchronizerOptions options = Fp32Options(std::nullopt);
  options.steps_per_epoch = 2;
  DataCenter dc(lps, *LrSchedule::Create(LrScheduleKind::kStep, 1.0, 0, 2, 0.5),
                {{0, {0.0f, 0.0f}}}, options);
  const std::vector<std::vector<float>> gradients = {
      {3, 4}, {1, 0}, {0, 2}, {1, 1}, {5, 0}};
  double want = 0, momentum_then = 0;
  for (uint64_t r = 0; r < gradients.size(); ++r) {
    dc.Step({{0, {gradients[r]}}});
    const double momentum_now = dc.state->MomentumNorm();
    absl::StatusOr<SyncRound> round = dc.sync->BuildRound(r);
    ASSERT_TRUE(round.ok());
    // An answer leaves the momentum alone.
    ASSERT_TRUE(dc.sync->ApplyAnswer(r, Average({*round})).ok());
    const uint64_t steps = r + 1;
    if (r == 0) {
      want = std::sqrt(12.5) / 4;  // rms (3, 4) / max
      momentum_then = momentum_now;
    } else if (steps % 2 == 0) {  // steps 2 and 4 open epochs 1 and 2
      want *= 0.5 * momentum_now / momentum_then;
      momentum_then = momentum_now;
    }
    EXPECT_DOUBLE_EQ(*dc.sync->g_thresh(), want) << "round " << r;
  }
  EXPECT_NE(want, std::sqrt(12.5) / 4);
}

TEST(GradientSynchronizerTest, SeveralEpochsInOneRoundMultiplyOnce) {
  SynchronizerOptions options = Fp32Options(std::nullopt, 3);
  options.steps_per_epoch = 1;
  DataCenter dc(PlainSgd(),
                *LrSchedule::Create(LrScheduleKind::kStep, 1.0, 0, 1, 0.5),
                {{0, {0.0f}}}, options);
  for (int i = 0; i < 3; ++i) dc.Step({{0, {{1}}}});
  ASSERT_TRUE(dc.sync->BuildRound(0).ok());  // G = 1 at epoch 3
  for (int i = 0; i < 3; ++i) dc.Step({{0, {{1}}}});
  ASSERT_TRUE(dc.sync->BuildRound(1).ok());  // epoch 6: LR 2^-6 / 2^-3
  // m = 0: the momentum buffer is the last gradient, 1 both times.
  EXPECT_DOUBLE_EQ(*dc.sync->g_thresh(), 0.125);
}

TEST(GradientSynchronizerTest, RoundsRecordEachRescaleAtTheEpochBoundary) {
  // Rounds every 2 local steps, epochs of 3: rounds at steps 2, 4, 6, 8,
  // 10, 12 open epochs -, 1, 2, -, 3, 4. The LR halves every epoch; the
  // gradient is constant, so with m = 0 the momentum norm stays at 1.
  SynchronizerOptions options = Fp32Options(std::nullopt, 2);
  options.steps_per_epoch = 3;
  DataCenter dc(PlainSgd(),
                *LrSchedule::Create(LrScheduleKind::kStep, 1.0, 0, 3, 0.5),
                {{0, {0.0f, 0.0f}}}, options);
  const std::vector<std::optional<uint64_t>> want_epoch = {std::nullopt, 1, 2,
                                                           std::nullopt, 3, 4};
  double threshold = 0;
  for (uint64_t r = 0; r < want_epoch.size(); ++r) {
    dc.Step({{0, {{1.0f, 0.5f}}}});
    dc.Step({{0, {{1.0f, 0.5f}}}});
    absl::StatusOr<SyncRound> round = dc.sync->BuildRound(r);
    ASSERT_TRUE(round.ok()) << round.status();
    ASSERT_TRUE(dc.sync->ApplyAnswer(r, Average({*round})).ok());
    if (r == 0) {
      threshold = *dc.sync->g_thresh();  // set, not rescaled
      EXPECT_DOUBLE_EQ(threshold, std::sqrt(0.625) / 1.0);
    }
    ASSERT_EQ(round->rescale.has_value(), want_epoch[r].has_value())
        << "round " << r << " at step " << round->local_step;
    EXPECT_DOUBLE_EQ(round->g_thresh, *dc.sync->g_thresh()) << r;
    if (!want_epoch[r]) continue;
    const ThresholdRescale& rescale = *round->rescale;
    EXPECT_EQ(rescale.epoch, *want_epoch[r]) << r;
    EXPECT_DOUBLE_EQ(rescale.lr_ratio, 0.5) << r;
    EXPECT_DOUBLE_EQ(rescale.momentum_ratio, 1.0) << r;
    EXPECT_DOUBLE_EQ(rescale.old_threshold, threshold) << r;
    threshold *= 0.5;
    EXPECT_DOUBLE_EQ(rescale.new_threshold, threshold) << r;
    EXPECT_DOUBLE_EQ(round->g_thresh, threshold) << r;
  }
}

TEST(GradientSynchronizerTest, FixedThresholdNeverChanges) {
  SynchronizerOptions options = Fp32Options(0.3);
  options.steps_per_epoch = 1;
  DataCenter dc(PlainSgd(),
                *LrSchedule::Create(LrScheduleKind::kStep, 1.0, 0, 1, 0.5),
                {{0, {0.0f}}}, options);
  for (uint64_t r = 0; r < 4; ++r) {
    dc.Step({{0, {{static_cast<float>(r + 1)}}}});
    ASSERT_TRUE(dc.sync->BuildRound(r).ok());
    EXPECT_EQ(*dc.sync->g_thresh(), 0.3);
  }
}

class DataCentersTest : public ::testing::TestWithParam<SyncMode> {};

// K = 3 data centers start from the same W0, apply different gradients,
// and meet again through the GS's average.
TEST_P(DataCentersTest, ConvergeThroughTheAverage) {
  constexpr int kK = 3;
  const std::map<uint32_t, size_t> sizes = {
      {0, 1}, {2, 31}, {3, 32}, {5, 33}, {9, 4096}};
  std::vector<LpsChunk> chunks;
  for (const auto& [key, n] : sizes) chunks.push_back({key, Gaussian(n, key)});
  LpsStateOptions lps;
  lps.num_workers = 2;
  lps.momentum = 0.9f;
  lps.weight_decay = 1e-4f;
  SynchronizerOptions options;
  options.mode = GetParam();
  options.sync_every = 3;
  options.g_thresh = 0.0;  // every chunk that moved is significant
  options.seed = 77;
  std::vector<std::unique_ptr<DataCenter>> dcs;
  for (int d = 0; d < kK; ++d) {
    dcs.push_back(
        std::make_unique<DataCenter>(lps, Constant(0.05), chunks, options));
  }
  for (uint64_t r = 0; r < 3; ++r) {
    std::vector<SyncRound> rounds;
    std::vector<std::map<uint32_t, std::vector<float>>> before(kK);
    for (int d = 0; d < kK; ++d) {
      for (int s = 0; s < 3; ++s) {
        std::map<uint32_t, std::vector<std::vector<float>>> g;
        for (const auto& [key, n] : sizes) {
          for (uint32_t w = 0; w < 2; ++w) {
            g[key].push_back(Gaussian(n, 1000 * r + 100 * d + 10 * s + w));
          }
        }
        dcs[d]->Step(g);
      }
      absl::StatusOr<SyncRound> round = dcs[d]->sync->BuildRound(r);
      ASSERT_TRUE(round.ok()) << round.status();
      ASSERT_EQ(round->updates.size(), sizes.size());  // all significant
      for (const auto& [key, n] : sizes) before[d][key] = dcs[d]->U(key);
      rounds.push_back(*std::move(round));
    }
    const std::vector<ChunkPayload> average = Average(rounds);
    for (int d = 0; d < kK; ++d) {
      ASSERT_TRUE(dcs[d]->sync->ApplyAnswer(r, average).ok());
    }
    for (const auto& [key, n] : sizes) {
      SCOPED_TRACE(absl::StrFormat("round %d, chunk %d", r, key));
      const std::vector<float> last0 =
          Copy(*dcs[0]->sync->LastRoundWeights(key));
      for (int d = 1; d < kK; ++d) {
        // W_last = W - (W - W_last) is the same model everywhere.
        ASSERT_EQ(Copy(*dcs[d]->sync->LastRoundWeights(key)), last0);
      }
      if (GetParam() == SyncMode::kFp32) {
        // Everything was sent exactly: every W is W_last, bit for bit.
        for (int d = 0; d < kK; ++d) {
          ASSERT_EQ(Copy(*dcs[d]->state->Weights(key)), last0);
        }
        continue;
      }
      // Ternary: the quantization error U - U_sent stays in U.
      double residual_norm = 0;
      for (int d = 0; d < kK; ++d) {
        std::vector<float> sent;
        for (const ChunkPayload& c : rounds[d].updates) {
          if (c.chunk_key == key) sent = DecodePayload(c.payload);
        }
        ASSERT_EQ(sent.size(), n);
        const std::vector<float> u = dcs[d]->U(key);
        for (size_t i = 0; i < n; ++i) {
          const float want = before[d][key][i] - sent[i];
          ASSERT_NEAR(u[i], want, 1e-6f * (1 + std::fabs(last0[i])));
          residual_norm += double{want} * want;
        }
      }
      // (A one-element chunk is constant: its ternary is exact.)
      if (n > 1) {
        EXPECT_GT(residual_norm, 0.0);
      }
    }
  }
  if (GetParam() == SyncMode::kFp32) {
    for (int d = 1; d < kK; ++d) {
      EXPECT_EQ(dcs[d]->state->Checksum(), dcs[0]->state->Checksum());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, DataCentersTest,
                         ::testing::Values(SyncMode::kFp32, SyncMode::kTernary),
                         [](const auto& info) {
                           return info.param == SyncMode::kFp32 ? "Fp32"
                                                                : "Ternary";
                         });

TEST(GradientSynchronizerTest, TernaryUsesTheSyncStream) {
  SynchronizerOptions options;
  options.sync_every = 1;
  options.g_thresh = 0.0;
  options.seed = 123;
  DataCenter dc(PlainSgd(), Constant(0.1), {{4, Gaussian(100, 1)}}, options);
  dc.Step({{4, {Gaussian(100, 2)}}});
  const std::vector<float> u = dc.U(4);
  absl::StatusOr<SyncRound> round = dc.sync->BuildRound(0);
  ASSERT_TRUE(round.ok());
  ASSERT_EQ(round->updates.size(), 1u);
  kernels::EncodeContext context;
  context.stream = RandomStream{123, 0, 4, kSyncStreamWorker};
  context.scaler = OwnTernaryScaler(u, 2.0f);  // the default clip for U
  const kernels::Payload want =
      *CodecFor(kernels::CodecId::kTernGrad)->Encode(u, context);
  EXPECT_EQ(round->updates[0].payload.data, want.data);
  EXPECT_EQ(round->updates[0].payload.scalers, want.scalers);
  EXPECT_EQ(round->updates[0].payload.layout, kernels::Layout::kTernary2Bit);
}

// What a ternary send held back is quantization error, not movement: it
// stays in U (and travels with the next send) but does not make the chunk
// significant again.
TEST(GradientSynchronizerTest, HeldBackResidualIsNotMovement) {
  SynchronizerOptions options;
  options.sync_every = 1;
  options.g_thresh = 0.5;
  DataCenter dc(PlainSgd(), Constant(1.0), {{0, Gaussian(64, 1)}}, options);
  dc.Step({{0, {Gaussian(64, 2)}}});
  absl::StatusOr<SyncRound> round = dc.sync->BuildRound(0);
  ASSERT_TRUE(round.ok());
  EXPECT_NEAR(round->decisions[0].significance, 1.0, 1e-6);  // one step
  ASSERT_EQ(round->updates.size(), 1u);
  ASSERT_TRUE(dc.sync->ApplyAnswer(0, Average({*round})).ok());
  const std::vector<float> residual = dc.U(0);
  ASSERT_GT(Norm(residual), 0.0);
  // A step that goes nowhere: only the residual is in U.
  dc.Step({{0, {std::vector<float>(64, 0.0f)}}});
  round = dc.sync->BuildRound(1);
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(round->decisions[0].significance, 0.0);
  EXPECT_TRUE(round->updates.empty());
  ASSERT_TRUE(dc.sync->ApplyAnswer(1, {}).ok());
  // A real step: significant again, and the payload carries U = residual
  // + step, so the held-back part reaches the GS.
  const std::vector<float> g = Gaussian(64, 3);
  dc.Step({{0, {g}}});
  const std::vector<float> u = dc.U(0);
  for (size_t i = 0; i < u.size(); ++i) {
    ASSERT_NEAR(u[i], residual[i] - g[i], 1e-5f);
  }
  round = dc.sync->BuildRound(2);
  ASSERT_TRUE(round.ok());
  EXPECT_NEAR(round->decisions[0].significance, 1.0, 1e-5);
  ASSERT_EQ(round->updates.size(), 1u);
  kernels::EncodeContext context;
  context.stream = RandomStream{0, 2, 0, kSyncStreamWorker};
  context.scaler = OwnTernaryScaler(u, 2.0f);
  EXPECT_EQ(round->updates[0].payload.data,
            CodecFor(kernels::CodecId::kTernGrad)->Encode(u, context)->data);
}

// Error feedback only works when re-encoding shrinks the residual. With
// stochastic ternary at 2.5 sigma it does not (E|U - Q(U)|^2 ~ |U|^2 for a
// Gaussian U), and the residual grows round after round; at the default 2
// sigma it stays near the size of one round's update.
TEST(GradientSynchronizerTest, DefaultClipKeepsTheResidualBounded) {
  const auto residual_ratio = [](float clip) {
    SynchronizerOptions options;
    options.sync_every = 1;
    options.g_thresh = 0.0;
    options.clip = clip;
    DataCenter dc(PlainSgd(), Constant(1.0), {{0, std::vector<float>(2000)}},
                  options);
    double ratio = 0;
    for (uint64_t r = 0; r < 60; ++r) {
      const std::vector<float> g = Gaussian(2000, 100 + r);
      dc.Step({{0, {g}}});
      absl::StatusOr<SyncRound> round = dc.sync->BuildRound(r);
      EXPECT_TRUE(round.ok());
      EXPECT_TRUE(dc.sync->ApplyAnswer(r, Average({*round})).ok());
      ratio = Norm(dc.U(0)) / Norm(g);
    }
    return ratio;
  };
  const double at_2 = residual_ratio(2.0f);
  const double at_2_5 = residual_ratio(2.5f);
  std::cout << "residual / one round's update after 60 rounds: clip 2: " << at_2
            << ", clip 2.5: " << at_2_5 << "\n";
  EXPECT_LT(at_2, 3.0);
  EXPECT_GT(at_2_5, 5.0);
}

TEST(GradientSynchronizerTest, GaiaSendsElementsAboveOnePercent) {
  SynchronizerOptions options;
  options.mode = SyncMode::kGaia;
  options.sync_every = 1;
  DataCenter dc(PlainSgd(), Constant(1.0), {{0, {1.0f, 1.0f, 100.0f, 0.0f}}},
                options);
  // U = -g: 2% of 0.98, 0.5% of 0.995, 0.5% of 99.5, and 100% of -0.001.
  dc.Step({{0, {{0.02f, 0.005f, 0.5f, 0.001f}}}});
  const std::vector<float> u = dc.U(0);
  absl::StatusOr<SyncRound> round = dc.sync->BuildRound(0);
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(round->g_thresh, 0.0);
  EXPECT_DOUBLE_EQ(round->decisions[0].significance, 0.5);
  ASSERT_EQ(round->updates.size(), 1u);
  EXPECT_EQ(round->updates[0].payload.codec, kernels::CodecId::kFp32);
  EXPECT_EQ(DecodePayload(round->updates[0].payload),
            (std::vector<float>{u[0], 0.0f, 0.0f, u[3]}));
  ASSERT_TRUE(dc.sync->ApplyAnswer(0, Average({*round})).ok());
  // The insignificant elements stay in U.
  const std::vector<float> left = dc.U(0);
  EXPECT_EQ(left[0], 0.0f);
  EXPECT_FLOAT_EQ(left[1], u[1]);
  EXPECT_FLOAT_EQ(left[2], u[2]);
  EXPECT_EQ(left[3], 0.0f);
}

TEST(GradientSynchronizerTest, EmptyRoundIsAHeartbeat) {
  FakeClock clock;
  SynchronizerOptions options = Fp32Options(1e9);
  options.clock = clock.Fn();
  DataCenter dc(PlainSgd(), Constant(0.1), {{0, {1.0f, 2.0f}}}, options);
  ExpectStatus(dc.sync->BuildRound(0).status(),
               absl::StatusCode::kFailedPrecondition, "not due: 0 of 1");
  dc.Step({{0, {{1, 1}}}});
  const std::vector<float> w = Copy(*dc.state->Weights(0));
  absl::StatusOr<SyncRound> round = dc.sync->BuildRound(0);
  ASSERT_TRUE(round.ok());
  EXPECT_TRUE(round->updates.empty());
  ASSERT_EQ(round->decisions.size(), 1u);
  EXPECT_FALSE(round->decisions[0].sent);
  EXPECT_EQ(dc.sync->rounds_waiting(), 1u);
  EXPECT_EQ(dc.sync->next_round(), 1u);
  // The GS answers an empty round with an empty average.
  ASSERT_TRUE(dc.sync->ApplyAnswer(0, {}).ok());
  EXPECT_EQ(dc.sync->rounds_waiting(), 0u);
  EXPECT_EQ(Copy(*dc.state->Weights(0)), w);
  EXPECT_EQ(Copy(*dc.sync->LastRoundWeights(0)),
            (std::vector<float>{1.0f, 2.0f}));
}

TEST(GradientSynchronizerTest, ChunksOthersSentMoveUsToo) {
  DataCenter dc(PlainSgd(), Constant(0.1), {{0, {1.0f}}, {1, {5.0f}}},
                Fp32Options(1e9));
  dc.Step({{0, {{1}}}, {1, {{1}}}});
  ASSERT_TRUE(dc.sync->BuildRound(0).ok());
  const std::vector<float> u = dc.U(1);
  ASSERT_TRUE(dc.sync->ApplyAnswer(0, {Fp32Chunk(1, {0.25f})}).ok());
  EXPECT_EQ(Copy(*dc.sync->LastRoundWeights(1)), std::vector<float>{5.25f});
  EXPECT_FLOAT_EQ((*dc.state->Weights(1))[0], 5.25f + u[0]);
  EXPECT_EQ(Copy(*dc.sync->LastRoundWeights(0)), std::vector<float>{1.0f});
}

TEST(GradientSynchronizerTest, RoundsInFlightKeepTheirOwnUSent) {
  DataCenter dc(PlainSgd(), Constant(1.0), {{0, {0.0f}}}, Fp32Options(0.0));
  dc.Step({{0, {{1}}}});
  absl::StatusOr<SyncRound> r0 = dc.sync->BuildRound(0);
  ASSERT_TRUE(r0.ok());
  EXPECT_EQ(DecodePayload(r0->updates[0].payload), std::vector<float>{-1.0f});
  // No answer yet; the next round sends only what is new.
  dc.Step({{0, {{2}}}});
  absl::StatusOr<SyncRound> r1 = dc.sync->BuildRound(1);
  ASSERT_TRUE(r1.ok());
  EXPECT_EQ(DecodePayload(r1->updates[0].payload), std::vector<float>{-2.0f});
  EXPECT_EQ(dc.sync->rounds_waiting(), 2u);
  // Answers come in order.
  ExpectStatus(dc.sync->ApplyAnswer(1, {Fp32Chunk(0, {-2.0f})}),
               absl::StatusCode::kFailedPrecondition,
               "round 0 waits for its answer first");
  // Another data center moved +1: the averages are 0 and -1.
  ASSERT_TRUE(dc.sync->ApplyAnswer(0, {Fp32Chunk(0, {0.0f})}).ok());
  EXPECT_EQ(Copy(*dc.state->Weights(0)), std::vector<float>{-2.0f});
  EXPECT_EQ(Copy(*dc.sync->LastRoundWeights(0)), std::vector<float>{0.0f});
  ASSERT_TRUE(dc.sync->ApplyAnswer(1, {Fp32Chunk(0, {-1.0f})}).ok());
  EXPECT_EQ(Copy(*dc.state->Weights(0)), std::vector<float>{-1.0f});
  EXPECT_EQ(Copy(*dc.sync->LastRoundWeights(0)), std::vector<float>{-1.0f});
  ExpectStatus(dc.sync->ApplyAnswer(1, {}),
               absl::StatusCode::kFailedPrecondition, "no round waits");
}

TEST(GradientSynchronizerTest, MustHoldAfterTheTimeout) {
  FakeClock clock;
  SynchronizerOptions options = Fp32Options(0.0);
  options.sync_timeout = absl::Seconds(60);
  options.clock = clock.Fn();
  DataCenter dc(PlainSgd(), Constant(0.1), {{0, {0.0f}}}, options);
  const absl::Time t0 = clock.now;
  EXPECT_FALSE(dc.sync->MustHold(t0 + absl::Hours(1)));  // nothing sent
  EXPECT_EQ(dc.sync->last_answer_time(), absl::InfinitePast());
  dc.Step({{0, {{1}}}});
  ASSERT_TRUE(dc.sync->BuildRound(0).ok());  // sent at t0
  EXPECT_FALSE(dc.sync->MustHold(t0 + absl::Seconds(59)));
  EXPECT_TRUE(dc.sync->MustHold(t0 + absl::Seconds(60)));
  clock.now = t0 + absl::Seconds(70);
  ASSERT_TRUE(dc.sync->ApplyAnswer(0, {Fp32Chunk(0, {0.0f})}).ok());
  EXPECT_EQ(dc.sync->last_answer_time(), t0 + absl::Seconds(70));
  EXPECT_FALSE(dc.sync->MustHold(t0 + absl::Seconds(1000)));

  // Rounds 1 (t0 + 100 s) and 2 (t0 + 130 s) in flight; round 1's answer
  // at t0 + 150 s: the GS spoke then, so the clock restarts there.
  clock.now = t0 + absl::Seconds(100);
  dc.Step({{0, {{1}}}});
  ASSERT_TRUE(dc.sync->BuildRound(1).ok());
  clock.now = t0 + absl::Seconds(130);
  dc.Step({{0, {{1}}}});
  ASSERT_TRUE(dc.sync->BuildRound(2).ok());
  EXPECT_TRUE(dc.sync->MustHold(t0 + absl::Seconds(160)));
  clock.now = t0 + absl::Seconds(150);
  ASSERT_TRUE(dc.sync->ApplyAnswer(1, {Fp32Chunk(0, {0.0f})}).ok());
  EXPECT_FALSE(dc.sync->MustHold(t0 + absl::Seconds(209)));
  EXPECT_TRUE(dc.sync->MustHold(t0 + absl::Seconds(210)));
}

TEST(GradientSynchronizerTest, BadAnswersChangeNothing) {
  DataCenter dc(PlainSgd(), Constant(0.1), {{0, {1.0f, 2.0f}}, {1, {3.0f}}},
                Fp32Options(0.0));
  dc.Step({{0, {{1, 1}}}, {1, {{0}}}});  // chunk 1 does not move
  absl::StatusOr<SyncRound> round = dc.sync->BuildRound(0);
  ASSERT_TRUE(round.ok());
  ASSERT_EQ(round->updates.size(), 1u);
  const std::vector<float> w = Copy(*dc.state->Weights(0));
  const std::vector<float> last = Copy(*dc.sync->LastRoundWeights(0));
  const ChunkPayload good = Fp32Chunk(0, {0.5f, 0.5f});
  const auto expect_bad = [&](std::vector<ChunkPayload> answer,
                              const std::string& why) {
    ExpectStatus(dc.sync->ApplyAnswer(0, answer),
                 absl::StatusCode::kInvalidArgument, why);
    EXPECT_EQ(Copy(*dc.state->Weights(0)), w);
    EXPECT_EQ(Copy(*dc.sync->LastRoundWeights(0)), last);
    EXPECT_EQ(dc.sync->rounds_waiting(), 1u);
  };
  expect_bad({good, Fp32Chunk(7, {1.0f})}, "chunk 7, which is not on");
  expect_bad({good, good}, "chunk 0 twice");
  expect_bad({Fp32Chunk(0, {1.0f, 2.0f, 3.0f})}, "chunk 0: payload has 3");
  expect_bad({Fp32Chunk(0, {1.0f, std::numeric_limits<float>::infinity()})},
             "chunk 0 has inf at element 1");
  // The magnitude rule (issue 14): finite, but beyond 1e30, in a value or
  // a scaler.
  expect_bad({Fp32Chunk(0, {1.0f, 3e38f})},
             "chunk 0: element 1 is 3e+38, beyond 1e+30 (the magnitude rule");
  {
    kernels::EncodeContext huge;
    huge.scaler = 1.0f;
    ChunkPayload scaled{0, *CodecFor(kernels::CodecId::kTernGrad)
                                ->Encode(std::vector<float>{1, -1}, huge)};
    scaled.payload.scalers[0] = 3.4e38f;
    expect_bad({scaled}, "chunk 0: scaler is 3.4e+38, beyond 1e+30");
  }
  ChunkPayload onebit = good;
  onebit.payload.codec = kernels::CodecId::kOneBit;
  expect_bad({onebit}, "codec onebit");
  ChunkPayload corrupt = good;
  corrupt.payload.data.pop_back();
  expect_bad({corrupt}, "chunk 0");
  expect_bad({Fp32Chunk(1, {0.0f})}, "chunk 0 was sent in round 0");
  expect_bad({}, "the answer lacks it");
  ExpectStatus(dc.sync->ApplyAnswer(1, {good}),
               absl::StatusCode::kFailedPrecondition, "round 0 waits");
  // Terngrad and int8 answers decode too.
  kernels::EncodeContext context;
  context.scaler = 0.5f;  // |A| = s: every code is +-1
  // The encoder's own scaler, so clip at it (not at this constant chunk's
  // own c * sigma = 0, kernels::ClipRule::kWorker).
  context.clip_bound = context.scaler;
  const kernels::Payload ternary =
      *CodecFor(kernels::CodecId::kTernGrad)
           ->Encode(std::vector<float>{0.5f, 0.5f}, context);
  EXPECT_TRUE(dc.sync->ApplyAnswer(0, {ChunkPayload{0, ternary}}).ok());
  EXPECT_EQ(Copy(*dc.sync->LastRoundWeights(0)),
            (std::vector<float>{1.5f, 2.5f}));
}

// Each answer within the magnitude rule, but the second would take W_last
// (and W) to 1.2e30: refused, nothing changes, and a sane answer to the
// same round applies.
TEST(GradientSynchronizerTest, AnAnswerTakingWBeyondTheRuleIsRefused) {
  DataCenter dc(PlainSgd(), Constant(1.0), {{0, {0.0f, 0.0f}}},
                Fp32Options(0.0));
  dc.Step({{0, {{1, 1}}}});
  ASSERT_TRUE(dc.sync->BuildRound(0).ok());
  ASSERT_TRUE(dc.sync->ApplyAnswer(0, {Fp32Chunk(0, {6e29f, 0.0f})}).ok());
  dc.Step({{0, {{1, 1}}}});
  ASSERT_TRUE(dc.sync->BuildRound(1).ok());
  const std::vector<float> w = Copy(*dc.state->Weights(0));
  const std::vector<float> last = Copy(*dc.sync->LastRoundWeights(0));
  ExpectStatus(dc.sync->ApplyAnswer(1, {Fp32Chunk(0, {6e29f, 0.0f})}),
               absl::StatusCode::kInvalidArgument,
               "answer to round 1, chunk 0: applying it would take element "
               "0's weight to 1.2e+30, beyond 1e+30 (the magnitude rule");
  EXPECT_EQ(Copy(*dc.state->Weights(0)), w);
  EXPECT_EQ(Copy(*dc.sync->LastRoundWeights(0)), last);
  EXPECT_EQ(dc.sync->rounds_waiting(), 1u);
  ASSERT_TRUE(dc.sync->ApplyAnswer(1, {Fp32Chunk(0, {-6e29f, -1.0f})}).ok());
  EXPECT_EQ(Copy(*dc.sync->LastRoundWeights(0)),
            (std::vector<float>{last[0] - 6e29f, -1.0f}));
}

TEST(GradientSynchronizerTest, BuildRoundChecksTheRoundNumber) {
  SynchronizerOptions options = Fp32Options(0.0);
  options.first_round = 5;
  DataCenter dc(PlainSgd(), Constant(0.1), {{0, {0.0f}}}, options);
  dc.Step({{0, {{1}}}});
  ExpectStatus(dc.sync->BuildRound(0).status(),
               absl::StatusCode::kFailedPrecondition, "the next round is 5");
  EXPECT_TRUE(dc.sync->BuildRound(5).ok());
  ExpectStatus(dc.sync->BuildRound(6).status(),
               absl::StatusCode::kFailedPrecondition, "not due");
}

TEST(GradientSynchronizerTest, CreateRejectsWhatCannotWork) {
  std::unique_ptr<LpsState> state =
      *LpsState::Create(PlainSgd(), Constant(0.1), {{0, {0.0f}}});
  const auto create = [&](SynchronizerOptions options) {
    return GradientSynchronizer::Create(std::move(options), state.get())
        .status();
  };
  EXPECT_TRUE(create(SynchronizerOptions()).ok());
  ExpectStatus(
      GradientSynchronizer::Create(SynchronizerOptions(), nullptr).status(),
      absl::StatusCode::kInvalidArgument, "LpsState");
  SynchronizerOptions options;
  options.sync_every = 0;
  ExpectStatus(create(options), absl::StatusCode::kInvalidArgument,
               "sync_every");
  for (const double g : {-1.0, std::nan("")}) {
    options = SynchronizerOptions();
    options.g_thresh = g;
    ExpectStatus(create(options), absl::StatusCode::kInvalidArgument,
                 "g_thresh");
  }
  options = SynchronizerOptions();
  options.gaia_threshold = 0.0;
  ExpectStatus(create(options), absl::StatusCode::kInvalidArgument,
               "gaia_threshold");
  options = SynchronizerOptions();
  options.sync_timeout = absl::ZeroDuration();
  ExpectStatus(create(options), absl::StatusCode::kInvalidArgument,
               "sync_timeout");
  options = SynchronizerOptions();
  options.ternary_layout = kernels::Layout::kSumBits;
  ExpectStatus(create(options), absl::StatusCode::kInvalidArgument,
               "push layout SUM_BITS");
  options = SynchronizerOptions();
  options.clip = -1.0f;
  ExpectStatus(create(options), absl::StatusCode::kInvalidArgument, "clip");
  EXPECT_EQ(*ParseSyncMode("gaia"), SyncMode::kGaia);
  EXPECT_EQ(*ParseSyncMode("ternary"), SyncMode::kTernary);
  EXPECT_EQ(*ParseSyncMode("fp32"), SyncMode::kFp32);
  ExpectStatus(ParseSyncMode("Gaia").status(),
               absl::StatusCode::kInvalidArgument, "unknown sync mode");
}

// A default ternary run on a synthetic model: half of the chunks have a
// steady true gradient under minibatch noise, half only noise; each worker
// ternarizes its gradient as a TernGrad worker does. The dynamic threshold
// must send a fraction of the chunks that is neither all nor none, and
// prefer the steady ones. server/WEIGHTGRAD.md quotes the numbers.
TEST(GradientSynchronizerTest, DefaultRunSendsASensibleFraction) {
  constexpr uint32_t kWorkers = 4;
  constexpr uint32_t kChunks = 24;
  constexpr size_t kSize = 2000;
  constexpr int kRounds = 30;
  std::vector<LpsChunk> chunks;
  std::vector<std::vector<float>> signal(kChunks);
  for (uint32_t k = 0; k < kChunks; ++k) {
    chunks.push_back({k, Gaussian(kSize, k, 0.0f, 0.05f)});
    signal[k] = k % 2 == 0 ? Gaussian(kSize, 500 + k, 0.0f, 0.5f)
                           : std::vector<float>(kSize, 0.0f);
  }
  LpsStateOptions lps;
  lps.num_workers = kWorkers;   // momentum 0.9 by default
  SynchronizerOptions options;  // ternary, sync_every 10, dynamic threshold
  DataCenter dc(lps, Constant(0.01), chunks, options);
  std::unique_ptr<kernels::Codec> terngrad =
      CodecFor(kernels::CodecId::kTernGrad);
  int sent[2] = {0, 0};
  std::mt19937 rng(1);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  std::vector<int> per_round;
  std::vector<double> mean_significance[2];
  for (int r = 0; r < kRounds; ++r) {
    while (!dc.sync->RoundDue()) {
      const uint64_t step = dc.state->completed_steps();
      for (uint32_t w = 0; w < kWorkers; ++w) {
        for (uint32_t k = 0; k < kChunks; ++k) {
          std::vector<float> g(kSize);
          for (size_t i = 0; i < kSize; ++i) g[i] = signal[k][i] + noise(rng);
          kernels::EncodeContext context;
          context.stream = RandomStream{1, static_cast<uint32_t>(step), k, w};
          const std::vector<float> decoded =
              DecodePayload(*terngrad->Encode(g, context));
          ASSERT_TRUE(dc.sync->ApplyGradient(w, step, k, decoded).ok());
        }
      }
    }
    absl::StatusOr<SyncRound> round = dc.sync->BuildRound(r);
    ASSERT_TRUE(round.ok()) << round.status();
    int sent_now = 0;
    double sig[2] = {0, 0};
    for (const ChunkDecision& d : round->decisions) {
      sent[d.key % 2] += d.sent;
      sent_now += d.sent;
      sig[d.key % 2] += d.significance / (kChunks / 2);
    }
    mean_significance[0].push_back(sig[0]);
    mean_significance[1].push_back(sig[1]);
    per_round.push_back(sent_now);
    ASSERT_TRUE(dc.sync->ApplyAnswer(r, Average({*round})).ok());
  }
  const double steady = sent[0] / (kRounds * kChunks / 2.0);
  const double noisy = sent[1] / (kRounds * kChunks / 2.0);
  std::cout << "default ternary run, N = 4, sync_every = 10, m = 0.9: G = "
            << *dc.sync->g_thresh() << "; sent per round of " << kChunks << ":";
  for (const int n : per_round) std::cout << " " << n;
  std::cout << "\nsteady chunks sent in " << steady
            << " of rounds, noise-only chunks in " << noisy
            << "\nmean significance, steady / noise, rounds 0, 1, 2, last:";
  for (const int r : {0, 1, 2, kRounds - 1}) {
    std::cout << " " << mean_significance[0][r] << " / "
              << mean_significance[1][r] << ",";
  }
  std::cout << "\n";
  EXPECT_GT(steady, noisy);
  EXPECT_GT(steady, 0.5);
  EXPECT_GT(noisy, 0.0);
  EXPECT_LT(noisy, 0.8);
}

}  // namespace
}  // namespace tern::server
