// What every server role (`tern ps` as shard or LPS, `tern global`) does
// with its ServerRoleOptions around its own serving: the run's frame
// (checks, log level, pacing, metrics), its gRPC server's options and the
// callers it accepts.
#ifndef TERN_COMMON_PROCESS_SERVER_ROLE_H_
#define TERN_COMMON_PROCESS_SERVER_ROLE_H_

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "common/logging.h"
#include "common/metrics/metrics.h"
#include "common/net/peer_identity.h"
#include "common/net/server.h"
#include "common/process/server_role_options.h"

namespace tern::process {

// Runs a role whose options were checked with the result `checked` (the
// role's own Validate*Options). A failed check is logged and permanent
// (kExitPermanent). Otherwise: sets --log_level, paces the connections to
// other hosts (--pace_mbit), starts the metrics endpoint (a failure is
// logged, with ExitCodeFor's code), calls `serve` with the metrics to
// fill, lets the endpoint linger (--metrics_linger_s), and returns what
// `serve` returned.
int RunServerRole(const ServerRoleOptions& options, const absl::Status& checked,
                  const Logger& logger,
                  absl::FunctionRef<int(metrics::Metrics&)> serve);

// The gRPC server's options from the role's flags
// (net::ServerOptionsFromFlags), for `senders` peers that may each send
// their largest message at once (a shard's workers, the global server's
// data centers).
net::ServerOptions ServingOptions(const ServerRoleOptions& options, int senders,
                                  const Logger& logger);

// Who may call the role: under mTLS, certificates of --run_id when it is
// set (net::PeerPolicy::For).
net::PeerPolicy CallerPolicy(const ServerRoleOptions& options);

}  // namespace tern::process

#endif  // TERN_COMMON_PROCESS_SERVER_ROLE_H_
