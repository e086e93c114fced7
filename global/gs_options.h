// Everything `tern global` is configured with. tern/main.cc fills it from
// flags and environment variables (TERN_<FLAG>).
#ifndef TERN_GLOBAL_GS_OPTIONS_H_
#define TERN_GLOBAL_GS_OPTIONS_H_

#include <cstdint>
#include <string>

#include "common/metrics/metrics_options.h"
#include "common/net/tls_files.h"

namespace tern::global {

struct GsOptions {
  // host:port to listen on; port 0 picks a free port (see port_file).
  std::string listen = "127.0.0.1:50061";
  // When set, the bound port is written there once the server serves.
  std::string port_file;
  // When set, the GS writes its report there as it stops
  // (common/records/server_report.h): rounds and bytes.
  std::string report_file;
  // K: the data centers (LPSs) that exchange updates through this GS.
  uint32_t num_datacenters = 1;
  // The run seed of the answers' stochastic rounding (TernGrad answers).
  uint64_t seed = 1;
  // T_global: how long a round waits for the last data centers after its
  // first update arrived; then it closes and marks them lagging.
  double t_global_s = 10;
  // How many rounds a data center may lag behind the open round before the
  // GS holds the answers to the others (bounded staleness).
  uint32_t max_lag = 2;
  // How long a held call waits before it is answered UNAVAILABLE (the LPS
  // retries). An LPS's SyncRound deadline should exceed
  // t_global_s + hold_timeout_s.
  double hold_timeout_s = 30;
  // The largest gRPC message the GS sends or receives, in MiB. Register
  // refuses a model whose answer could exceed it.
  uint32_t max_message_mb = 64;
  // --pace_mbit (common/net/pacing.h): each connection to another host
  // (answers to the LPSs) sends at most this fast; 0: no cap.
  double pace_mbit = 0;
  // When set, the GS keeps its state there (global.state: registrations,
  // the open round, the kept answers; global/gs_state.h) and a restarted
  // GS resumes from it.
  std::string state_dir;
  // With state_dir: flush each write to disk (survives a machine crash).
  bool state_sync = true;
  std::string log_level = "info";
  // --tls_cert, --tls_key, --tls_ca (common/net/tls_flags.h); none:
  // plaintext.
  net::TlsFiles tls;
  // --insecure (common/net/plaintext.h): plaintext accepted beyond
  // loopback when no --tls_* file is given.
  bool insecure = false;
  // --run_id: with TLS and a CA, every caller's certificate must name this
  // run (common/net/peer_identity.h); empty: any run the CA signed for.
  std::string run_id;
  // --metrics_listen, --metrics_linger_s (common/metrics): Prometheus
  // metrics of the rounds (global/gs_metrics.h).
  metrics::MetricsOptions metrics;
};

}  // namespace tern::global

#endif  // TERN_GLOBAL_GS_OPTIONS_H_
