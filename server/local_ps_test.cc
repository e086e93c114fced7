#include "server/local_ps.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/captured_log.h"
#include "core/barrier.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/codec.h"
#include "kernels/codec_registry.h"
#include "server/local_ps_fixture.h"
#include "server/lps_state.h"
#include "server/messages.h"

namespace tern::server {
namespace {

TEST_F(LocalPsTest, AppliesEachGradientAtOnceAndAnswersWithTheWeights) {
  std::unique_ptr<LocalPs> lps = MakeLps(/*global=*/false);
  JoinBoth(*lps);
  auto first = PushAsync(*lps, Push(0, 0, 1.0f));
  ASSERT_TRUE(first->has_value());
  ASSERT_TRUE(first->value().ok()) << first->value().status();
  // Only worker 0's gradient is in: W0 - lr * 1.
  const PushAnswer& answer = *first->value();
  ASSERT_EQ(answer->chunks.size(), 2u);
  for (uint32_t k = 0; k < 2; ++k) {
    const std::vector<float> w = Decode(answer->chunks[k].payload);
    for (size_t i = 0; i < w.size(); ++i) {
      EXPECT_EQ(w[i], weights_[k][i] - kLr * 1.0f) << k << " " << i;
    }
  }
  EXPECT_EQ(answer->param_checksum, 0u);
  auto second = PushAsync(*lps, Push(1, 0, 2.0f));
  ASSERT_TRUE(second->has_value() && second->value().ok());
  const std::vector<float> w = Decode((*second->value())->chunks[1].payload);
  EXPECT_EQ(w[3], (weights_[1][3] - kLr * 1.0f) - kLr * 2.0f);
  EXPECT_EQ(lps->completed_steps(), 1u);
}

// A push the LPS cannot read is refused whole, naming the step, chunk,
// worker and field, and leaves the weights as they were: the same
// worker's valid push afterwards is the step's first gradient.
TEST_F(LocalPsTest, RefusesPushesItCannotReadAndAppliesNothingOfThem) {
  std::unique_ptr<LocalPs> lps = MakeLps(/*global=*/false);
  JoinBoth(*lps);
  struct Bad {
    std::function<void(kernels::Payload&)> spoil;
    std::string message;
  };
  const std::vector<Bad> bad = {
      {[](kernels::Payload& p) { p.format_version = 2; },
       "step 0: chunk 1 of worker 0: format version 2 is not supported "
       "(this LPS reads 1)"},
      {[](kernels::Payload& p) { p.format_version = 0; },
       "format version 0 is not supported"},
      {[](kernels::Payload& p) { p.num_summands = 2; }, "num_summands 2"},
      {[](kernels::Payload& p) { p.num_elements += 1; },
       "6 elements, but the chunk has 5"},
      {[](kernels::Payload& p) {
         const float nan = std::nanf("");
         std::memcpy(p.data.data(), &nan, sizeof(nan));  // fp32: raw floats
       },
       "element 0 is nan"},
  };
  for (const Bad& b : bad) {
    PushRequest request = Push(0, 0, 1.0f);
    b.spoil(request.chunks[1].payload);  // chunk 0 is valid: not applied
    auto answer = PushAsync(*lps, request);
    ASSERT_TRUE(answer->has_value()) << b.message;
    EXPECT_TRUE(absl::IsInvalidArgument(answer->value().status()))
        << answer->value().status();
    EXPECT_NE(answer->value().status().message().find(b.message),
              std::string::npos)
        << answer->value().status();
  }
  auto good = PushAsync(*lps, Push(0, 0, 1.0f));
  ASSERT_TRUE(good->has_value() && good->value().ok());
  const std::vector<float> w = Decode((*good->value())->chunks[0].payload);
  EXPECT_EQ(w[0], weights_[0][0] - kLr * 1.0f);
  EXPECT_EQ(lps->completed_steps(), 0u);
}

TEST_F(LocalPsTest, HoldsAWorkerThatLeadsUntilTheStepCompletes) {
  std::unique_ptr<LocalPs> lps = MakeLps(false);
  JoinBoth(*lps);
  ASSERT_TRUE(PushAsync(*lps, Push(0, 0, 1.0f))->has_value());
  auto ahead = PushAsync(*lps, Push(0, 1, 1.0f));
  EXPECT_FALSE(ahead->has_value());  // step 0 is still open
  ASSERT_TRUE(PushAsync(*lps, Push(1, 0, 1.0f))->has_value());
  ASSERT_TRUE(ahead->has_value());
  EXPECT_TRUE(ahead->value().ok());
}

TEST_F(LocalPsTest, AHoldEndsAtTheLimitNamingTheWait) {
  std::unique_ptr<LocalPs> lps = MakeLps(false);
  JoinBoth(*lps);
  ASSERT_TRUE(PushAsync(*lps, Push(0, 0, 1.0f))->has_value());
  auto ahead = PushAsync(*lps, Push(0, 1, 1.0f));
  now_ += absl::Seconds(4);
  EXPECT_TRUE(lps->ExpireWaits(now_).ok());
  EXPECT_FALSE(ahead->has_value());
  now_ += absl::Seconds(2);
  EXPECT_TRUE(lps->ExpireWaits(now_).ok());
  ASSERT_TRUE(ahead->has_value());
  EXPECT_TRUE(absl::IsDeadlineExceeded(ahead->value().status()));
}

TEST_F(LocalPsTest, TheLastStepIsAnsweredWithTheFinalModelAndItsChecksum) {
  steps_ = 1;
  std::unique_ptr<LocalPs> lps = MakeLps(false);
  JoinBoth(*lps);
  auto first = PushAsync(*lps, Push(0, 0, 1.0f));
  EXPECT_FALSE(first->has_value());  // the last step waits for the end
  auto second = PushAsync(*lps, Push(1, 0, 1.0f));
  ASSERT_TRUE(first->has_value() && second->has_value());
  ASSERT_TRUE(first->value().ok()) << first->value().status();
  EXPECT_TRUE(lps->finished());
  EXPECT_EQ((*first->value())->param_checksum, lps->checksum());
  EXPECT_NE(lps->checksum(), checksum_);
  EXPECT_EQ((*first->value())->chunks[0].payload.codec,
            kernels::CodecId::kFp32);
  // A push beyond the run is refused.
  auto beyond = PushAsync(*lps, Push(0, 1, 1.0f));
  ASSERT_TRUE(beyond->has_value());
  EXPECT_TRUE(absl::IsFailedPrecondition(beyond->value().status()));
}

TEST_F(LocalPsTest, RoundsAndTheFinalSynchronizationWithAGlobalServer) {
  steps_ = 2;
  std::unique_ptr<LocalPs> lps = MakeLps(/*global=*/true);
  JoinBoth(*lps);
  absl::StatusOr<std::optional<GsRegistration>> registration =
      lps->WaitForRegistration(absl::ZeroDuration());
  ASSERT_TRUE(registration.ok() && registration->has_value());
  EXPECT_EQ((*registration)->chunk_elements, (std::vector<uint64_t>{33, 5}));
  EXPECT_EQ((*registration)->param_checksum, checksum_);
  EXPECT_TRUE(lps->CheckFirstRound(0).ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(lps->CheckFirstRound(4)));

  // Step 0 completes: round 0 (sync_every 1) is built there.
  PushAsync(*lps, Push(0, 0, 1.0f));
  PushAsync(*lps, Push(1, 0, 1.0f));
  absl::StatusOr<std::optional<SyncRound>> round =
      lps->NextRound(absl::ZeroDuration());
  ASSERT_TRUE(round.ok() && round->has_value()) << round.status();
  EXPECT_EQ((*round)->round, 0u);
  EXPECT_EQ((*round)->local_step, 1u);
  // A GS of one data center answers with the update itself.
  GsAnswer answer{0, (*round)->updates, {}};
  ASSERT_TRUE(lps->ApplyRoundAnswer(**round, answer, absl::Seconds(1)).ok());

  // The last step waits for the final round: every chunk in fp32.
  auto last0 = PushAsync(*lps, Push(0, 1, 1.0f));
  auto last1 = PushAsync(*lps, Push(1, 1, 1.0f));
  EXPECT_FALSE(last0->has_value() || last1->has_value());
  absl::StatusOr<std::optional<SyncRound>> final_round =
      lps->NextRound(absl::ZeroDuration());
  ASSERT_TRUE(final_round.ok() && final_round->has_value());
  EXPECT_EQ((*final_round)->round, 1u);
  ASSERT_EQ((*final_round)->updates.size(), 2u);
  EXPECT_EQ((*final_round)->updates[0].payload.codec, kernels::CodecId::kFp32);
  // Another data center moved chunk 1 by +1 per element: the average is
  // half of the sum, and W ends at W_last + A.
  GsAnswer final_answer{1, (*final_round)->updates, {}};
  std::vector<float> other = Decode(final_answer.average[1].payload);
  for (float& v : other) v += 1.0f;
  final_answer.average[1].payload = Encode(other);
  EXPECT_FALSE(lps->finished());
  ASSERT_TRUE(
      lps->ApplyRoundAnswer(**final_round, final_answer, absl::Seconds(1))
          .ok());
  EXPECT_TRUE(lps->finished());
  ASSERT_TRUE(last0->has_value() && last1->has_value());
  ASSERT_TRUE(last0->value().ok());
  EXPECT_EQ((*last0->value())->param_checksum, lps->checksum());
  absl::StatusOr<std::optional<SyncRound>> done =
      lps->NextRound(absl::ZeroDuration());
  EXPECT_TRUE(absl::IsCancelled(done.status()));
}

// `tern ps --run_id`: a join of another run configures nothing.
TEST_F(LocalPsTest, AJoinOfAnotherRunIsRefusedBeforeItConfiguresAnything) {
  std::unique_ptr<LocalPs> lps = MakeLps(false, 64ull << 20, "test");
  std::optional<absl::Status> status;
  JoinRequest other = Join(0);
  other.config.run_id = "other";
  lps->Join(other, [&](absl::StatusOr<JoinReply> r) { status = r.status(); });
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(absl::IsPermissionDenied(*status)) << *status;
  EXPECT_THAT(std::string(status->message()),
              ::testing::Not(::testing::HasSubstr("'test'")));
  JoinBoth(*lps);  // the run's own workers then configure it
}

TEST_F(LocalPsTest, RefusesJoinsThatDoNotFit) {
  std::unique_ptr<LocalPs> lps = MakeLps(false);
  std::optional<absl::Status> status;
  auto record = [&](absl::StatusOr<JoinReply> reply) {
    status = reply.status();
  };
  JoinRequest terngrad = Join(0);
  terngrad.config.mode = RunMode::kTernGrad;
  lps->Join(terngrad, record);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(absl::IsInvalidArgument(*status)) << *status;

  JoinRequest no_weights = Join(0);
  no_weights.initial_weights.clear();
  lps->Join(no_weights, record);
  EXPECT_TRUE(absl::IsInvalidArgument(*status)) << *status;

  JoinRequest wrong_checksum = Join(0);
  wrong_checksum.param_checksum ^= 1;
  status.reset();
  lps->Join(wrong_checksum, record);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(absl::IsInvalidArgument(*status)) << *status;

  // A valid join (waiting for worker 1) fixes the optimizer: another lr
  // is refused.
  status.reset();
  lps->Join(Join(0), record);
  EXPECT_FALSE(status.has_value());
  JoinRequest other_lr = Join(1);
  other_lr.config.optimizer.lr = 0.1;
  lps->Join(other_lr, record);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(absl::IsFailedPrecondition(*status)) << *status;
  // Closing answers worker 0's pending join while `status` still lives.
  lps.reset();
  EXPECT_TRUE(absl::IsUnavailable(*status)) << *status;
}

// Issue 14 at the LPS: a join of a few bytes declaring one tensor of 2^31
// elements cut at 4 bytes (2^31 chunks) is refused before the LPS cuts the
// model, and fixes nothing: the run's own workers join after it.
TEST_F(LocalPsTest, AJoinDeclaringTwoToThe31ChunksIsRefusedBeforeCutting) {
  std::optional<absl::Status> status;
  std::unique_ptr<LocalPs> lps = MakeLps(false);
  JoinRequest attack = Join(1);  // worker 1 sends no weights: the model only
  attack.config.partition_bytes = 4;
  attack.tensors = {TensorSpec{"w", {int64_t{1} << 31}}};
  const absl::Time start = absl::Now();
  lps->Join(attack, [&](absl::StatusOr<JoinReply> r) { status = r.status(); });
  EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << "counted, not cut";
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(absl::IsFailedPrecondition(*status)) << *status;
  EXPECT_EQ(status->message(),
            "the model's 2147483648 elements in 2147483648 chunks take "
            "283467841536 bytes in fp32, more than 1 shard with a limit of 64 "
            "MiB (--max_message_mb) can carry; raise --max_message_mb of the "
            "LPS or a larger --partition_bytes");
  JoinBoth(*lps);
}

// The LPS is its data center's one shard: a model that fills one message
// to the byte joins (and waits for the others); one element more is
// refused.
TEST_F(LocalPsTest, AModelThatFillsOneMessageJoinsAndOneElementMoreDoesNot) {
  constexpr uint64_t kLimit = 2ull << 20;  // 1 MiB of room after the slack
  const int64_t fits = ((1 << 20) - 128) / 4;  // one chunk of it
  for (const int64_t elements : {fits, fits + 1}) {
    std::optional<absl::Status> status;
    std::unique_ptr<LocalPs> lps = MakeLps(false, kLimit);
    JoinRequest join = Join(1);
    join.config.partition_bytes = 1 << 20;
    join.tensors = {TensorSpec{"w", {elements}}};
    lps->Join(join, [&](absl::StatusOr<JoinReply> r) { status = r.status(); });
    if (elements == fits) {
      EXPECT_FALSE(status.has_value()) << "accepted, waiting for worker 0";
    } else {
      ASSERT_TRUE(status.has_value());
      EXPECT_TRUE(absl::IsFailedPrecondition(*status)) << *status;
    }
    lps.reset();  // answers a waiting join while `status` lives
  }
}

// The core's expiry rule for joins: a Join call waits at most the barrier
// timeout (hold_limit, 5 s here) from its arrival, and exactly at its
// deadline it is answered DEADLINE_EXCEEDED naming the missing worker; the
// join phase stays open (the worker retries and completes it), and only
// join_timeout, counted from the LPS's creation, ends the process's wait.
TEST_F(LocalPsTest, AJoinWaitsTheBarrierTimeoutAndTheJoinPhaseJoinTimeout) {
  std::unique_ptr<LocalPs> lps = MakeLps(false);  // join_timeout 300 s
  std::optional<absl::StatusOr<JoinReply>> first;
  lps->Join(Join(0), [&](absl::StatusOr<JoinReply> r) { first = r; });
  now_ += absl::Seconds(5) - absl::Nanoseconds(1);
  EXPECT_TRUE(lps->ExpireWaits(now_).ok());
  EXPECT_FALSE(first.has_value());
  now_ += absl::Nanoseconds(1);  // exactly at the deadline: expired
  EXPECT_TRUE(lps->ExpireWaits(now_).ok());
  ASSERT_TRUE(first.has_value());
  EXPECT_TRUE(absl::IsDeadlineExceeded(first->status())) << first->status();
  EXPECT_THAT(std::string(first->status().message()),
              ::testing::HasSubstr("worker 1 did not join the LPS within 5s"));

  // The retry of worker 0 and worker 1's join complete the barrier.
  std::optional<absl::StatusOr<JoinReply>> retry;
  std::optional<absl::StatusOr<JoinReply>> second;
  lps->Join(Join(0), [&](absl::StatusOr<JoinReply> r) { retry = r; });
  EXPECT_FALSE(retry.has_value());
  lps->Join(Join(1), [&](absl::StatusOr<JoinReply> r) { second = r; });
  ASSERT_TRUE(retry.has_value() && second.has_value());
  EXPECT_TRUE(retry->ok()) << retry->status();
  EXPECT_TRUE(second->ok()) << second->status();
  now_ += absl::Seconds(400);
  EXPECT_TRUE(lps->ExpireWaits(now_).ok());  // everyone joined
}

// --- the waiting calls of one worker are bounded ---

TEST_F(LocalPsTest, DuplicatePushesBeyondTheCapAreRefusedAtOnce) {
  std::unique_ptr<LocalPs> lps = MakeLps(false);
  JoinBoth(*lps);
  ASSERT_TRUE(PushAsync(*lps, Push(0, 0, 1.0f))->has_value());
  // Step 1 of worker 0 waits for step 0, and so do its copies, up to the
  // cap (each copy is found applied already).
  std::vector<std::shared_ptr<std::optional<absl::StatusOr<PushAnswer>>>> held;
  for (size_t i = 0; i < core::kMaxWaitsPerMember; ++i) {
    held.push_back(PushAsync(*lps, Push(0, 1, 1.0f)));
    EXPECT_FALSE(held.back()->has_value());
  }
  auto beyond = PushAsync(*lps, Push(0, 1, 1.0f));
  ASSERT_TRUE(beyond->has_value()) << "answered at once";
  EXPECT_TRUE(absl::IsResourceExhausted(beyond->value().status()));
  EXPECT_EQ(beyond->value().status().message(),
            "worker 0 already has 5 calls waiting for step 1; this one is "
            "refused (retries never need more at once)");
  // Worker 1 completes step 0: the held calls get the weights, all alike.
  ASSERT_TRUE(PushAsync(*lps, Push(1, 0, 1.0f))->has_value());
  for (const auto& call : held) {
    ASSERT_TRUE(call->has_value());
    ASSERT_TRUE(call->value().ok()) << call->value().status();
    EXPECT_EQ(Decode((*call->value())->chunks[0].payload),
              Decode((*held[0]->value())->chunks[0].payload));
  }
  // Worker 0's step 1 counted once: W0 - lr * (1 + 1) - lr * 1.
  const std::vector<float> w = Decode((*held[0]->value())->chunks[0].payload);
  EXPECT_EQ(w[0], weights_[0][0] - 3 * kLr);
}

TEST_F(LocalPsTest, DuplicateJoinsBeyondTheCapAreRefusedAtOnce) {
  std::unique_ptr<LocalPs> lps = MakeLps(false);
  std::vector<std::optional<absl::StatusOr<JoinReply>>> held(
      core::kMaxWaitsPerMember);
  for (auto& reply : held) {
    lps->Join(Join(1), [&reply](absl::StatusOr<JoinReply> r) { reply = r; });
  }
  std::optional<absl::StatusOr<JoinReply>> beyond;
  lps->Join(Join(1), [&](absl::StatusOr<JoinReply> r) { beyond = r; });
  ASSERT_TRUE(beyond.has_value());
  EXPECT_TRUE(absl::IsResourceExhausted(beyond->status())) << beyond->status();
  EXPECT_THAT(std::string(beyond->status().message()),
              ::testing::HasSubstr(
                  "worker 1 already has 5 calls waiting for the join"));
  std::optional<absl::StatusOr<JoinReply>> first;
  lps->Join(Join(0), [&](absl::StatusOr<JoinReply> r) { first = r; });
  ASSERT_TRUE(first.has_value() && first->ok());
  for (const auto& reply : held) {
    ASSERT_TRUE(reply.has_value());
    EXPECT_TRUE(reply->ok()) << reply->status();
  }
}

// --- refusals are logged at a bounded rate ---

TEST_F(LocalPsTest, AThousandRefusedPushesLogABoundedNumberOfLines) {
  CapturedLog log;
  logger_ = log.logger();
  std::unique_ptr<LocalPs> lps = MakeLps(false);
  for (int i = 0; i < 1000; ++i) {
    auto answer = PushAsync(*lps, Push(0, 0, 1.0f));  // before joining
    ASSERT_TRUE(answer->has_value());
    EXPECT_TRUE(absl::IsFailedPrecondition(answer->value().status()));
  }
  std::vector<std::string> lines = log.Lines(spdlog::level::warn);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0],
            "push of worker 0 for step 0 refused: worker 0 has not joined "
            "(Join comes first)");
  now_ += absl::Seconds(60);
  EXPECT_TRUE(lps->ExpireWaits(now_).ok());
  lines = log.Lines(spdlog::level::warn);
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines.back(),
            "995 more refusals of push FAILED_PRECONDITION from worker 0 in "
            "the last 60 s were not logged");
}

