// The pieces of a server barrier: who has arrived (ArrivalSet), who waits
// for the answer and until when (WaiterList), and the one expiry rule.
//
// THE EXPIRY RULE (one for every server and every barrier, joins included):
//   A pending call waits at most the server's barrier timeout from its
//   arrival: its deadline is arrival + barrier_timeout, and the first
//   expiry sweep whose `now` is AT OR AFTER the deadline answers it
//   DEADLINE_EXCEEDED (Expired() below; exactly at the deadline counts).
//   The barrier stays open: a late member still completes it, and a member
//   that retries gets the answer. A server's join timeout is not a wait of
//   any call: it bounds how long the server waits, from its creation, for
//   all members to join at all (JoinPhaseExpired), and the process gives
//   up when it passes.
// The barrier timeout sits below the workers' RPC deadline, so the server's
// answer, naming the members that did not arrive, reaches a worker before
// its own deadline does.
//
// Neither class is thread-safe: the server guards them with its own mutex
// (ABSL_GUARDED_BY) and answers through a core::Deferred.
#ifndef TERN_CORE_BARRIER_H_
#define TERN_CORE_BARRIER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/deferred.h"

namespace tern::core {

// The expiry rule: a wait with `deadline` is over at `now`.
inline bool Expired(absl::Time deadline, absl::Time now) {
  return deadline <= now;
}

// The deadline of a call that arrived at `arrival`.
inline absl::Time WaitDeadline(absl::Time arrival,
                               absl::Duration barrier_timeout) {
  return arrival + barrier_timeout;
}

// Whether a server created at `created` has waited its join timeout for
// members that never joined.
inline bool JoinPhaseExpired(absl::Time created, absl::Time now,
                             absl::Duration join_timeout) {
  return Expired(created + join_timeout, now);
}

// The most calls one member may have waiting at one barrier at once (for
// one step, round or join: its call and the copies of it together). Each
// holds a callback and an open gRPC call, and a copy is cheap to send, so
// without a bound a stranger naming a member could make a server hold
// calls without limit (issue 14; gRPC's 16 streams per connection do not
// bound connections). A member's own calls never need more than 5: a copy
// comes only when gRPC resends a call after its connection failed, and
// gRPC makes at most 5 attempts of one call (its cap on the retry policy's
// max_attempts, common/net/channel.h), each of which the server may still
// hold; the hand-written retries that span deadlines (common/net/backoff.h)
// come after the server answered the earlier call (the barrier timeout is
// below the RPC deadline). A call beyond it is answered RESOURCE_EXHAUSTED
// at once (TooManyWaitsError) and nothing of it is kept.
inline constexpr size_t kMaxWaitsPerMember = 5;

// RESOURCE_EXHAUSTED "worker 3 already has 5 calls waiting for step 12;
// ..." (`member` as "worker 3", `wait` as "step 12" or "the join").
absl::Status TooManyWaitsError(absl::string_view member,
                               absl::string_view wait);

// A message names at most this many members ("workers 0,...,15 and 3
// more"), so one line stays readable with thousands of workers.
inline constexpr size_t kMaxNamedMembers = 16;

// "worker 2", "workers 2,3" or "workers 0,...,15 and 3 more" for the
// members whose `present` entry is false; `singular` and `plural` name the
// kind of member ("worker"/"workers", "data center"/"data centers").
std::string NameMissing(const std::vector<bool>& present,
                        absl::string_view singular = "worker",
                        absl::string_view plural = "workers");

// Which of N members have arrived at one barrier. A member goes
// kAbsent -> kInFlight (Begin: its call is being checked or added outside
// the server's lock) -> kArrived (Arrive: counted), or back to kAbsent
// (Abort: the call was refused and nothing of it counted). Arrive from
// kAbsent is allowed for barriers with nothing to add outside the lock.
class ArrivalSet {
 public:
  enum class State { kAbsent, kInFlight, kArrived };

  explicit ArrivalSet(uint32_t size = 0) : states_(size, State::kAbsent) {}

