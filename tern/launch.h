// `tern launch`: a whole job on this machine, for development and tests.
// It starts S shards and N workers as children of this same binary on
// loopback, shows their merged output and the training progress, stops
// everything when a child fails or on Ctrl-C/SIGTERM, and ends with a
// summary (OUT/summary.json).
//
// With --geo it starts a geo-distributed run instead (tern/geo_plan.h): the
// global server and one LPS per data center, or shards for all, and the
// workers, optionally inside an emulated WAN (deploy/wan/tern-wan, which it
// always takes down again at the end).
//
// Files under --out_dir (default runs/<UTC time>):
//   ps-<i>.port        the port shard i bound (it listens on port 0)
//   global.port, lps-<d>.port    the same for the GS and the LPSs
//   ps-<i>.log, worker-<i>.log   each child's output, stdout and stderr
//   global.log, lps-<d>.log, wan-up.log, wan-down.log
//   worker-<i>.jsonl   each worker's per-step records
//                      (common/records/step_record.h)
//   global.report.json, lps-<d>.report.json   what the GS and the LPSs
//                      report as they stop (common/records/server_report.h)
//   summary.json       the final summary (tern/run_summary.h)
//   tls/               --tls: the run's CA and each child's certificate and
//                      key (tern/launch_tls.h)
//
// The parts, one file each: launch_flags.cc (the flags), console.h (what it
// prints while running), child_supervisor.h (the children and what their
// ends mean), server_startup.h (the emulated WAN and the servers),
// launch_report.h (the summary); launch.cc holds them together.
#ifndef TERN_TERN_LAUNCH_H_
#define TERN_TERN_LAUNCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/flags/cli_fwd.h"
#include "tern/child_supervisor.h"
#include "tern/geo_plan.h"
#include "tern/launch_options.h"
#include "worker/worker_options.h"

namespace tern {

// The worker flags that `tern launch` sets itself, per worker: they are not
// flags of `tern launch`. "mode" is set by --geo (a worker in another mode
// than its shards cannot train).
inline constexpr const char* kLaunchOwnedWorkerFlags[] = {
    "ps", "worker_id", "num_workers", "metrics_out", "mode"};

// Registers launch's own flags (--shards, --workers, --out_dir, timeouts,
// --target_accuracy, the geo flags of tern/geo_plan.h) and
// every worker flag (worker/worker_flags.h: one definition for both) on
// `app`, the `launch` subcommand. `*options` must outlive the parse; when the
// subcommand has parsed, options->worker_args holds the worker flags given.
void AddLaunchFlags(CLI::App* app, LaunchOptions* options);

// Checks the geo flags (ValidateGeoOptions, with `is_root` for
// --emulate_wan) and the job's worker flags as a worker would see them
// (with launch's own --ps, --num_workers and --worker_id), before anything
// starts. INVALID_ARGUMENT naming the flag.
absl::Status ValidateLaunchOptions(const LaunchOptions& options, bool is_root);

// ShardArgs and WorkerArgs (the children's command lines) are in
// tern/geo_plan.h, ExitCodeFor and process::kExitStartFailure in
// tern/child_supervisor.h; this header includes both.

// "runs/20240131-235959Z".
std::string DefaultOutDir(absl::Time now);

// Runs the job and returns the process exit code: 0 when every worker
// finished; the failing child's ExitCodeFor(); 1 for launch's own
// configuration errors (an output directory it cannot create);
// kExitStartFailure; 128 + signal when interrupted. Call it from the
// main thread before any other thread starts (it takes over SIGINT, SIGTERM and
// SIGCHLD; see ProcessGroup).
int RunLaunch(const LaunchOptions& options);

}  // namespace tern

#endif  // TERN_TERN_LAUNCH_H_
