// Issue 14 at the LPS: the magnitude rule (core/payload_validation.h,
// global/README.md). A worker's push that is finite but beyond the rule
// (a scaler of 3.4e38), or within it but carried beyond it by the learning
// rate or the momentum, is refused for that worker, naming the worker, the
// chunk and the rule, and leaves the weights as they were; the next good
// push applies normally. A GS answer beyond the rule is refused the same
// way, before anything changes.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/codec.h"
#include "kernels/codec_options.h"
#include "kernels/codec_registry.h"
#include "server/local_ps.h"
#include "server/lps_state.h"
#include "server/messages.h"

namespace tern::server {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::unique_ptr<kernels::Codec> MakeCodec(kernels::CodecId id) {
  kernels::CodecOptions options;
  options.id = id;
  if (id == kernels::CodecId::kFp32) {
    options.push_layout = options.pull_layout = kernels::Layout::kRaw;
  }
  return *kernels::MakeCodec(options);
}

kernels::Payload Fp32(const std::vector<float>& values) {
  return *MakeCodec(kernels::CodecId::kFp32)
              ->Encode(values, kernels::EncodeContext());
}

std::vector<float> Decode(const kernels::Payload& payload) {
  std::vector<float> values(payload.num_elements);
  EXPECT_TRUE(
      MakeCodec(payload.codec)->Decode(payload, absl::MakeSpan(values)).ok());
  return values;
}

// A TernGrad push of g = scaler * codes. The values are 0 or +-scaler, so
// the stochastic rounding is exact and the codes are `codes`.
kernels::Payload Ternary(float scaler, const std::vector<float>& codes) {
  std::vector<float> values;
  for (const float code : codes) values.push_back(code * scaler);
  kernels::EncodeContext context;
  context.scaler = scaler;
  return *MakeCodec(kernels::CodecId::kTernGrad)->Encode(values, context);
}

const std::vector<float> kCodes = {1, -1, 0, 1, 0, -1};

// A WeightGrad LPS of one worker (every push completes a local step) and
// one chunk of 6 weights, answered in fp32.
class LocalPsMagnitudeTest : public ::testing::Test {
 protected:
  std::unique_ptr<LocalPs> Start(double lr, double momentum, bool global) {
    std::vector<LpsChunk> chunks = {LpsChunk{0, weights_}};
    const uint64_t checksum =
        (*LpsState::Create(
             LpsStateOptions{},
             *LrSchedule::Create(LrScheduleKind::kConstant, 0, 1, 1, 1),
             std::move(chunks)))
            ->Checksum();
    LocalPsOptions options;
    options.mode = RunMode::kWeightGrad;
    options.num_workers = 1;
    options.weight_codec = kernels::CodecId::kFp32;
    options.global = global;
    options.sync_every = 1;
    options.g_thresh = 0.0;  // every chunk that moved is sent
    options.clock = [] { return absl::FromUnixSeconds(1000); };
    std::unique_ptr<LocalPs> lps = *LocalPs::Create(options, nullptr);

    JoinRequest join;
    join.config.run_id = "magnitude";
    join.config.num_workers = 1;
    join.config.num_shards = 1;
    join.config.partition_bytes = 4 << 20;
    join.config.codec = kernels::CodecId::kTernGrad;
    join.config.mode = RunMode::kWeightGrad;
    join.config.optimizer.lr = lr;
    join.config.optimizer.momentum = momentum;
    join.config.optimizer.lr_schedule = "constant";
    join.config.optimizer.lr_step_every = 1;
    join.config.optimizer.steps = 10;
    join.tensors = {TensorSpec{"w", {6}}};
    join.param_spec_hash = 1;
    join.param_checksum = checksum;
    join.initial_weights = {ChunkPayload{0, Fp32(weights_)}};
    std::optional<absl::StatusOr<JoinReply>> joined;
    lps->Join(join, [&](absl::StatusOr<JoinReply> r) { joined = r; });
    EXPECT_TRUE(joined.has_value() && joined->ok());
    return lps;
  }

  // Pushes chunk 0 for `step`; the push is answered at once (one worker).
  absl::StatusOr<PushAnswer> Push(LocalPs& lps, uint64_t step,
                                  kernels::Payload gradient) {
    PushRequest request;
    request.worker_id = 0;
    request.step = step;
    request.chunks = {ChunkPayload{0, std::move(gradient)}};
    std::optional<absl::StatusOr<PushAnswer>> answer;
    lps.PushPull(request, [&](absl::StatusOr<PushAnswer> a) { answer = a; });
    EXPECT_TRUE(answer.has_value());
    return answer.value_or(absl::InternalError("not answered"));
  }

