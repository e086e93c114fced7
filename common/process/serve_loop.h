// The loop every server role (`tern ps` as shard or LPS, `tern global`)
// runs once it serves: move its clock-driven work on (barrier deadlines,
// the join timeout, T_global and holds) every tick until a stop is
// requested, and the port file that tells a supervisor where it serves.
#ifndef TERN_COMMON_PROCESS_SERVE_LOOP_H_
#define TERN_COMMON_PROCESS_SERVE_LOOP_H_

#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "common/process/stop.h"

namespace tern::process {

// How often a server looks at the clock while it waits for the stop.
inline constexpr absl::Duration kServeTick = absl::Milliseconds(100);

// Calls `tick(now)` every `period` until `stop` is requested (logs the
// reason; kExitOk) or `tick` fails, as when the workers do not join in time
// (logs the status; kExitTransient, so that an orchestrator restarts it).
int ServeUntilStopped(const StopRequest& stop, const Logger& logger,
                      absl::FunctionRef<absl::Status(absl::Time)> tick,
                      absl::Duration period = kServeTick);

// Writes `port` to `path` (WritePortFile) unless `path` is empty; logs
// and returns false when it cannot.
bool WritePortFileIfAsked(const std::string& path, int port,
                          const Logger& logger);

// Makes the server's --state_dir `dir` (and its parents) unless it is
// empty, so that a directory that cannot exist stops the server at once
// instead of failing every state write of the run; logs and returns false
// when it cannot.
bool MakeStateDirIfAsked(const std::string& dir, const Logger& logger);

}  // namespace tern::process

#endif  // TERN_COMMON_PROCESS_SERVE_LOOP_H_
