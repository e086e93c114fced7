// Step (or round) admission: which call a server serves, answers from its
// cache, or refuses, with the same words in every server.
//
// THE ADMISSION ORDER (Admit below), after the server's own checks (closed,
// failed, unknown or not joined member):
//   1. a step already answered and still in the AnswerCache: the cached
//      answer, unchanged (a retry after the answer; idempotent);
//   2. any other step before the open one: FAILED_PRECONDITION
//      "step 1 is stale: shard 0 is at step 3";
//   3. a step after the open one: FAILED_PRECONDITION
//      "step 5 is in the future: shard 0 is at step 3";
//   4. the open step, by the member's ArrivalSet state:
//        kAbsent   -> kAdmit (the server checks and counts the call);
//        kInFlight -> UNAVAILABLE "step 3: an earlier push of worker 2 is
//                     still being added; retry" (a retry while the first
//                     copy is being added; it will find that copy counted);
//        kArrived  -> kDuplicate (counted once; the server answers it with
//                     the others, or at once if the answer exists).
// Nothing here is thread-safe: the server calls it under its own lock.
#ifndef TERN_CORE_ADMISSION_H_
#define TERN_CORE_ADMISSION_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/barrier.h"

namespace tern::core {

// How a server names its steps and itself in messages.
struct StepNames {
  std::string step = "step";  // "round" on the global server
  std::string server;         // "shard 0", "the LPS", "the GS"
};

// FAILED_PRECONDITION "<step> 1 is stale: <server> is at <step> 3".
absl::Status StaleError(const StepNames& names, uint64_t step, uint64_t open);
// FAILED_PRECONDITION "<step> 5 is in the future: <server> is at <step> 3".
absl::Status FutureError(const StepNames& names, uint64_t step, uint64_t open);
// UNAVAILABLE "<step> 3: an earlier <what> of <member> is still being
// added; retry" (`member` as "worker 2").
absl::Status InFlightError(const StepNames& names, uint64_t step,
                           absl::string_view what, absl::string_view member);
// OK for the open step, StaleError or FutureError otherwise.
absl::Status CheckOpenStep(const StepNames& names, uint64_t step,
                           uint64_t open);

// The answers of the last `capacity` answered steps, kept for retries of
// those steps (answers are shared pointers, so a retry gets the very answer
// the others got). Put of a step evicts the lowest steps beyond capacity.
template <typename Answer>
class AnswerCache {
 public:
  // capacity >= 1 (the shard keeps 1: the step just completed).
  explicit AnswerCache(size_t capacity = 1) : capacity_(capacity) {}

  void Put(uint64_t step, Answer answer) {
    answers_[step] = std::move(answer);
    Trim();
  }
  // capacity >= 1; evicts the lowest steps beyond it.
  void set_capacity(size_t capacity) {
    capacity_ = capacity;
    Trim();
  }
  size_t capacity() const { return capacity_; }
  // The kept answer of `step`, or null; valid until the next Put or Clear.
  const Answer* Find(uint64_t step) const {
    const auto it = answers_.find(step);
    return it == answers_.end() ? nullptr : &it->second;
  }
  void Clear() { answers_.clear(); }
  size_t size() const { return answers_.size(); }
  // By step, oldest first (what a server's state file keeps).
  const std::map<uint64_t, Answer>& all() const { return answers_; }

 private:
  void Trim() {
    while (answers_.size() > capacity_) answers_.erase(answers_.begin());
  }

  size_t capacity_;
  std::map<uint64_t, Answer> answers_;
};

// What Admit decided.
template <typename Answer>
struct Admission {
  enum class Kind { kAdmit, kCached, kDuplicate, kRefused };
  Kind kind = Kind::kRefused;
  const Answer* cached = nullptr;  // kCached: the answer to give
  absl::Status error;              // kRefused: the answer to give
};

// The admission order above for `member`'s call for `step` while `open` is
// the open step. `what` names the call in the in-flight message ("push").
template <typename Answer>
Admission<Answer> Admit(const StepNames& names, uint64_t step, uint64_t open,
                        const AnswerCache<Answer>& cache,
                        const ArrivalSet& arrivals, uint32_t member,
                        absl::string_view what,
                        absl::string_view member_name) {
  using Kind = typename Admission<Answer>::Kind;
  Admission<Answer> result;
  if (step != open) {
    if (step < open) result.cached = cache.Find(step);
    if (result.cached != nullptr) {
      result.kind = Kind::kCached;
    } else {
      result.error = CheckOpenStep(names, step, open);
    }
    return result;
  }
  switch (arrivals.state(member)) {
    case ArrivalSet::State::kAbsent:
      result.kind = Kind::kAdmit;
      break;
    case ArrivalSet::State::kInFlight:
      result.error = InFlightError(names, step, what, member_name);
      break;
    case ArrivalSet::State::kArrived:
      result.kind = Kind::kDuplicate;
      break;
  }
  return result;
}

}  // namespace tern::core

#endif  // TERN_CORE_ADMISSION_H_
