// SIGINT and SIGTERM as a StopRequest (common/process/stop.h). The signal
// handler only writes the signal's number into a pipe (the self-pipe
// trick: write(2) is async-signal-safe); a thread of the watcher reads it
// and requests the stop. This holds whichever thread the kernel picks for
// the signal, including threads that libraries started before main() (a
// blocked-mask scheme missed those: the signal then took its default
// action and the process ended with 143 instead of shutting down).
//
// One watcher at a time per process: signal dispositions are process-wide.
#ifndef TERN_COMMON_PROCESS_SIGNALS_H_
#define TERN_COMMON_PROCESS_SIGNALS_H_

#include <signal.h>

#include <thread>

#include "common/process/stop.h"

namespace tern::process {

class SignalWatcher {
 public:
  // Starts watching; `stop` (borrowed, must outlive the watcher) is
  // requested with strsignal's name ("Terminated received" for SIGTERM,
  // "Interrupt received" for SIGINT) when one arrives. Aborts when
  // another watcher is alive or the pipe cannot be made (our invariant,
  // not input from outside).
  explicit SignalWatcher(StopRequest* stop);
  // Restores the previous handlers and ends the thread.
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

 private:
  void Watch();

  StopRequest* const stop_;
  int read_fd_ = -1;
  struct sigaction previous_int_ {};
  struct sigaction previous_term_ {};
  std::thread thread_;
};

}  // namespace tern::process

#endif  // TERN_COMMON_PROCESS_SIGNALS_H_
