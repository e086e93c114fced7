#include "common/net/backoff.h"

#include <thread>

#include "gtest/gtest.h"

namespace tern::net {
namespace {

TEST(BackoffTest, PausesDoubleUpToTheMaximum) {
  Backoff backoff(absl::Seconds(60), absl::Milliseconds(1),
                  absl::Milliseconds(4));
  EXPECT_EQ(backoff.next_pause(), absl::Milliseconds(1));
  ASSERT_TRUE(backoff.Wait());
  EXPECT_EQ(backoff.next_pause(), absl::Milliseconds(2));
  ASSERT_TRUE(backoff.Wait());
  EXPECT_EQ(backoff.next_pause(), absl::Milliseconds(4));
  ASSERT_TRUE(backoff.Wait());
  EXPECT_EQ(backoff.next_pause(), absl::Milliseconds(4));
  EXPECT_EQ(backoff.attempts(), 3);
}

TEST(BackoffTest, StopsWhenTheBudgetIsSpent) {
  Backoff backoff(absl::Milliseconds(30), absl::Milliseconds(20),
                  absl::Seconds(1));
  const absl::Time start = absl::Now();
  while (backoff.Wait()) {
  }
  // The last pause is cut to what was left: no pause ends past the budget.
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(300));
  EXPECT_GE(absl::Now(), backoff.give_up());
  EXPECT_EQ(backoff.left(), absl::ZeroDuration());
  EXPECT_FALSE(backoff.Wait());
}

TEST(BackoffTest, ACancelEndsThePauseAtOnce) {
  Backoff backoff(absl::Seconds(60), absl::Seconds(30), absl::Seconds(30));
  absl::Notification cancel;
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(20));
    cancel.Notify();
  });
  const absl::Time start = absl::Now();
  EXPECT_FALSE(backoff.Wait(&cancel));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  canceller.join();
  EXPECT_FALSE(backoff.Wait(&cancel));  // stays cancelled
}

TEST(IsTransientTest, OnlyUnreachableOrSlowPeersAreWorthAnotherAttempt) {
  EXPECT_TRUE(IsTransient(absl::UnavailableError("down")));
  EXPECT_TRUE(IsTransient(absl::DeadlineExceededError("slow")));
  EXPECT_FALSE(IsTransient(absl::OkStatus()));
  EXPECT_FALSE(IsTransient(absl::FailedPreconditionError("stale step")));
  EXPECT_FALSE(IsTransient(absl::InvalidArgumentError("bad payload")));
  EXPECT_FALSE(IsTransient(absl::ResourceExhaustedError("too large")));
}

}  // namespace
}  // namespace tern::net