  uint32_t size() const { return static_cast<uint32_t>(states_.size()); }
  // Requires member < size(), as every method that takes one.
  State state(uint32_t member) const { return states_[member]; }
  bool arrived(uint32_t member) const {
    return states_[member] == State::kArrived;
  }
  uint32_t count() const { return count_; }
  bool complete() const { return count_ == states_.size(); }

  // kAbsent -> kInFlight; false (and no change) from any other state.
  bool Begin(uint32_t member);
  // kInFlight -> kAbsent; false from any other state.
  bool Abort(uint32_t member);
  // kAbsent or kInFlight -> kArrived, counted once; false when the member
  // had already arrived (a duplicate: nothing changes).
  bool Arrive(uint32_t member);
  // Everyone kAbsent again: the next step's barrier.
  void Reset();

  // By member: whether it has arrived (in-flight members have not).
  std::vector<bool> Arrived() const;
  // NameMissing(Arrived(), ...).
  std::string Missing(absl::string_view singular = "worker",
                      absl::string_view plural = "workers") const {
    return NameMissing(Arrived(), singular, plural);
  }

 private:
  std::vector<State> states_;
  uint32_t count_ = 0;
};

// The calls waiting for one barrier's answer, in arrival order, at most
// kMaxWaitsPerMember of each member. Each is answered exactly once: by
// AnswerAll, by Expire, or (if the list is destroyed with waiters left)
// never, so a server must AnswerAll before it lets a list go (Close does).
template <typename T>
class WaiterList {
 public:
  struct Waiter {
    uint32_t member = 0;
    absl::Time deadline;
    Callback<T> done;
  };

  // Takes `done` (moved from) to wait until `deadline`, unless `member`
  // already has kMaxWaitsPerMember calls waiting: then returns false and
  // leaves `done` as it was, for the caller to answer with
  // TooManyWaitsError.
  [[nodiscard]] bool Add(uint32_t member, absl::Time deadline,
                         Callback<T>& done) {
    size_t& waiting = waiting_[member];
    if (waiting >= kMaxWaitsPerMember) return false;
    ++waiting;
    waiters_.push_back(Waiter{member, deadline, std::move(done)});
    return true;
  }

  // Answers every waiter with a copy of `answer`; the list is empty after.
  void AnswerAll(const absl::StatusOr<T>& answer, Deferred* deferred) {
    for (Waiter& waiter : waiters_) {
      deferred->Answer<T>(std::move(waiter.done), answer);
    }
    waiters_.clear();
    waiting_.clear();
  }

  // Answers the waiters that Expired() at `now` with `make_status()`
  // (called once, only when some waiter expired, so the message that names
  // the missing members is built only then). Returns how many expired.
  template <typename MakeStatus>
  size_t Expire(absl::Time now, const MakeStatus& make_status,
                Deferred* deferred) {
    std::vector<Waiter> kept;
    std::vector<Waiter> expired;
    for (Waiter& waiter : waiters_) {
      (Expired(waiter.deadline, now) ? expired : kept)
          .push_back(std::move(waiter));
    }
    waiters_ = std::move(kept);
    if (expired.empty()) return 0;
    for (const Waiter& waiter : expired) {
      if (--waiting_[waiter.member] == 0) waiting_.erase(waiter.member);
    }
    const absl::Status status = make_status();
    for (Waiter& waiter : expired) {
      deferred->Answer<T>(std::move(waiter.done), status);
    }
    return expired.size();
  }

  size_t size() const { return waiters_.size(); }
  bool empty() const { return waiters_.empty(); }
  // How many calls of `member` wait.
  size_t waiting(uint32_t member) const {
    const auto it = waiting_.find(member);
    return it == waiting_.end() ? 0 : it->second;
  }

 private:
  std::vector<Waiter> waiters_;
  // By member: how many of waiters_ are its (members with none absent).
  absl::flat_hash_map<uint32_t, size_t> waiting_;
};

}  // namespace tern::core

#endif  // TERN_CORE_BARRIER_H_
