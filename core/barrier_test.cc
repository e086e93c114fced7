#include "core/barrier.h"

#include <vector>

#include "absl/status/status.h"
#include "core/deferred.h"
#include "core/fake_clock.h"
#include "gtest/gtest.h"

namespace tern::core {
namespace {

TEST(DeferredTest, RunsEveryCallbackOnceInOrderAtDestruction) {
  std::vector<int> ran;
  {
    Deferred deferred;
    deferred.Run([&] { ran.push_back(1); });
    deferred.Answer<int>([&](absl::StatusOr<int> v) { ran.push_back(*v); }, 2);
    deferred.Answer<int>(
        [&](absl::StatusOr<int> v) {
          ran.push_back(v.status().code() == absl::StatusCode::kAborted ? 3
                                                                        : -1);
        },
        absl::AbortedError("x"));
    EXPECT_TRUE(ran.empty()) << "nothing runs before destruction";
    EXPECT_EQ(deferred.size(), 3u);
  }
  EXPECT_EQ(ran, (std::vector<int>{1, 2, 3}));
}

TEST(NameMissingTest, NamesSingularPluralAndCapsTheList) {
  EXPECT_EQ(NameMissing({true, false, true}), "worker 1");
  EXPECT_EQ(NameMissing({false, true, false, false}), "workers 0,2,3");
  EXPECT_EQ(NameMissing({false, false}, "data center", "data centers"),
            "data centers 0,1");
  std::vector<bool> many(20, false);
  many[0] = true;
  EXPECT_EQ(NameMissing(many),
            "workers 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16 and 3 more");
}

TEST(ArrivalSetTest, StatesMoveOnlyAlongTheirEdges) {
  ArrivalSet set(3);
  EXPECT_EQ(set.count(), 0u);
  EXPECT_FALSE(set.Abort(0)) << "nothing in flight";
  EXPECT_TRUE(set.Begin(0));
  EXPECT_FALSE(set.Begin(0)) << "already in flight";
  EXPECT_EQ(set.state(0), ArrivalSet::State::kInFlight);
  EXPECT_EQ(set.Missing(), "workers 0,1,2") << "in flight is not arrived";
  EXPECT_TRUE(set.Abort(0));
  EXPECT_EQ(set.state(0), ArrivalSet::State::kAbsent);
  EXPECT_TRUE(set.Begin(0));
  EXPECT_TRUE(set.Arrive(0));
  EXPECT_FALSE(set.Arrive(0)) << "a duplicate counts once";
  EXPECT_FALSE(set.Begin(0));
  EXPECT_TRUE(set.Arrive(2)) << "straight from absent";
  EXPECT_EQ(set.count(), 2u);
  EXPECT_FALSE(set.complete());
  EXPECT_EQ(set.Missing(), "worker 1");
  EXPECT_TRUE(set.Arrive(1));
  EXPECT_TRUE(set.complete());
  set.Reset();
  EXPECT_EQ(set.count(), 0u);
  EXPECT_EQ(set.state(2), ArrivalSet::State::kAbsent);
}

TEST(ExpiryRuleTest, AtTheDeadlineExactlyIsExpired) {
  FakeClock clock;
  const absl::Time deadline = WaitDeadline(clock.Now(), absl::Seconds(50));
  EXPECT_FALSE(Expired(deadline, deadline - absl::Nanoseconds(1)));
  EXPECT_TRUE(Expired(deadline, deadline));
  EXPECT_TRUE(Expired(deadline, deadline + absl::Seconds(1)));
  EXPECT_FALSE(JoinPhaseExpired(clock.Now(), clock.Now() + absl::Seconds(299),
                                absl::Seconds(300)));
  EXPECT_TRUE(JoinPhaseExpired(clock.Now(), clock.Now() + absl::Seconds(300),
                               absl::Seconds(300)));
}

struct Outcome {
  bool done = false;
  absl::StatusOr<int> value = absl::UnknownError("not answered");
};

Callback<int> Record(Outcome* outcome) {
  return [outcome](absl::StatusOr<int> value) {
    EXPECT_FALSE(outcome->done) << "answered twice";
    outcome->done = true;
    outcome->value = std::move(value);
  };
}

TEST(WaiterListTest, ExpiresOnlyWaitersAtOrPastTheirDeadline) {
  FakeClock clock;
  const absl::Duration timeout = absl::Seconds(50);
  WaiterList<int> waiters;
  Outcome early, late;
  Callback<int> early_done = Record(&early);
  ASSERT_TRUE(waiters.Add(0, WaitDeadline(clock.Now(), timeout), early_done));
  clock.Advance(absl::Seconds(10));
  Callback<int> late_done = Record(&late);
  ASSERT_TRUE(waiters.Add(1, WaitDeadline(clock.Now(), timeout), late_done));
  int messages_built = 0;
  auto status = [&] {
    ++messages_built;
    return absl::DeadlineExceededError("late");
  };
  {
    Deferred deferred;
    clock.Advance(absl::Seconds(40) - absl::Nanoseconds(1));
    EXPECT_EQ(waiters.Expire(clock.Now(), status, &deferred), 0u);
    EXPECT_EQ(messages_built, 0) << "the message is built only when needed";
    clock.Advance(absl::Nanoseconds(1));  // exactly the first deadline
    EXPECT_EQ(waiters.Expire(clock.Now(), status, &deferred), 1u);
    EXPECT_FALSE(early.done) << "answers wait for the Deferred";
  }
  ASSERT_TRUE(early.done);
  EXPECT_EQ(early.value.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(late.done);
  EXPECT_EQ(waiters.size(), 1u);
  {
    Deferred deferred;
    waiters.AnswerAll(7, &deferred);
  }
  ASSERT_TRUE(late.done);
  EXPECT_EQ(*late.value, 7);
  EXPECT_TRUE(waiters.empty());
}

TEST(WaiterListTest, HoldsAtMostTheCapOfOneMemberAndLeavesTheRefusedCall) {
  FakeClock clock;
  const absl::Time deadline = WaitDeadline(clock.Now(), absl::Seconds(50));
  WaiterList<int> waiters;
  std::vector<Outcome> held(kMaxWaitsPerMember);
  for (Outcome& outcome : held) {
    Callback<int> done = Record(&outcome);
    ASSERT_TRUE(waiters.Add(3, deadline, done));
  }
  EXPECT_EQ(waiters.waiting(3), kMaxWaitsPerMember);
  Outcome refused;
  Callback<int> done = Record(&refused);
  EXPECT_FALSE(waiters.Add(3, deadline, done));
  ASSERT_TRUE(done) << "a refused call stays with the caller";
  EXPECT_EQ(waiters.size(), kMaxWaitsPerMember) << "nothing of it kept";
  // Another member has its own room.
  Outcome other;
  Callback<int> other_done = Record(&other);
  EXPECT_TRUE(waiters.Add(4, deadline, other_done));
  {
    Deferred deferred;
    waiters.AnswerAll(9, &deferred);
  }
  for (const Outcome& outcome : held) EXPECT_EQ(*outcome.value, 9);
  EXPECT_EQ(*other.value, 9);
  EXPECT_FALSE(refused.done) << "the list never answers a call it refused";
  EXPECT_EQ(waiters.waiting(3), 0u);
  EXPECT_TRUE(waiters.Add(3, deadline, done)) << "room again once answered";
  Deferred deferred;
  waiters.AnswerAll(1, &deferred);
}

TEST(WaiterListTest, ExpiredCallsMakeRoomForTheirMember) {
  FakeClock clock;
  const absl::Duration timeout = absl::Seconds(50);
  WaiterList<int> waiters;
  std::vector<Outcome> outcomes(kMaxWaitsPerMember + 1);
  for (size_t i = 0; i < kMaxWaitsPerMember; ++i) {
    Callback<int> done = Record(&outcomes[i]);
    ASSERT_TRUE(waiters.Add(0, WaitDeadline(clock.Now(), timeout), done));
    clock.Advance(absl::Seconds(1));
  }
  Deferred deferred;
  clock.Advance(timeout - absl::Seconds(kMaxWaitsPerMember));  // the first's
  EXPECT_EQ(waiters.Expire(clock.Now(),
                           [] { return absl::DeadlineExceededError("late"); },
                           &deferred),
            1u);
  EXPECT_EQ(waiters.waiting(0), kMaxWaitsPerMember - 1);
  Callback<int> done = Record(&outcomes.back());
  EXPECT_TRUE(waiters.Add(0, WaitDeadline(clock.Now(), timeout), done));
  waiters.AnswerAll(2, &deferred);
}

TEST(TooManyWaitsErrorTest, NamesTheMemberTheWaitAndTheCap) {
  const absl::Status status = TooManyWaitsError("worker 3", "step 12");
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(status.message(),
            "worker 3 already has 5 calls waiting for step 12; this one is "
            "refused (retries never need more at once)");
}

}  // namespace
}  // namespace tern::core
