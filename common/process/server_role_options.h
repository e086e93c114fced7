// What every server role (`tern ps` as shard or LPS, `tern global`) is
// configured with beside its own options: where it serves, the files it
// writes, its transport, logs and metrics. PsOptions and GsOptions extend
// it; common/process/server_role_flags.h registers and checks its flags,
// common/process/server_role.h runs a role with it.
#ifndef TERN_COMMON_PROCESS_SERVER_ROLE_OPTIONS_H_
#define TERN_COMMON_PROCESS_SERVER_ROLE_OPTIONS_H_

#include <cstdint>
#include <string>

#include "common/metrics/metrics_options.h"
#include "common/net/tls_files.h"

namespace tern::process {

struct ServerRoleOptions {
  // host:port to listen on; port 0 picks a free port (see port_file). Each
  // role sets its own default.
  std::string listen;
  // When set, the bound port is written there once the server serves.
  std::string port_file;
  // When set, the server writes its report there as it stops
  // (common/records/server_report.h).
  std::string report_file;
  // The largest gRPC message the server sends or receives, in MiB; each
  // role refuses at registration a model whose messages would not fit.
  uint32_t max_message_mb = 64;
  // --pace_mbit (common/net/pacing.h): each connection to another host
  // sends at most this fast; 0: no cap.
  double pace_mbit = 0;
  // --state_dir: the server keeps its state there and, restarted with the
  // same flags, resumes the run from it; empty: none (a killed server ends
  // the run).
  std::string state_dir;
  // --state_sync: with state_dir, flush each state write to disk, so that
  // it survives a machine crash too. Each role sets its own default.
  bool state_sync = false;
  std::string log_level = "info";
  // --tls_cert, --tls_key, --tls_ca (common/net/tls_flags.h): TLS for the
  // server and the connections it makes; none: plaintext.
  net::TlsFiles tls;
  // --insecure (common/net/plaintext.h): plaintext accepted beyond
  // loopback when no --tls_* file is given.
  bool insecure = false;
  // --run_id: with TLS and a CA, every caller's certificate must name this
  // run (common/net/peer_identity.h); empty: any run the CA signed for.
  std::string run_id;
  // --metrics_listen, --metrics_linger_s (common/metrics): the role's
  // Prometheus metrics.
  metrics::MetricsOptions metrics;
};

}  // namespace tern::process

#endif  // TERN_COMMON_PROCESS_SERVER_ROLE_OPTIONS_H_
