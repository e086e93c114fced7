// A resumed LPS (server/local_ps_recovery.cc): it goes on from its state
// file, its workers rejoin at the steps the file holds, and it sends its
// unanswered rounds again.
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/test_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/local_ps.h"
#include "server/local_ps_fixture.h"
#include "server/lps_state.h"
#include "server/lps_state_file.h"

namespace tern::server {
namespace {

using ::testing::HasSubstr;

class LocalPsRecoveryTest : public LocalPsTest {
 protected:
  void SetUp() override {
    LocalPsTest::SetUp();
    steps_ = 4;
    state_path_ = LpsStatePath(FreshTestDir());
  }

  // Both workers push `step` with gradient g.
  void Step(LocalPs& lps, uint64_t step, float g) {
    auto a = PushAsync(lps, Push(0, step, g));
    auto b = PushAsync(lps, Push(1, step, g));
    ASSERT_TRUE(a->has_value() && b->has_value());
    ASSERT_TRUE(a->value().ok()) << a->value().status();
    ASSERT_TRUE(b->value().ok()) << b->value().status();
  }

  // The round the LPS sends next; answered, as a GS of one data center
  // would, with its own update when `answer`.
  SyncRound SendRound(LocalPs& lps, bool answer) {
    absl::StatusOr<std::optional<SyncRound>> round =
        lps.NextRound(absl::ZeroDuration());
    EXPECT_TRUE(round.ok() && round->has_value()) << round.status();
    if (!round.ok() || !round->has_value()) return SyncRound{};
    if (answer) {
      GsAnswer reply{(*round)->round, (*round)->updates, {}};
      EXPECT_TRUE(lps.ApplyRoundAnswer(**round, reply, absl::Seconds(1)).ok());
    }
    return **round;
  }

