#include "common/process/signals.h"

#include <pthread.h>
#include <string.h>

#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace tern::process {
namespace {

// How often the watcher looks at done_ between signals.
constexpr absl::Duration kPoll = absl::Milliseconds(100);

}  // namespace

SignalWatcher::SignalWatcher(StopRequest* stop) : stop_(stop) {
  sigemptyset(&set_);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set_, &previous_);
  thread_ = std::thread([this] {
    const timespec poll = absl::ToTimespec(kPoll);
    while (!done_.HasBeenNotified()) {
      const int signal = sigtimedwait(&set_, nullptr, &poll);
      if (signal > 0) {  // -1: EAGAIN (no signal in time) or EINTR
        stop_->Request(absl::StrCat(strsignal(signal), " received"));
      }
    }
  });
}

SignalWatcher::~SignalWatcher() {
  done_.Notify();
  thread_.join();
  const timespec zero{0, 0};
  while (sigtimedwait(&set_, nullptr, &zero) > 0) {
  }
  pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
}

}  // namespace tern::process
