// Stragglers named before any timeout fires (issue 16): a worker that is
// alive but late (a slow GPU, a paused process) keeps a barrier waiting
// until its timeout, and until then nobody says who is holding the step.
// A StragglerWatch starts its clock at a barrier's first arrival and says,
// once per barrier, when `warn_after` has passed while members are still
// missing; the server then logs their names.
//
// Not thread-safe: the server's mutex guards it.
#ifndef TERN_CORE_STRAGGLER_WATCH_H_
#define TERN_CORE_STRAGGLER_WATCH_H_

#include "absl/time/time.h"

namespace tern::core {

class StragglerWatch {
 public:
  // warn_after <= 0: never due.
  explicit StragglerWatch(absl::Duration warn_after)
      : warn_after_(warn_after) {}

  // A member arrived at `now`; the barrier's first arrival starts the clock.
  void Arrive(absl::Time now) {
    if (first_ == absl::InfiniteFuture()) first_ = now;
  }
  // True once per barrier, at the first call at or after warn_after past
  // its first arrival. The caller checks that members are still missing.
  bool Due(absl::Time now) {
    if (warned_ || warn_after_ <= absl::ZeroDuration() ||
        now - first_ < warn_after_) {
      return false;
    }
    warned_ = true;
    return true;
  }
  // Whether a member has arrived at this barrier (its clock runs).
  bool Started() const { return first_ != absl::InfiniteFuture(); }
  // How long the barrier has waited since its first arrival.
  absl::Duration Waited(absl::Time now) const { return now - first_; }
  // The barrier completed: the next one starts afresh.
  void Reset() {
    first_ = absl::InfiniteFuture();
    warned_ = false;
  }

 private:
  absl::Duration warn_after_;
  absl::Time first_ = absl::InfiniteFuture();
  bool warned_ = false;
};

}  // namespace tern::core

#endif  // TERN_CORE_STRAGGLER_WATCH_H_
