// `tern launch`: a whole job on this machine, for development and tests.
// It starts S shards and N workers as children of this same binary on
// loopback, shows their merged output and the training progress, stops
// everything when a child fails or on Ctrl-C/SIGTERM, and ends with a
// summary (OUT/summary.json).
//
// Files under --out_dir (default runs/<UTC time>):
//   ps-<i>.port        the port shard i bound (it listens on 127.0.0.1:0)
//   ps-<i>.log, worker-<i>.log   each child's output, stdout and stderr
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
#include "tern/process_group.h"
#include "worker/worker_options.h"

namespace tern {

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
  // The job: the worker flags, parsed by the worker's own flag definitions.
  worker::WorkerOptions job;
  // The worker flags given on the command line or through TERN_<FLAG>, as
  // "--name=value", in definition order; every worker gets them verbatim.
  // Filled by the parse (AddLaunchFlags).
  std::vector<std::string> worker_args;
};

// The worker flags that `tern launch` sets itself, per worker: they are not
// flags of `tern launch`.
inline constexpr const char* kLaunchOwnedWorkerFlags[] = {
    "ps", "worker_id", "num_workers", "metrics_out"};

// Registers launch's own flags (--shards, --workers, --out_dir, timeouts) and
// every worker flag (worker/worker_flags.h: one definition for both) on
// `app`, the `launch` subcommand. `*options` must outlive the parse; when the
// subcommand has parsed, options->worker_args holds the worker flags given.
void AddLaunchFlags(CLI::App* app, LaunchOptions* options);

// Checks the job's worker flags as a worker would see them (with launch's
// own --ps, --num_workers and --worker_id), before anything starts.
// INVALID_ARGUMENT naming the flag.
absl::Status ValidateLaunchOptions(const LaunchOptions& options);

// argv (without the program) of shard `shard`: listen on a free loopback
// port and report it in `port_file`.
std::vector<std::string> ShardArgs(const LaunchOptions& options,
                                   uint32_t shard,
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
// kExitStartFailure (below); 128 + signal when interrupted. Call it from the main thread before any other thread starts
// (it takes over SIGINT, SIGTERM and SIGCHLD; see ProcessGroup).
int RunLaunch(const LaunchOptions& options);

// The job could not be started or kept going for a reason outside the
// children's own exit codes: a shard that does not serve within
// --start_timeout_s or ends on its own before the workers, a failed fork or
// pipe. Transient: the same code as a worker's transient failure
// (worker/worker_main.h).
inline constexpr int kExitStartFailure = 128;

}  // namespace tern

#endif  // TERN_TERN_LAUNCH_H_
