#include "common/process/server_role.h"

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/net/pacing.h"
#include "common/net/tls_flags.h"
#include "common/process/exit_codes.h"

namespace tern::process {

int RunServerRole(const ServerRoleOptions& options, const absl::Status& checked,
                  const Logger& logger,
                  absl::FunctionRef<int(metrics::Metrics&)> serve) {
  if (!checked.ok()) {
    logger->error("{}", std::string(checked.message()));
    return kExitPermanent;
  }
  // The checks accepted the name.
  logger->set_level(*ParseLogLevel(options.log_level));
  const std::unique_ptr<net::ConnectionPacer> pacer =
      net::PaceConnections(options.pace_mbit, logger);
  absl::StatusOr<std::unique_ptr<metrics::Metrics>> metrics =
      metrics::Metrics::Start(options.metrics, logger);
  if (!metrics.ok()) {
    logger->error("{}", std::string(metrics.status().message()));
    return ExitCodeFor(metrics.status());
  }
  const int exit_code = serve(**metrics);
  (*metrics)->Linger();
  return exit_code;
}

net::ServerOptions ServingOptions(const ServerRoleOptions& options, int senders,
                                  const Logger& logger) {
  return net::ServerOptionsFromFlags(options.listen, options.tls,
                                     options.insecure, options.max_message_mb,
                                     senders, logger);
}

net::PeerPolicy CallerPolicy(const ServerRoleOptions& options) {
  return net::PeerPolicy::For(
      net::SecurityFromFlags(options.tls, options.insecure), options.run_id);
}

}  // namespace tern::process
