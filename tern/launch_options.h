// What `tern launch` is configured with: the local cluster (shards,
// workers, output), the job (every worker flag), and the geo-distributed
// comparison modes of DESIGN.md section 4 (tern/geo_plan.h builds their
// processes). Filled by AddLaunchFlags (tern/launch.h).
#ifndef TERN_TERN_LAUNCH_OPTIONS_H_
#define TERN_TERN_LAUNCH_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/metrics/metrics_options.h"
#include "tern/geo_mode.h"
#include "worker/worker_options.h"

namespace tern {

// --geo: K data centers of W workers each, trained one of four ways so that
// the four can be compared on the same benchmark (DESIGN.md section 4).
struct GeoOptions {
  // kNone: not a geo run (--geo empty or not given).
  GeoMode mode = GeoMode::kNone;
  uint32_t datacenters = 2;
  uint32_t workers_per_dc = 2;
  // gaia/weightgrad: local steps per global round (0: the LPS's default).
  uint64_t sync_every = 0;
  // weightgrad: how the LPS sends weights to its workers (""= the LPS's
  // default, ternary); gaia always uses fp32.
  std::string weight_codec;
  // weightgrad: the LPSs' fixed significance threshold in (0, 1] (tern ps
  // --g_thresh); 0: their default, the paper's dynamic threshold.
  double g_thresh = 0;
  // Passed to `tern global` when set (0 / -1: the GS's defaults).
  double t_global_s = 0;
  int32_t max_lag = -1;
  // Run each region in its own network namespace, joined by shaped WAN
  // links (deploy/wan/tern-wan). Needs root.
  bool emulate_wan = false;
  // Rate of each WAN link, mbit/s (0: tern-wan's default, LAN / 10).
  double wan_mbit = 0;
  // The tern-wan script (empty: looked for, see FindWanScript).
  std::string wan_script;
  // tern-wan's namespace prefix; two runs at once need different ones.
  std::string wan_prefix = "tern-";
};

struct LaunchOptions {
  uint32_t shards = 1;
  uint32_t workers = 2;
  // Empty: runs/<UTC timestamp> under the current directory.
  std::string out_dir;
  // How long the shards may take to serve (write their port files).
  double start_timeout_s = 60;
  // Grace between SIGTERM and SIGKILL when stopping children.
  double stop_timeout_s = 10;
  // Period of the plain progress lines when stderr is not a terminal
  // (0: none).
  double progress_every_s = 10;
  // The summary reports when worker 0 first evaluated at or above this test
  // accuracy (0: not reported).
  double target_accuracy = 0;
  // --tls: the launcher makes the run's CA and certificates in OUT/tls and
  // every link is mutual TLS (tern/launch_tls.h).
  bool tls = false;
  // --insecure: plaintext servers beyond loopback (--emulate_wan's
  // addresses), each started with --insecure (common/net/plaintext.h).
  bool insecure = false;
  // --metrics_listen=IP:BASE_PORT, --metrics_linger_s: every server and
  // worker serves Prometheus metrics on a port of its own from BASE_PORT,
  // and OUT/prometheus.yml scrapes them (tern/launch_metrics.h).
  metrics::MetricsOptions metrics;
  GeoOptions geo;
  // The job: the worker flags, parsed by the worker's own flag definitions.
  worker::WorkerOptions job;
  // The worker flags given on the command line or through TERN_<FLAG>, as
  // "--name=value", in definition order; every worker gets them verbatim.
  // Filled by the parse (AddLaunchFlags).
  std::vector<std::string> worker_args;
  // Launch's own flags that were given (command line or TERN_<FLAG>),
  // without "--": validation refuses combinations that make no sense.
  std::vector<std::string> given_flags;
};

}  // namespace tern

#endif  // TERN_TERN_LAUNCH_OPTIONS_H_