  std::vector<float> weights_ = {0.5f, -1.0f, 2.0f, 0.0f, 1.5f, -0.25f};
};

TEST_F(LocalPsMagnitudeTest, AHugeScalerIsRefusedAndChangesNothing) {
  std::unique_ptr<LocalPs> lps = Start(/*lr=*/0.5, /*momentum=*/0, false);
  const uint64_t before = lps->checksum();
  const absl::StatusOr<PushAnswer> refused =
      Push(*lps, 0, Ternary(3.4e38f, kCodes));
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()),
              AllOf(HasSubstr("step 0: chunk 0 of worker 0: scaler is "
                              "3.4e+38, beyond 1e+30"),
                    HasSubstr("the magnitude rule")));
  EXPECT_EQ(lps->checksum(), before);
  EXPECT_EQ(lps->completed_steps(), 0u);

  // The same step, sane: W - lr * g exactly (momentum 0).
  const absl::StatusOr<PushAnswer> good = Push(*lps, 0, Ternary(2, kCodes));
  ASSERT_TRUE(good.ok()) << good.status();
  const std::vector<float> w = Decode((*good)->chunks[0].payload);
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_EQ(w[i], weights_[i] - 0.5f * 2 * kCodes[i]) << i;
  }
  EXPECT_EQ(lps->completed_steps(), 1u);
}

// codes * scaler = 1e30 is within the rule, but lr 100 would move a weight
// by 1e32: refused before anything is applied.
TEST_F(LocalPsMagnitudeTest, AGradientTheLearningRateCarriesBeyondIsRefused) {
  std::unique_ptr<LocalPs> lps = Start(/*lr=*/100, /*momentum=*/0, false);
  const uint64_t before = lps->checksum();
  const absl::StatusOr<PushAnswer> refused =
      Push(*lps, 0, Ternary(1e30f, kCodes));
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()),
              AllOf(HasSubstr("step 0: chunk 0 of worker 0: applying it could "
                              "take element 0's weight to 1e+32"),
                    HasSubstr("lr 100"), HasSubstr("the magnitude rule")));
  EXPECT_EQ(lps->checksum(), before);
  const absl::StatusOr<PushAnswer> good = Push(*lps, 0, Ternary(1, kCodes));
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(Decode((*good)->chunks[0].payload)[1], weights_[1] + 100.0f);
}

// Each push within the rule, but the velocity v = m v + g of the second
// would pass 1e30 (0.9 * 6e29 + 6e29): the second is refused.
TEST_F(LocalPsMagnitudeTest, AGradientTheMomentumCarriesBeyondIsRefused) {
  std::unique_ptr<LocalPs> lps = Start(/*lr=*/0.5, /*momentum=*/0.9, false);
  ASSERT_TRUE(Push(*lps, 0, Ternary(6e29f, kCodes)).ok());
  const uint64_t before = lps->checksum();
  const absl::StatusOr<PushAnswer> refused =
      Push(*lps, 1, Ternary(6e29f, kCodes));
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("step 1: chunk 0 of worker 0: applying it could take "
                        "element 0's velocity to"));
  EXPECT_EQ(lps->checksum(), before);
  EXPECT_TRUE(Push(*lps, 1, Ternary(1, kCodes)).ok());
  EXPECT_EQ(lps->completed_steps(), 2u);
}

// A GS answer beyond the rule is refused (the synchronizer client then
// fails the run, server/gs_link.cc) and leaves W as it was; a sane answer
// to the same round applies.
TEST_F(LocalPsMagnitudeTest, AGsAnswerBeyondTheRuleChangesNothing) {
  std::unique_ptr<LocalPs> lps = Start(/*lr=*/0.5, /*momentum=*/0, true);
  ASSERT_TRUE(Push(*lps, 0, Ternary(1, kCodes)).ok());
  absl::StatusOr<std::optional<SyncRound>> round =
      lps->NextRound(absl::ZeroDuration());
  ASSERT_TRUE(round.ok() && round->has_value()) << round.status();
  ASSERT_EQ((*round)->updates.size(), 1u);
  const uint64_t before = lps->checksum();
  for (const kernels::Payload& bad :
       {Fp32({0, 3e38f, 0, 0, 0, 0}), Ternary(3.4e38f, kCodes)}) {
    const GsAnswer answer{0, {ChunkPayload{0, bad}}, {}};
    const absl::Status status =
        lps->ApplyRoundAnswer(**round, answer, absl::Seconds(1));
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_THAT(std::string(status.message()),
                AllOf(HasSubstr("answer to round 0, chunk 0"),
                      HasSubstr("beyond 1e+30 (the magnitude rule")));
    EXPECT_EQ(lps->checksum(), before);
  }
  const GsAnswer same{0, (*round)->updates, {}};
  EXPECT_TRUE(lps->ApplyRoundAnswer(**round, same, absl::Seconds(1)).ok());
}

}  // namespace
}  // namespace tern::server