  absl::StatusOr<JoinReply> Rejoin(LocalPs& lps, uint32_t worker) {
    JoinRequest request = Join(worker);
    request.initial_weights.clear();
    std::optional<absl::StatusOr<JoinReply>> reply;
    lps.Join(request, [&](absl::StatusOr<JoinReply> r) { reply = r; });
    EXPECT_TRUE(reply.has_value()) << "a rejoin is answered at once";
    if (!reply.has_value()) return absl::InternalError("no answer");
    return *reply;
  }
};

TEST_F(LocalPsRecoveryTest, GoesOnFromItsStateAsTheUndisturbedRunDoes) {
  // Undisturbed (and keeping no state): step 0, round 0 answered, step 1.
  const std::string path = std::exchange(state_path_, "");
  std::unique_ptr<LocalPs> undisturbed = MakeLps(/*global=*/true);
  state_path_ = path;
  JoinBoth(*undisturbed);
  Step(*undisturbed, 0, 1.0f);
  SendRound(*undisturbed, /*answer=*/true);
  Step(*undisturbed, 1, 2.0f);

  // Killed: the state is written with round 0; round 0 is sent but not
  // answered, and worker 0 has pushed step 1 when the LPS goes.
  std::unique_ptr<LocalPs> killed = MakeLps(/*global=*/true);
  JoinBoth(*killed);
  Step(*killed, 0, 1.0f);
  const uint64_t saved_checksum = killed->checksum();
  const SyncRound sent = SendRound(*killed, /*answer=*/false);
  PushAsync(*killed, Push(0, 1, 2.0f));
  killed.reset();

  std::unique_ptr<LocalPs> resumed = MakeLps(/*global=*/true);
  EXPECT_EQ(resumed->completed_steps(), 1u);
  EXPECT_EQ(resumed->checksum(), saved_checksum);
  // A worker that has not rejoined is told to.
  auto early = PushAsync(*resumed, Push(0, 1, 2.0f));
  ASSERT_TRUE(early->has_value());
  EXPECT_TRUE(absl::IsOutOfRange(early->value().status()));
  EXPECT_THAT(std::string(early->value().status().message()),
              HasSubstr("rejoin (worker 0 resumes at step 1)"));
  // Each rejoin is answered at once with the step and the weights.
  for (const uint32_t worker : {0u, 1u}) {
    absl::StatusOr<JoinReply> reply = Rejoin(*resumed, worker);
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_EQ(reply->next_step, 1u);
    EXPECT_EQ(reply->param_checksum, saved_checksum);
    ASSERT_NE(reply->initial_weights, nullptr);
    // The weights sent are those the checksum names (the worker checks).
    std::vector<LpsChunk> chunks;
    for (const ChunkPayload& chunk : *reply->initial_weights) {
      chunks.push_back(LpsChunk{chunk.chunk_key, Decode(chunk.payload)});
    }
    ASSERT_EQ(chunks.size(), 2u);
    EXPECT_EQ((*LpsState::Create(
                   LpsStateOptions{},
                   *LrSchedule::Create(LrScheduleKind::kConstant, 0, 1, 1, 1),
                   std::move(chunks)))
                  ->Checksum(),
              saved_checksum);
  }
  // The unanswered round goes again, byte for byte.
  EXPECT_TRUE(resumed->CheckFirstRound(0).ok());
  const SyncRound again = SendRound(*resumed, /*answer=*/true);
  EXPECT_EQ(again.round, sent.round);
  ASSERT_EQ(again.updates.size(), sent.updates.size());
  for (size_t i = 0; i < sent.updates.size(); ++i) {
    EXPECT_EQ(again.updates[i].payload.data, sent.updates[i].payload.data);
  }
  Step(*resumed, 1, 2.0f);
  EXPECT_EQ(resumed->checksum(), undisturbed->checksum());
}

TEST_F(LocalPsRecoveryTest, TheGlobalServerMayBeAheadButNotBehind) {
  std::unique_ptr<LocalPs> killed = MakeLps(/*global=*/true);
  JoinBoth(*killed);
  Step(*killed, 0, 1.0f);
  SendRound(*killed, /*answer=*/true);  // round 0 answered
  Step(*killed, 1, 1.0f);               // round 1 built, state written
  killed.reset();
  std::unique_ptr<LocalPs> resumed = MakeLps(/*global=*/true);
  const absl::Status behind = resumed->CheckFirstRound(0);
  EXPECT_TRUE(absl::IsFailedPrecondition(behind)) << behind;
  EXPECT_THAT(std::string(behind.message()), HasSubstr("older than the LPS's"));
  EXPECT_TRUE(resumed->CheckFirstRound(1).ok());
  // Rounds the GS counted after the state was written are built again and
  // answered from its kept answers.
  EXPECT_TRUE(resumed->CheckFirstRound(3).ok());
}

// With a GS the state goes with a round (one per step here); without one,
// between steps.
TEST_F(LocalPsRecoveryTest, WritesEveryCheckpointEverySteps) {
  checkpoint_every_ = 2;
  for (const bool global : {true, false}) {
    SCOPED_TRACE(global ? "with a GS" : "without a GS");
    std::filesystem::remove(state_path_);
    std::unique_ptr<LocalPs> lps = MakeLps(global);
    JoinBoth(*lps);
    Step(*lps, 0, 1.0f);
    lps->FlushState();
    EXPECT_FALSE(std::filesystem::exists(state_path_));
    Step(*lps, 1, 1.0f);
    lps->FlushState();
    EXPECT_TRUE(std::filesystem::exists(state_path_));
    lps.reset();
    EXPECT_EQ(MakeLps(global)->completed_steps(), 2u);
  }
}

// A kill after the last step: a worker whose last answer was lost rejoins
// and gets the final weights.
TEST_F(LocalPsRecoveryTest, AFinishedRunGivesARejoiningWorkerTheFinalModel) {
  steps_ = 2;
  checkpoint_every_ = 100;  // only the end writes
  std::unique_ptr<LocalPs> lps = MakeLps(/*global=*/false);
  JoinBoth(*lps);
  Step(*lps, 0, 1.0f);
  lps->FlushState();
  EXPECT_FALSE(std::filesystem::exists(state_path_));
  Step(*lps, 1, 1.0f);
  ASSERT_TRUE(lps->finished());
  const uint64_t final_checksum = lps->checksum();
  lps.reset();

  std::unique_ptr<LocalPs> resumed = MakeLps(/*global=*/false);
  EXPECT_TRUE(resumed->finished());
  absl::StatusOr<JoinReply> reply = Rejoin(*resumed, 1);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->next_step, 2u);
  EXPECT_EQ(reply->param_checksum, final_checksum);
}

TEST_F(LocalPsRecoveryTest, RefusesADamagedFileAndOtherFlags) {
  {
    std::unique_ptr<LocalPs> lps = MakeLps(/*global=*/true);
    JoinBoth(*lps);
    Step(*lps, 0, 1.0f);
  }
  num_workers_ = 3;
  absl::StatusOr<std::unique_ptr<LocalPs>> other = CreateLps(/*global=*/true);
  EXPECT_TRUE(absl::IsFailedPrecondition(other.status())) << other.status();
  EXPECT_THAT(std::string(other.status().message()),
              HasSubstr("an LPS of 2 workers; this one has --num_workers=3"));

  {
    std::fstream file(state_path_, std::ios::in | std::ios::out);
    file.seekp(40);
    file.put('\x7f');
  }
  num_workers_ = 2;
  absl::StatusOr<std::unique_ptr<LocalPs>> damaged = CreateLps(/*global=*/true);
  EXPECT_TRUE(absl::IsDataLoss(damaged.status())) << damaged.status();
  EXPECT_THAT(std::string(damaged.status().message()), HasSubstr(state_path_));
}

}  // namespace
}  // namespace tern::server
