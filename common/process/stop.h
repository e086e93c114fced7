// How a server is told to stop: a one-shot notification with a reason,
// passed to the role's run function. In a process, SignalWatcher
// (common/process/signals.h) fires it on SIGINT or SIGTERM; a test fires
// it directly, so several servers can run and stop in one test process
// without signals.
//
// Thread safety: every method may be called from any thread.
#ifndef TERN_COMMON_PROCESS_STOP_H_
#define TERN_COMMON_PROCESS_STOP_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace tern::process {

class StopRequest {
 public:
  // Asks to stop; the first reason is kept, later calls do nothing.
  void Request(const std::string& reason);
  bool requested() const { return notification_.HasBeenNotified(); }
  // True once stop was requested, false when `timeout` passed first.
  bool WaitFor(absl::Duration timeout) const {
    return notification_.WaitForNotificationWithTimeout(timeout);
  }
  // Why stop was requested ("SIGTERM received"); empty before.
  std::string reason() const;
  // For waits that take a notification (common/net/backoff.h).
  const absl::Notification& notification() const { return notification_; }

 private:
  mutable absl::Mutex mu_;
  std::string reason_ ABSL_GUARDED_BY(mu_);
  absl::Notification notification_;
};

}  // namespace tern::process

#endif  // TERN_COMMON_PROCESS_STOP_H_
