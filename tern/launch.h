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
//   worker-<i>.jsonl   each worker's per-step records (worker/step_metrics.h)
//   summary.json       the final summary (tern/run_summary.h)
#ifndef TERN_TERN_LAUNCH_H_
#define TERN_TERN_LAUNCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "tern/launch_options.h"
#include "tern/process_group.h"
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

// argv (without the program) of shard `shard`: listen on a free port
// (loopback; any interface in the GS's region of an emulated WAN) and
// report it in `port_file`.
std::vector<std::string> ShardArgs(const LaunchOptions& options, uint32_t shard,
                                   const std::string& port_file);

// argv (without the program) of worker `worker`, given the shard addresses.
std::vector<std::string> WorkerArgs(const LaunchOptions& options,
                                    uint32_t worker,
                                    const std::vector<std::string>& shards,
                                    const std::string& metrics_out);

// The exit code that a child's end gives the launcher (DESIGN section 7,
// Kubernetes' restart policy): 0 for success, 1 for a configuration error
// (any code below 128, e.g. 127 when exec failed), the code itself at or
// above 128, and 128 + signal for a child killed by a signal.
int ExitCodeFor(const ChildExit& exit);

// "runs/20240131-235959Z".
std::string DefaultOutDir(absl::Time now);

// Runs the job and returns the process exit code: 0 when every worker
// finished; the failing child's ExitCodeFor(); 1 for launch's own
// configuration errors (an output directory it cannot create);
// kExitStartFailure (below); 128 + signal when interrupted. Call it from the
// main thread before any other thread starts (it takes over SIGINT, SIGTERM and
// SIGCHLD; see ProcessGroup).
int RunLaunch(const LaunchOptions& options);

// The job could not be started or kept going for a reason outside the
// children's own exit codes: a shard that does not serve within
// --start_timeout_s or ends on its own before the workers, a failed fork or
// pipe. Transient: the same code as a worker's transient failure
// (worker/worker_main.h).
inline constexpr int kExitStartFailure = 128;

}  // namespace tern

#endif  // TERN_TERN_LAUNCH_H_
