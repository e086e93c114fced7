// Callbacks collected while a server holds its lock and run after it lets
// go, so that no answer is ever given with a server's mutex held (an answer
// may call straight back into the server).
//
// Contract: every callback added runs exactly once, in the order added,
// when the Deferred is destroyed. Declare it BEFORE the absl::MutexLock of
// a scope: locals are destroyed in reverse order, so the lock is released
// first. Not thread-safe: one Deferred belongs to one call on one thread.
#ifndef TERN_CORE_DEFERRED_H_
#define TERN_CORE_DEFERRED_H_

#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace tern::core {

// How a server answers an asynchronous call: exactly once, with a value or
// the reason there is none.
template <typename T>
using Callback = std::function<void(absl::StatusOr<T>)>;

class Deferred {
 public:
  Deferred() = default;
  Deferred(const Deferred&) = delete;
  Deferred& operator=(const Deferred&) = delete;
  ~Deferred() {
    // A callback may add to another Deferred, never to this one (it is
    // being destroyed), so iterating by index stays valid.
    for (size_t i = 0; i < callbacks_.size(); ++i) callbacks_[i]();
  }

  // Runs `done(answer)` at destruction.
  template <typename T>
  void Answer(Callback<T> done, absl::StatusOr<T> answer) {
    callbacks_.push_back(
        [done = std::move(done), answer = std::move(answer)]() mutable {
          done(std::move(answer));
        });
  }

  // Runs `callback` at destruction.
  void Run(std::function<void()> callback) {
    callbacks_.push_back(std::move(callback));
  }

  size_t size() const { return callbacks_.size(); }

 private:
  std::vector<std::function<void()>> callbacks_;
};

}  // namespace tern::core

#endif  // TERN_CORE_DEFERRED_H_
