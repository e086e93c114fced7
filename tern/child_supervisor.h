// The children of `tern launch` and what their ends mean for the run: it
// spawns tern roles (this very binary, inside a region's namespace under an
// emulated WAN) and tools (tern-wan), turns a child's unexpected end or a
// Ctrl-C/SIGTERM into the run's LaunchOutcome, and reports a failed child
// with its last lines.
#ifndef TERN_TERN_CHILD_SUPERVISOR_H_
#define TERN_TERN_CHILD_SUPERVISOR_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/process/exit_codes.h"
#include "tern/console.h"
#include "tern/launch_metrics.h"
#include "tern/launch_options.h"
#include "tern/process_group.h"
#include "tern/run_summary.h"

namespace tern {

// The exit code that a child's end gives the launcher (DESIGN section 7,
// Kubernetes' restart policy): 0 for success, 1 for a configuration error
// (any code below 128, e.g. 127 when exec failed), the code itself at or
// above 128, and ExitCodeForSignal for a child killed by a signal.
int ExitCodeFor(const ChildExit& exit);

// What a child is to the run. Servers must keep running until the workers
// are done; a worker may end, with success; tools are waited for where they
// run (RunTool), so their ends are never failures of the run.
enum class ChildRole { kServer, kWorker, kTool };

// Where the children's files go and how tern roles are started.
struct SupervisorConfig {
  // Output directory: <name with "/" as "-">.log per child.
  std::string out_dir;
  // This binary's path, as the children see it (argv[0]).
  std::string self;
  // Non-empty under --emulate_wan: every tern role runs through
  // `wan_script exec REGION` (tern/geo_plan.h, WanExecArgv).
  std::string wan_script;
  // Grace between SIGTERM and SIGKILL.
  absl::Duration stop_grace = absl::Seconds(10);
};

// Not thread-safe: the launcher's main thread calls everything (as for
// ProcessGroup, which it owns).
class ChildSupervisor {
 public:
  // Takes over SIGINT, SIGTERM and SIGCHLD (ProcessGroup::Create); the
  // children's lines go to `console`. `options` (resolved), `console` and
  // `outcome` must outlive the supervisor. INTERNAL when the signalfd
  // cannot be made.
  static absl::StatusOr<std::unique_ptr<ChildSupervisor>> Create(
      SupervisorConfig config, const LaunchOptions* options, Console* console,
      LaunchOutcome* outcome);

  // OUT/<name with "/" as "-">.log: where child `name`'s output goes.
  std::string LogOf(absl::string_view name) const;

  // Starts `tern ARGS` as child `name` in `region` (the region matters only
  // under an emulated WAN). Its index, or nothing after recording a start
  // failure in the outcome.
  std::optional<size_t> SpawnTern(const std::string& name,
                                  absl::string_view region,
                                  const std::vector<std::string>& args,
                                  ChildRole role);

  // Runs a tool (argv[0] is its path) to its end, at most `limit`; with
  // `interruptible`, a Ctrl-C/SIGTERM stops it. Its exit, or nothing when
  // it did not start or did not end.
  std::optional<ChildExit> RunTool(const std::string& name,
                                   std::vector<std::string> argv,
                                   absl::Duration limit, bool interruptible);

  // Waits up to `timeout` for output and exits (ProcessGroup::Poll), then
  // handles the children that ended (CheckExits).
  void Poll(absl::Duration timeout);

  // Records the ends of servers and failed workers as failures of the run,
  // the first one with the child's last lines on the console.
  void CheckExits();

  // True once a Ctrl-C/SIGTERM arrived; records the interruption.
  bool Interrupted();

  bool AnyRunning(const std::vector<size_t>& children) const;

  // Stops the given children (SIGTERM, then SIGKILL after the grace), or
  // every child; ends caused by the stop are not failures.
  void Stop(const std::vector<size_t>& children);
  void StopAll();

  // Every child's name and how it ended, in start order.
  std::vector<std::pair<std::string, std::string>> Ends() const;

 private:
  ChildSupervisor(SupervisorConfig config, const LaunchOptions* options,
                  Console* console, LaunchOutcome* outcome,
                  std::unique_ptr<ProcessGroup> group)
      : config_(std::move(config)),
        options_(*options),
        console_(*console),
        outcome_(*outcome),
        group_(std::move(group)),
        metrics_(options->metrics,
                 absl::StrCat(config_.out_dir, "/prometheus.yml")) {}

  std::optional<size_t> Spawn(std::string name, std::string path,
                              std::vector<std::string> argv, ChildRole role);
  void ReportFailure(size_t child, const std::string& why);

  const SupervisorConfig config_;
  const LaunchOptions& options_;
  Console& console_;
  LaunchOutcome& outcome_;
  std::unique_ptr<ProcessGroup> group_;
  std::vector<ChildRole> roles_;  // by child index
  // --metrics_listen: each server and worker gets a port of its own.
  LaunchMetrics metrics_;
};

}  // namespace tern

#endif  // TERN_TERN_CHILD_SUPERVISOR_H_
