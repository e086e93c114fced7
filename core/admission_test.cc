// The core's pieces composed as a server composes them (Deferred,
// ArrivalSet, WaiterList, AnswerCache, Admit), driven over worker counts
// and arrival orders with a fake clock, including the awkward orders: a
// retry after the answer, a retry while the first copy is in flight, a
// duplicate, duplicates beyond the cap, a stale and a future step, and
// expiry exactly at the deadline.
#include "core/admission.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/barrier.h"
#include "core/deferred.h"
#include "core/fake_clock.h"
#include "gtest/gtest.h"

namespace tern::core {
namespace {

using Answer = std::shared_ptr<const int64_t>;
constexpr absl::Duration kTimeout = absl::Seconds(50);

// One barrier per step: each worker adds a value, all get the sum.
class ToyStepServer {
 public:
  struct Pending {
    uint32_t worker = 0;
    int64_t value = 0;
    Callback<Answer> done;
  };

  ToyStepServer(uint32_t num_workers, const FakeClock* clock)
      : clock_(clock), arrivals_(num_workers), cache_(1) {
    names_.server = "shard 0";
  }

  // Admission under the "lock"; an admitted push is in flight until
  // Finish or Refuse (as a shard decodes it without its lock).
  std::optional<Pending> Start(uint32_t worker, uint64_t step, int64_t value,
                               Callback<Answer> done) {
    Deferred deferred;
    const Admission<Answer> admission =
        Admit(names_, step, open_, cache_, arrivals_, worker, "push",
              absl::StrCat("worker ", worker));
    switch (admission.kind) {
      case Admission<Answer>::Kind::kCached:
        deferred.Answer<Answer>(std::move(done), *admission.cached);
        return std::nullopt;
      case Admission<Answer>::Kind::kRefused:
        deferred.Answer<Answer>(std::move(done), admission.error);
        return std::nullopt;
      case Admission<Answer>::Kind::kDuplicate:
        if (!waiters_.Add(worker, WaitDeadline(clock_->Now(), kTimeout),
                          done)) {
          deferred.Answer<Answer>(
              std::move(done),
              TooManyWaitsError(absl::StrCat("worker ", worker),
                                absl::StrCat("step ", step)));
        }
        return std::nullopt;
      case Admission<Answer>::Kind::kAdmit:
        EXPECT_TRUE(arrivals_.Begin(worker));
        return Pending{worker, value, std::move(done)};
    }
    return std::nullopt;
  }

  void Finish(Pending pending) {
    Deferred deferred;
    EXPECT_TRUE(arrivals_.Arrive(pending.worker));
    sum_ += pending.value;
    // A member's first arrival: none of its calls waits yet.
    EXPECT_TRUE(waiters_.Add(pending.worker,
                             WaitDeadline(clock_->Now(), kTimeout),
                             pending.done));
    if (!arrivals_.complete()) return;
    Answer answer = std::make_shared<const int64_t>(sum_);
    waiters_.AnswerAll(answer, &deferred);
    cache_.Put(open_, std::move(answer));
    arrivals_.Reset();
    sum_ = 0;
    ++open_;
  }

  void Refuse(Pending pending) {
    Deferred deferred;
    EXPECT_TRUE(arrivals_.Abort(pending.worker));
    deferred.Answer<Answer>(std::move(pending.done),
                            absl::InvalidArgumentError("bad push"));
  }

  void Push(uint32_t worker, uint64_t step, int64_t value,
            Callback<Answer> done) {
    if (auto pending = Start(worker, step, value, std::move(done))) {
      Finish(*std::move(pending));
    }
  }

  size_t ExpireWaits() {
    Deferred deferred;
    return waiters_.Expire(
        clock_->Now(),
        [&] {
          return absl::DeadlineExceededError(
              absl::StrCat("step ", open_, ": ", arrivals_.Missing(),
                           " did not push within 50s"));
        },
        &deferred);
  }

  uint64_t open() const { return open_; }