TEST_F(LocalPsTest, TheJoinPhaseEndsAtTheJoinTimeoutFromCreation) {
  std::unique_ptr<LocalPs> lps = MakeLps(false);
  lps->Join(Join(0), [](absl::StatusOr<JoinReply>) {});
  now_ += absl::Seconds(300) - absl::Nanoseconds(1);
  EXPECT_TRUE(lps->ExpireWaits(now_).ok());
  now_ += absl::Nanoseconds(1);
  const absl::Status status = lps->ExpireWaits(now_);
  EXPECT_TRUE(absl::IsDeadlineExceeded(status)) << status;
  EXPECT_THAT(std::string(status.message()),
              ::testing::HasSubstr("only 1 of 2 workers joined within 300s"));
}

TEST_F(LocalPsTest, ALaterJoinerThatDiffersIsToldTheFieldAndBothValues) {
  std::unique_ptr<LocalPs> lps = MakeLps(false);
  lps->Join(Join(0), [](absl::StatusOr<JoinReply>) {});
  JoinRequest other_seed = Join(1);
  other_seed.config.seed = 99;
  std::optional<absl::Status> status;
  lps->Join(other_seed, [&](absl::StatusOr<JoinReply> r) {
    status = r.status();
  });
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(absl::IsFailedPrecondition(*status)) << *status;
  EXPECT_EQ(status->message(),
            "seed 99 of worker 1 differs from 0 of worker 0: every worker "
            "must run with the same flags and model");
}

}  // namespace
}  // namespace tern::server
