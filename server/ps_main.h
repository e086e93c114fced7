// `tern ps`: one parameter-server shard as a process (DESIGN sections 3, 7
// and 8). tern/ wires the subcommand: AddPsFlags (server/ps_flags.h), then
// RunParameterServer.
#ifndef TERN_SERVER_PS_MAIN_H_
#define TERN_SERVER_PS_MAIN_H_

#include <string>

#include "absl/status/status.h"
#include "common/logging.h"
#include "server/ps_options.h"

namespace tern::server {

// Exit codes, for Kubernetes' restart policy (DESIGN section 7): a
// configuration error is permanent; a transient failure (the workers did
// not all join in time, the port could not be bound) may succeed when the
// pod is restarted.
inline constexpr int kExitOk = 0;
inline constexpr int kExitConfigError = 1;
inline constexpr int kExitTransient = 128;

// Serves the shard until SIGINT or SIGTERM (then shuts down gracefully:
// pending calls are answered UNAVAILABLE, the health service turns
// NOT_SERVING, in-flight calls get a few seconds to finish; returns
// kExitOk), or until the workers fail to join within --join_timeout_s
// (returns kExitTransient). kExitConfigError for invalid options or an
// unwritable --port_file. Also serves grpc.health.v1.Health.
//
// Signals: it blocks SIGINT and SIGTERM in the calling thread, so that the
// threads it starts inherit the mask, and takes them with sigtimedwait
// (nothing runs in a signal handler). Call it from the main thread before
// any other thread is started, or block both signals in those threads too;
// the calling thread's mask is restored on return.
int RunParameterServer(const PsOptions& options, Logger logger);

// Writes "<port>\n" to `path` atomically (a temporary file in the same
// directory, then rename), so a reader never sees a partial file.
absl::Status WritePortFile(const std::string& path, int port);

}  // namespace tern::server

#endif  // TERN_SERVER_PS_MAIN_H_
