// `tern ps`: one parameter-server shard as a process (DESIGN sections 3, 7
// and 8). tern/ wires the subcommand: AddPsFlags (server/ps_flags.h), then
// RunParameterServer.
#ifndef TERN_SERVER_PS_MAIN_H_
#define TERN_SERVER_PS_MAIN_H_

#include "common/logging.h"
#include "common/process/stop.h"
#include "server/ps_options.h"

namespace tern::server {

// Serves the shard (or, with --mode=weightgrad|gaia, the LPS) until `stop`
// is requested (then shuts down gracefully: pending calls are answered
// UNAVAILABLE, the health service turns NOT_SERVING, in-flight calls get a
// few seconds to finish; returns kExitOk), or until the workers fail to
// join within --join_timeout_s (returns kExitTransient). kExitPermanent for
// invalid options or an unwritable --port_file, kExitTransient when the
// address cannot be bound (common/process/exit_codes.h). Serves
// grpc.health.v1.Health through common/net. tern/main.cc requests `stop`
// on SIGINT or SIGTERM (common/process/signals.h); a test requests it
// directly.
int RunParameterServer(const PsOptions& options, Logger logger,
                       const process::StopRequest& stop);

}  // namespace tern::server

#endif  // TERN_SERVER_PS_MAIN_H_
