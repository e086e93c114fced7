// The checks of the shards' join answers: which steps a worker can resume
// from, and which it catches up on without a gradient.
#include "worker/join.h"

#include <memory>
#include <string>
#include <vector>

#include "common/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern::worker {
namespace {

using tern::v1::JoinResponse;
using ::testing::HasSubstr;

class JoinTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Channels connect lazily: nothing listens, nothing is called.
    absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Connect(
        {"127.0.0.1:1", "127.0.0.1:2"}, PsClientOptions{}, MakeNullLogger());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    plan_ = Plan(2);
  }

  // One tensor of 8 floats in a chunk per shard.
  static std::unique_ptr<ChunkPlan> Plan(uint32_t num_shards) {
    const std::vector<std::string> names = {"w"};
    const std::vector<uint64_t> elements = {8};
    absl::StatusOr<ChunkPlan> plan = MakeChunkPlan(
        names, elements, 4 * 8 / num_shards, num_shards, {}, 0, true);
    EXPECT_TRUE(plan.ok()) << plan.status();
    return std::make_unique<ChunkPlan>(*std::move(plan));
  }

  // Shard `shard`'s answer (TernGrad): at `next`, keeping answers from
  // `oldest`, counting this worker from `live_from`.
  JoinResponse Shard(uint32_t shard, uint64_t next, uint64_t oldest,
                     uint64_t live_from) const {
    JoinResponse response;
    for (const uint32_t key : plan_->shard_chunks[shard]) {
      response.add_chunk_keys(key);
    }
    response.set_next_step(next);
    response.set_oldest_kept_step(oldest);
    response.set_live_from_step(live_from);
    return response;
  }

  absl::Status Check(const std::vector<JoinResponse>& responses,
                     uint64_t start_step) {
    return CheckJoinResponses(responses, *client_, *plan_, "r1",
                              ResumePoint{start_step, "/ckpt/worker-1.ckpt"});
  }

  std::unique_ptr<PsClient> client_;
  std::unique_ptr<ChunkPlan> plan_;
};

TEST_F(JoinTest, AWorkerResumesAsFarBackAsTheShardsKeepAnswers) {
  EXPECT_TRUE(Check({Shard(0, 30, 10, 30), Shard(1, 30, 12, 30)}, 12).ok());
  EXPECT_TRUE(Check({Shard(0, 30, 10, 30), Shard(1, 31, 12, 31)}, 30).ok());
  const absl::Status too_old =
      Check({Shard(0, 30, 10, 30), Shard(1, 30, 12, 30)}, 11);
  EXPECT_EQ(too_old.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(too_old.message(),
              HasSubstr("shard 1 (127.0.0.1:2) is at step 30 and keeps the "
                        "answers from step 12 on, but checkpoint "
                        "'/ckpt/worker-1.ckpt' resumes at step 11"));
  EXPECT_THAT(too_old.message(), HasSubstr("--catch_up_mb"));
  EXPECT_THAT(Check({Shard(0, 30, 10, 30), Shard(1, 29, 10, 29)}, 30).message(),
              HasSubstr("shard 1 (127.0.0.1:2) is at step 29, behind"));
}

// The LPS says nothing of kept answers: its step or the one after it.
TEST_F(JoinTest, WithoutKeptAnswersTheShardMayBeOneStepAhead) {
  plan_ = Plan(1);
  JoinResponse lps;
  lps.set_next_step(8);
  for (const uint32_t key : plan_->shard_chunks[0]) lps.add_chunk_keys(key);
  absl::StatusOr<std::unique_ptr<PsClient>> client =
      PsClient::Connect({"127.0.0.1:1"}, PsClientOptions{}, MakeNullLogger());
  ASSERT_TRUE(client.ok()) << client.status();
  const ResumePoint resume{7, "/ckpt/w.ckpt"};
  EXPECT_TRUE(
      CheckJoinResponses({lps}, **client, *plan_, "r1", ResumePoint{8, "/c"})
          .ok());
  EXPECT_TRUE(CheckJoinResponses({lps}, **client, *plan_, "r1", resume).ok());
  EXPECT_THAT(CheckJoinResponses({lps}, **client, *plan_, "r1",
                                 ResumePoint{6, "/ckpt/w.ckpt"})
                  .message(),
              HasSubstr("keeps the answers from step 7 on"));
  EXPECT_EQ(CatchUpUntil({lps}, resume), 7u);
}

TEST_F(JoinTest, OnlyAWorkerLetInAgainCatchesUpWithoutGradients) {
  const ResumePoint resume{12, "/ckpt/w.ckpt"};
  // A restarted worker the shards waited for: it computes its steps again.
  EXPECT_EQ(CatchUpUntil({Shard(0, 30, 0, 30), Shard(1, 30, 0, 30)}, resume),
            12u);
  // Let in again at 31 by one shard, at 32 by the other (it was one step
  // ahead): no gradient before 31.
  EXPECT_EQ(CatchUpUntil({Shard(0, 30, 0, 31), Shard(1, 31, 0, 32)}, resume),
            31u);
  // Dropped by one shard only: the other counts it from 30 already.
  EXPECT_EQ(CatchUpUntil({Shard(0, 30, 0, 30), Shard(1, 30, 0, 31)}, resume),
            30u);
}

}  // namespace
}  // namespace tern::worker
