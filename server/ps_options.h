// Everything `tern ps` is configured with. tern/main.cc fills it from flags,
// environment variables (TERN_<FLAG>) and the cluster spec.
#ifndef TERN_SERVER_PS_OPTIONS_H_
#define TERN_SERVER_PS_OPTIONS_H_

#include <cstdint>
#include <string>

#include "common/process/server_role_options.h"
#include "server/messages.h"

namespace tern::server {

// --weight_codec: how an LPS sends its weights to its workers.
enum class WeightCodec : uint32_t {
  kModeDefault = 0,  // ternary for weightgrad, fp32 for gaia
  kTernary = 1,
  kInt8 = 2,
  kFp32 = 3,
};

// The flags every server role has are ServerRoleOptions'
// (common/process/server_role_options.h). Of them, here:
// report_file is an LPS's report (steps, checksum, WAN bytes); a TernGrad
// shard (server/shard_state.h) or an LPS (server/lps_state_file.h) keeps
// its state in state_dir; the TLS files also serve an LPS's link to the
// global server, and --pace_mbit paces that link too; join refuses a
// model whose share on this shard would not fit in max_message_mb in fp32.
struct PsOptions : process::ServerRoleOptions {
  PsOptions() { listen = "127.0.0.1:50051"; }

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
  // --on_worker_loss (server/worker_loss.h): stop or shrink once a
  // barrier has waited --worker_loss_timeout_s (0: --barrier_timeout_s)
  // since its first worker for a worker that does not come.
  std::string on_worker_loss = "stop";
  double worker_loss_timeout_s = 0;
  // --catch_up_mb: the latest completed steps' answers a TernGrad shard
  // keeps for workers that come back from an older checkpoint.
  uint32_t catch_up_mb = 128;

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
