// Everything `tern ps` is configured with. tern/main.cc fills it from flags,
// environment variables (TERN_<FLAG>) and the cluster spec.
#ifndef TERN_SERVER_PS_OPTIONS_H_
#define TERN_SERVER_PS_OPTIONS_H_

#include <cstdint>
#include <string>

#include "common/metrics/metrics_options.h"
#include "common/net/tls_files.h"
#include "server/messages.h"

namespace tern::server {

// --weight_codec: how an LPS sends its weights to its workers.
enum class WeightCodec : uint32_t {
  kModeDefault = 0,  // ternary for weightgrad, fp32 for gaia
  kTernary = 1,
  kInt8 = 2,
  kFp32 = 3,
};

struct PsOptions {
  // host:port to listen on; port 0 picks a free port (see port_file).
  std::string listen = "127.0.0.1:50051";
  // When set, the bound port is written there once the server serves.
  std::string port_file;
  // When set, an LPS writes its report there as it stops
  // (common/records/server_report.h): steps, checksum, WAN bytes.
  std::string report_file;
  uint32_t shard_index = 0;
  uint32_t num_shards = 1;
  uint32_t num_workers = 1;
  // How long a barrier (join, scaler sharing, push-pull) waits for the last
  // worker. Below the workers' default --rpc_timeout_s (60), so that the
  // shard's answer, naming the missing workers, arrives before the worker's
  // own deadline does.
  double barrier_timeout_s = 50;
  // How long the shard waits for all workers to join before giving up.
  double join_timeout_s = 300;
  // --straggler_warn_s: a barrier that has waited this long since its
  // first worker arrived logs the workers it still waits for; 0: never.
  double straggler_warn_s = 10;
  // --state_dir: a TernGrad shard (server/shard_state.h) or an LPS
  // (server/lps_state_file.h) keeps its state there and, restarted with the
  // same flags, resumes the run from it; empty: none (a killed shard ends
  // the run).
  std::string state_dir;
  // --on_worker_loss (server/worker_loss.h): stop or shrink once a
  // barrier has waited --worker_loss_timeout_s (0: --barrier_timeout_s)
  // since its first worker for a worker that does not come.
  std::string on_worker_loss = "stop";
  double worker_loss_timeout_s = 0;
  // --catch_up_mb: the latest completed steps' answers a TernGrad shard
  // keeps for workers that come back from an older checkpoint.
  uint32_t catch_up_mb = 128;
  // --state_sync: fsync each state write, so that it survives a machine
  // crash too (a disk flush per step).
  bool state_sync = false;
  // The largest gRPC message the shard sends or receives, in MiB. Join
  // refuses a model whose share on this shard would not fit in fp32.
  uint32_t max_message_mb = 64;
  // --pace_mbit (common/net/pacing.h): each connection to another host
  // (answers to workers, an LPS's link to the global server) sends at
  // most this fast; 0: no cap.
  double pace_mbit = 0;
  std::string log_level = "info";
  // --tls_cert, --tls_key, --tls_ca (common/net/tls_flags.h): TLS for the
  // server and, for an LPS, its link to the global server; none: plaintext.
  net::TlsFiles tls;
  // --insecure (common/net/plaintext.h): plaintext accepted beyond
  // loopback when no --tls_* file is given.
  bool insecure = false;
  // --run_id: with TLS and a CA, every caller's certificate must name this
  // run (common/net/peer_identity.h); empty: any run the CA signed for.
  std::string run_id;
  // --metrics_listen, --metrics_linger_s (common/metrics): Prometheus
  // metrics of the shard or LPS (server/shard_metrics.h).
  metrics::MetricsOptions metrics;

  // --- WeightGrad (DESIGN section 4; server/WEIGHTGRAD.md) ---
  // terngrad (the TernGrad shard) | weightgrad | gaia (a local parameter
  // server, LPS, of one data center); parsed from --mode by ps_flags.
  RunMode mode = RunMode::kTernGrad;
  // host:port of `tern global`; empty: a single data center, no WAN rounds.
  std::string global;
  // This data center's index in [0, num_datacenters), and K.
  uint32_t datacenter = 0;
  uint32_t num_datacenters = 1;
  // Local steps per round with the global server.
  uint64_t sync_every = 10;
  // weightgrad/gaia with --state_dir: the LPS writes its state with a
  // round built at least this many local steps after its last write; 0:
  // with every round.
  uint64_t checkpoint_every = 0;
  // How long the global server may stay silent on a round before the LPS
  // holds its workers' answers.
  double sync_timeout_s = 60;
  // The significance threshold, on the (0, 1] scale of WEIGHTGRAD.md;
  // 0: the dynamic threshold of the paper's Appendix A.2.
  double g_thresh = 0;
  // Local steps per epoch for the dynamic threshold's rescales; 0: what
  // the workers' join says.
  uint64_t steps_per_epoch = 0;
  // How the LPS sends weights to its workers (--weight_codec: ternary,
  // int8, fp32, or empty for the mode's default).
  WeightCodec weight_codec = WeightCodec::kModeDefault;
};

}  // namespace tern::server

#endif  // TERN_SERVER_PS_OPTIONS_H_
