// `tern global`: the WeightGrad global server as a process (DESIGN sections
// 4, 7 and 8). tern/ wires the subcommand: AddGsFlags (global/gs_flags.h),
// then RunGlobalServer.
#ifndef TERN_GLOBAL_GS_MAIN_H_
#define TERN_GLOBAL_GS_MAIN_H_

#include "common/logging.h"
#include "common/process/stop.h"
#include "global/gs_options.h"

namespace tern::global {

// Serves the GS until `stop` is requested, then shuts down gracefully:
// pending calls are answered UNAVAILABLE (the LPSs retry against a
// restarted GS), the health service turns NOT_SERVING, in-flight calls get
// a few seconds to finish; returns kExitOk. kExitPermanent for invalid
// options or an unwritable --port_file, kExitTransient when the address
// cannot be bound (common/process/exit_codes.h). Serves
// grpc.health.v1.Health through common/net. Logs one line per closed round
// (the round aggregator's) and a summary at the end. tern/main.cc requests
// `stop` on SIGINT or SIGTERM (common/process/signals.h); a test requests
// it directly.
int RunGlobalServer(const GsOptions& options, Logger logger,
                    const process::StopRequest& stop);

}  // namespace tern::global

#endif  // TERN_GLOBAL_GS_MAIN_H_
