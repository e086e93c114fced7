// Refusals logged at a bounded rate (issue 14): a server logs each call it
// refuses, and a stranger repeating one refused call would otherwise write
// a line per call (0.12 GiB per million). RefusalLog lets the first few
// lines of each (peer, reason) through per interval, counts the rest, and
// when the interval turns over logs one summary line per key that lost
// some: "995 more refusals of push FAILED_PRECONDITION from worker 3 in the
// last 60 s were not logged".
//
// The key: `peer` is who called, as the server knows it (the address
// without its port, PeerHost below, in a gRPC service; the member the
// request names, "worker 3", in a plain class); `reason` is a short stable
// category, the call and the status code (RefusalReason), never the
// message, whose numbers vary per call. At most max_keys keys are tracked
// per interval; refusals of any further key share one count ("... of
// further peers and reasons"), so a stranger rotating addresses or made-up
// names grows neither the memory nor the log.
// Lines per interval are at most (max_keys + 1) * lines_per_key plus one
// summary per key.
//
// Summaries are logged when the interval has passed: at the next refusal,
// at Flush (servers with a timer call it from their expiry sweep), or when
// the RefusalLog is destroyed.
//
// Thread safety: every method may be called from any thread at once.
#ifndef TERN_COMMON_REFUSAL_LOG_H_
#define TERN_COMMON_REFUSAL_LOG_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/logging.h"

namespace tern {

struct RefusalLogOptions {
  // Lines logged per (peer, reason) and interval; the rest are counted.
  int lines_per_key = 5;
  absl::Duration interval = absl::Seconds(60);
  // (peer, reason) keys tracked per interval; refusals of further keys
  // share one count.
  size_t max_keys = 1024;
  // Where "now" comes from; tests pass a fake clock.
  std::function<absl::Time()> clock = [] { return absl::Now(); };
};

// "push FAILED_PRECONDITION": the call and the status code, the reason a
// refusal is counted under.
std::string RefusalReason(absl::string_view call, const absl::Status& status);

// A gRPC peer ("ipv4:10.0.0.7:53211", "ipv6:[::1]:40000") without its
// port, so that a caller's new connections count as one peer; any other
// form (unix:, in-process) as it is.
std::string PeerHost(absl::string_view grpc_peer);

// The peer a plain class counts a refusal under: the member the request
// names ("worker 3") when `id` is below `count`, else "an unknown worker",
// so that made-up ids make no keys of their own. `kind` is "worker" or
// "data center".
std::string MemberKey(absl::string_view kind, uint32_t id, uint32_t count);

class RefusalLog {
 public:
  explicit RefusalLog(Logger logger, RefusalLogOptions options = {});
  // The default limits, with `clock` for "now" (a server's own clock).
  RefusalLog(Logger logger, std::function<absl::Time()> clock);
  RefusalLog(const RefusalLog&) = delete;
  RefusalLog& operator=(const RefusalLog&) = delete;
  // Logs the summaries still due (the interval need not have passed).
  ~RefusalLog();

  // Logs the line at warn level if Pass(peer, reason); the arguments are
  // formatted only then.
  template <typename... Args>
  void Warn(absl::string_view peer, absl::string_view reason,
            spdlog::format_string_t<Args...> format, Args&&... args) {
    if (Pass(peer, reason)) logger_->warn(format, std::forward<Args>(args)...);
  }

  // A gRPC service's refused call: counted under the caller's host
  // (PeerHost of `grpc_peer`, the context's peer()) and
  // RefusalReason(call, status). A service has no timer: the summary of
  // the lines left out comes with the next refusal after the interval, or
  // when the log is destroyed.
  template <typename... Args>
  void WarnCall(absl::string_view grpc_peer, absl::string_view call,
                const absl::Status& status,
                spdlog::format_string_t<Args...> format, Args&&... args) {
    Warn(PeerHost(grpc_peer), RefusalReason(call, status), format,
         std::forward<Args>(args)...);
  }

  // Counts one refusal of (peer, reason) and says whether its line may be
  // logged: true for the first lines_per_key of the key this interval.
  // Logs the last interval's summaries first when it has passed.
  bool Pass(absl::string_view peer, absl::string_view reason);

  // Logs the summaries of the interval if it has passed, and starts the
  // next one; nothing when it has not.
  void Flush();

 private:
  struct Count {
    int logged = 0;
    uint64_t suppressed = 0;
  };
  using Key = std::pair<std::string, std::string>;  // (peer, reason)

  // Under the lock: when the interval has passed, its summary lines, and
  // the next interval begun.
  std::vector<std::string> TurnOver(absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Under the lock: the summary lines of the interval so far; `span` says
  // when the refusals came ("in the last 60 s").
  std::vector<std::string> Summaries(absl::string_view span) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LogAll(const std::vector<std::string>& lines) const;

  const Logger logger_;
  const RefusalLogOptions options_;

  mutable absl::Mutex mu_;
  absl::Time interval_start_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<Key, Count> counts_ ABSL_GUARDED_BY(mu_);
  // The refusals of keys beyond max_keys, all together.
  Count others_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tern

#endif  // TERN_COMMON_REFUSAL_LOG_H_
