// `tern global`: the WeightGrad global server as a process (DESIGN sections
// 4, 7 and 8). tern/ wires the subcommand: AddGsFlags (global/gs_flags.h),
// then RunGlobalServer.
#ifndef TERN_GLOBAL_GS_MAIN_H_
#define TERN_GLOBAL_GS_MAIN_H_

#include <string>

#include "absl/status/status.h"
#include "common/logging.h"
#include "global/gs_options.h"

namespace tern::global {

// Exit codes, for Kubernetes' restart policy (DESIGN section 7): a
// configuration error is permanent; a transient failure (the listen
// address could not be bound) may succeed when the pod is restarted.
inline constexpr int kExitOk = 0;
inline constexpr int kExitConfigError = 1;
inline constexpr int kExitTransient = 128;

// Serves the GS until SIGINT or SIGTERM, then shuts down gracefully:
// pending calls are answered UNAVAILABLE (the LPSs retry against a
// restarted GS), the health service turns NOT_SERVING, in-flight calls get
// a few seconds to finish; returns kExitOk. kExitConfigError for invalid
// options or an unwritable --port_file, kExitTransient when the address
// cannot be bound. Also serves grpc.health.v1.Health. Logs one line per
// closed round (the round aggregator's) and a summary at the end.
//
// Signals: it blocks SIGINT and SIGTERM in the calling thread, so that the
// threads it starts inherit the mask, and takes them with sigtimedwait
// (nothing runs in a signal handler). Call it from the main thread before
// any other thread is started, or block both signals in those threads too;
// the calling thread's mask is restored on return.
int RunGlobalServer(const GsOptions& options, Logger logger);

// Writes "<port>\n" to `path` atomically (a temporary file in the same
// directory, then rename), so a reader never sees a partial file.
absl::Status WritePortFile(const std::string& path, int port);

}  // namespace tern::global

#endif  // TERN_GLOBAL_GS_MAIN_H_
