// A clock that moves only when a test says so, for the servers' deadlines
// (their options take a std::function<absl::Time()>). Test-only; not
// thread-safe to advance while a server reads it from another thread.
#ifndef TERN_CORE_FAKE_CLOCK_H_
#define TERN_CORE_FAKE_CLOCK_H_

#include <functional>

#include "absl/time/time.h"

namespace tern::core {

class FakeClock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1000000))
      : now_(start) {}

  absl::Time Now() const { return now_; }
  void Advance(absl::Duration by) { now_ += by; }

  // A clock function reading this FakeClock, which must outlive it.
  std::function<absl::Time()> AsFunction() const {
    return [this] { return now_; };
  }

 private:
  absl::Time now_;
};

}  // namespace tern::core

#endif  // TERN_CORE_FAKE_CLOCK_H_
