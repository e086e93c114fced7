// SIGINT and SIGTERM as a StopRequest (common/process/stop.h): nothing runs
// in a signal handler. The watcher blocks both signals in the thread that
// creates it, which every thread started afterwards inherits, and takes
// them in a thread of its own with sigtimedwait.
//
// Create it in main() before any other thread is started (or block both
// signals in those threads too); a signal that reaches a thread where it
// is not blocked ends the process by its default action.
#ifndef TERN_COMMON_PROCESS_SIGNALS_H_
#define TERN_COMMON_PROCESS_SIGNALS_H_

#include <signal.h>

#include <thread>

#include "absl/synchronization/notification.h"
#include "common/process/stop.h"

namespace tern::process {

class SignalWatcher {
 public:
  // Starts watching; `stop` (borrowed, must outlive the watcher) is
  // requested with strsignal's name ("Terminated received" for SIGTERM,
  // "Interrupt received" for SIGINT) when one arrives.
  explicit SignalWatcher(StopRequest* stop);
  // Ends the thread, takes the signals still pending (which would kill the
  // process the moment they are unblocked) and restores the mask.
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

 private:
  StopRequest* const stop_;
  sigset_t set_;
  sigset_t previous_;
  absl::Notification done_;
  std::thread thread_;
};

}  // namespace tern::process

#endif  // TERN_COMMON_PROCESS_SIGNALS_H_