 private:
  const FakeClock* clock_;
  StepNames names_;
  uint64_t open_ = 0;
  int64_t sum_ = 0;
  ArrivalSet arrivals_;
  WaiterList<Answer> waiters_;
  AnswerCache<Answer> cache_;
};

struct Call {
  int answers = 0;
  absl::StatusOr<Answer> result = absl::UnknownError("no answer");
};

Callback<Answer> Into(std::shared_ptr<Call> call) {
  return [call](absl::StatusOr<Answer> result) {
    ++call->answers;
    call->result = std::move(result);
  };
}

enum class Order { kForward, kBackward, kShuffled };

std::vector<uint32_t> Arrivals(uint32_t n, Order order) {
  std::vector<uint32_t> workers(n);
  for (uint32_t w = 0; w < n; ++w) workers[w] = w;
  if (order == Order::kBackward) std::reverse(workers.begin(), workers.end());
  if (order == Order::kShuffled) {
    std::mt19937 rng(n);
    std::shuffle(workers.begin(), workers.end(), rng);
  }
  return workers;
}

const char* OrderName(Order order) {
  switch (order) {
    case Order::kForward:
      return "Forward";
    case Order::kBackward:
      return "Backward";
    case Order::kShuffled:
      return "Shuffled";
  }
  return "Unknown";
}

class StepAdmissionTest
    : public ::testing::TestWithParam<std::tuple<uint32_t, Order>> {
 protected:
  uint32_t n() const { return std::get<0>(GetParam()); }
  std::vector<uint32_t> order() const {
    return Arrivals(n(), std::get<1>(GetParam()));
  }
  // Worker w adds w + 1: the sum is n(n+1)/2.
  int64_t Sum() const { return int64_t{n()} * (n() + 1) / 2; }

  // Every worker pushes `step` in order(); returns the calls by worker.
  std::vector<std::shared_ptr<Call>> RunStep(ToyStepServer& server,
                                             uint64_t step) {
    std::vector<std::shared_ptr<Call>> calls(n());
    for (const uint32_t w : order()) {
      calls[w] = std::make_shared<Call>();
      server.Push(w, step, w + 1, Into(calls[w]));
    }
    return calls;
  }

  FakeClock clock_;
};

TEST_P(StepAdmissionTest, EveryWorkerGetsTheSameAnswerOnceAllArrived) {
  ToyStepServer server(n(), &clock_);
  std::vector<std::shared_ptr<Call>> calls(n());
  const std::vector<uint32_t> arrivals = order();
  for (size_t i = 0; i < arrivals.size(); ++i) {
    const uint32_t w = arrivals[i];
    calls[w] = std::make_shared<Call>();
    server.Push(w, 0, w + 1, Into(calls[w]));
    const bool last = i + 1 == arrivals.size();
    EXPECT_EQ(calls[arrivals[0]]->answers, last ? 1 : 0) << i;
  }
  EXPECT_EQ(server.open(), 1u);
  for (const auto& call : calls) {
    ASSERT_EQ(call->answers, 1);
    ASSERT_TRUE(call->result.ok());
    EXPECT_EQ(**call->result, Sum());
    EXPECT_EQ(*call->result, *calls[0]->result) << "one shared answer";
  }
}

TEST_P(StepAdmissionTest, ARetryAfterTheAnswerGetsTheSameAnswerAtOnce) {
  ToyStepServer server(n(), &clock_);
  const auto first = RunStep(server, 0);
  for (const uint32_t w : order()) {
    auto retry = std::make_shared<Call>();
    server.Push(w, 0, 1000, Into(retry));
    ASSERT_EQ(retry->answers, 1);
    ASSERT_TRUE(retry->result.ok()) << retry->result.status();
    EXPECT_EQ(*retry->result, *first[w]->result) << "the very answer";
  }
  // The retries changed nothing: step 1 sums afresh.
  const auto second = RunStep(server, 1);
  EXPECT_EQ(**second[0]->result, Sum());
}

TEST_P(StepAdmissionTest, ARetryInFlightIsToldToRetryAndCountsOnce) {
  ToyStepServer server(n(), &clock_);
  const uint32_t w = order().front();
  auto first = std::make_shared<Call>();
  std::optional<ToyStepServer::Pending> pending =
      server.Start(w, 0, w + 1, Into(first));
  ASSERT_TRUE(pending.has_value());
  auto retry = std::make_shared<Call>();
  server.Push(w, 0, w + 1, Into(retry));
  ASSERT_EQ(retry->answers, 1);
  EXPECT_EQ(retry->result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(retry->result.status().message(),
            absl::StrCat("step 0: an earlier push of worker ", w,
                         " is still being added; retry"));
  server.Finish(*std::move(pending));
  // The retry of the retry finds the push counted: a duplicate that waits.
  auto again = std::make_shared<Call>();
  server.Push(w, 0, w + 1, Into(again));
  EXPECT_EQ(again->answers, n() == 1 ? 1 : 0);
  for (const uint32_t other : order()) {
    if (other != w) {
      server.Push(other, 0, other + 1, Into(std::make_shared<Call>()));
    }
  }
  ASSERT_EQ(first->answers, 1);
  ASSERT_EQ(again->answers, 1);
  EXPECT_EQ(**first->result, Sum()) << "counted once";
  EXPECT_EQ(*again->result, *first->result);
}

TEST_P(StepAdmissionTest, ARefusedPushLeavesNothingCounted) {
  ToyStepServer server(n(), &clock_);
  const uint32_t w = order().back();
  auto bad = std::make_shared<Call>();
  auto pending = server.Start(w, 0, 1000000, Into(bad));
  ASSERT_TRUE(pending.has_value());
  server.Refuse(*std::move(pending));
  EXPECT_EQ(bad->result.status().code(), absl::StatusCode::kInvalidArgument);
  const auto calls = RunStep(server, 0);
  EXPECT_EQ(**calls[w]->result, Sum());
}

TEST_P(StepAdmissionTest, StaleAndFutureStepsAreRefusedWithTheSameWords) {
  ToyStepServer server(n(), &clock_);
  RunStep(server, 0);
  RunStep(server, 1);  // step 0's answer is no longer kept
  auto stale = std::make_shared<Call>();
  server.Push(0, 0, 1, Into(stale));
  EXPECT_EQ(stale->result.status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(stale->result.status().message(),
            "step 0 is stale: shard 0 is at step 2");
  auto future = std::make_shared<Call>();
  server.Push(0, 3, 1, Into(future));
  EXPECT_EQ(future->result.status().message(),
            "step 3 is in the future: shard 0 is at step 2");
  const auto calls = RunStep(server, 2);
  EXPECT_EQ(**calls[0]->result, Sum()) << "refusals counted nothing";
}

TEST_P(StepAdmissionTest, WaitsExpireExactlyAtTheirDeadlineAndTheStepStaysOpen) {
  if (n() == 1) GTEST_SKIP() << "one worker never waits";
  ToyStepServer server(n(), &clock_);
  const std::vector<uint32_t> arrivals = order();
  const uint32_t early = arrivals[0];
  auto first = std::make_shared<Call>();
  server.Push(early, 0, early + 1, Into(first));
  clock_.Advance(kTimeout - absl::Nanoseconds(1));
  EXPECT_EQ(server.ExpireWaits(), 0u);
  EXPECT_EQ(first->answers, 0);
  clock_.Advance(absl::Nanoseconds(1));
  EXPECT_EQ(server.ExpireWaits(), 1u);
  ASSERT_EQ(first->answers, 1);
  EXPECT_EQ(first->result.status().code(),
            absl::StatusCode::kDeadlineExceeded);
  std::vector<bool> present(n(), false);
  present[early] = true;
  EXPECT_EQ(first->result.status().message(),
            absl::StrCat("step 0: ", NameMissing(present),
                         " did not push within 50s"));
  // The late workers complete the step; the expired worker's retry is a
  // duplicate answered with them.
  auto retry = std::make_shared<Call>();
  server.Push(early, 0, early + 1, Into(retry));
  std::vector<std::shared_ptr<Call>> late;
  for (size_t i = 1; i < arrivals.size(); ++i) {
    late.push_back(std::make_shared<Call>());
    server.Push(arrivals[i], 0, arrivals[i] + 1, Into(late.back()));
  }
  ASSERT_EQ(retry->answers, 1);
  ASSERT_TRUE(retry->result.ok());
  EXPECT_EQ(**retry->result, Sum());
  EXPECT_EQ(first->answers, 1) << "an expired call is not answered again";
  EXPECT_EQ(server.open(), 1u);
}

TEST_P(StepAdmissionTest, DuplicatesBeyondTheCapAreRefusedAtOnce) {
  if (n() == 1) GTEST_SKIP() << "one worker's push is answered at once";
  ToyStepServer server(n(), &clock_);
  const uint32_t w = order().front();
  // The first push and its copies, up to the cap, wait.
  std::vector<std::shared_ptr<Call>> held;
  for (size_t i = 0; i < kMaxWaitsPerMember; ++i) {
    held.push_back(std::make_shared<Call>());
    server.Push(w, 0, w + 1, Into(held.back()));
  }
  auto beyond = std::make_shared<Call>();
  server.Push(w, 0, w + 1, Into(beyond));
  ASSERT_EQ(beyond->answers, 1) << "answered at once";
  EXPECT_EQ(beyond->result.status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(beyond->result.status().message(),
            absl::StrCat("worker ", w,
                         " already has 5 calls waiting for step 0; this one "
                         "is refused (retries never need more at once)"));
  std::vector<std::shared_ptr<Call>> others;
  for (const uint32_t other : order()) {
    if (other == w) continue;
    others.push_back(std::make_shared<Call>());
    server.Push(other, 0, other + 1, Into(others.back()));
  }
  for (const auto& call : held) {
    ASSERT_EQ(call->answers, 1);
    EXPECT_EQ(**call->result, Sum()) << "counted once";
  }
  for (const auto& call : others) EXPECT_EQ(**call->result, Sum());
  EXPECT_EQ(beyond->answers, 1);
}

INSTANTIATE_TEST_SUITE_P(
    WorkersAndOrders, StepAdmissionTest,
    ::testing::Combine(::testing::Values(1u, 2u, 3u, 7u, 64u),
                       ::testing::Values(Order::kForward, Order::kBackward,
                                         Order::kShuffled)),
    [](const ::testing::TestParamInfo<std::tuple<uint32_t, Order>>& info) {
      return absl::StrCat(std::get<0>(info.param), "Workers",
                          OrderName(std::get<1>(info.param)));
    });

TEST(AnswerCacheTest, KeepsTheLatestStepsUpToCapacity) {
  AnswerCache<int> cache(2);
  EXPECT_EQ(cache.Find(0), nullptr);
  cache.Put(0, 10);
  cache.Put(1, 11);
  cache.Put(2, 12);
  EXPECT_EQ(cache.Find(0), nullptr);
  ASSERT_NE(cache.Find(1), nullptr);
  EXPECT_EQ(*cache.Find(2), 12);
  EXPECT_EQ(cache.size(), 2u);
}

TEST(AdmissionWordsTest, RoundsOnTheGlobalServer) {
  const StepNames names{"round", "the GS"};
  EXPECT_EQ(CheckOpenStep(names, 4, 2).message(),
            "round 4 is in the future: the GS is at round 2");
  EXPECT_EQ(CheckOpenStep(names, 1, 2).message(),
            "round 1 is stale: the GS is at round 2");
  EXPECT_TRUE(CheckOpenStep(names, 2, 2).ok());
}

}  // namespace
}  // namespace tern::core
