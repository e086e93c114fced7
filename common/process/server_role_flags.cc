#include "common/process/server_role_flags.h"

#include "absl/strings/str_cat.h"
#include "common/flags/flags.h"
#include "common/metrics/metrics_flags.h"
#include "common/net/pacing_flag.h"
#include "common/status_macros.h"

namespace tern::process {

void AddServerRoleFlags(CLI::App* app, ServerRoleOptions* o,
                        const ServerRoleHelp& help) {
  flags::Flag(app, "listen", &o->listen,
              "host:port to serve on; port 0 picks a free port (see "
              "--port_file)")
      ->check(flags::HostPort());
  flags::Flag(app, "port_file", &o->port_file,
              "file the bound port is written to once the server serves "
              "(empty: none)");
  flags::Flag(app, "report_file", &o->report_file, help.report_file);
  flags::Flag(app, "max_message_mb", &o->max_message_mb, help.max_message_mb)
      ->check(CLI::Range(1u, flags::kMaxMessageMb));
  net::AddPaceFlag(app, &o->pace_mbit);
  flags::Flag(app, "state_dir", &o->state_dir, help.state_dir);
  flags::Flag(app, "state_sync", &o->state_sync, help.state_sync);
  flags::Flag(app, "log_level", &o->log_level, help.log_level)
      ->check(flags::LogLevel());
  net::AddTlsFlags(app, &o->tls);
  net::AddInsecureFlag(app, &o->insecure);
  net::AddServingRunIdFlag(app, &o->run_id);
  metrics::AddMetricsFlags(app, &o->metrics);
}

absl::Status ValidateServerRoleOptions(const ServerRoleOptions& o,
                                       net::TlsUse use) {
  if (!flags::IsHostPort(o.listen)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--listen: '", o.listen, "' is not of the form host:port"));
  }
  TERN_RETURN_IF_ERROR(net::ValidateServingRunId(o.run_id));
  TERN_RETURN_IF_ERROR(
      flags::CheckMessageAndLogFlags(o.max_message_mb, o.log_level));
  TERN_RETURN_IF_ERROR(metrics::ValidateMetricsOptions(o.metrics));
  return net::ValidateServingTransport(o.tls, o.insecure, use, o.listen);
}

}  // namespace tern::process
