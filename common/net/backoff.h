// Retries by hand, for the waits that gRPC's retry policy
// (common/net/channel.h) cannot express: it retries within one call's
// deadline, at most 5 attempts, and never after DEADLINE_EXCEEDED. A
// worker joining shards that are still starting (minutes, each attempt with
// its own deadline) and an LPS registering with, or holding a round for, a
// global server that restarts need a budget that spans many deadlines.
// Those loops share this one clock and backoff rule.
//
// Thread safety: one loop, one thread; Cancel-ing is through the
// notification passed to Wait, from any thread.
#ifndef TERN_COMMON_NET_BACKOFF_H_
#define TERN_COMMON_NET_BACKOFF_H_

#include <algorithm>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tern::net {

// Whether a later attempt of a call may succeed where this one failed: the
// peer was unreachable (UNAVAILABLE) or too slow (DEADLINE_EXCEEDED). Every
// other code says something a retry cannot change. The one rule of the
// hand-written retry loops (worker/ps_client.cc, server/gs_link.cc).
inline bool IsTransient(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
}

class Backoff {
 public:
  // Attempts may start until `budget` from now; the pause after attempt n
  // is first * 2^(n-1), at most `max`.
  Backoff(absl::Duration budget, absl::Duration first, absl::Duration max)
      : give_up_(absl::Now() + budget), next_(first), max_(max) {}

  absl::Time give_up() const { return give_up_; }
  // What is left of the budget (zero when spent).
  absl::Duration left() const {
    return std::max(give_up_ - absl::Now(), absl::ZeroDuration());
  }
  // Pauses taken so far: attempts() + 1 attempts have started.
  int attempts() const { return attempts_; }
  // The pause Wait would take now.
  absl::Duration next_pause() const { return std::min(next_, left()); }

  // Between two attempts: pauses next_pause() (less if `cancel` is
  // notified meanwhile). False, without pausing, when the budget is spent
  // or `cancel` is notified: do not try again.
  bool Wait(const absl::Notification* cancel = nullptr) {
    const absl::Duration pause = next_pause();
    if (pause <= absl::ZeroDuration()) return false;
    if (cancel == nullptr) {
      absl::SleepFor(pause);
    } else if (cancel->WaitForNotificationWithTimeout(pause)) {
      return false;
    }
    ++attempts_;
    next_ = std::min(2 * next_, max_);
    return true;
  }

 private:
  const absl::Time give_up_;
  absl::Duration next_;
  const absl::Duration max_;
  int attempts_ = 0;
};

}  // namespace tern::net

#endif  // TERN_COMMON_NET_BACKOFF_H_
