#include "tern/launch.h"

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/metrics/metrics_flags.h"
#include "common/process/exit_codes.h"
#include "tern/console.h"
#include "tern/geo_plan.h"
#include "tern/launch_context.h"
#include "tern/launch_metrics.h"
#include "tern/launch_report.h"
#include "tern/launch_tls.h"
#include "tern/metrics_file.h"
#include "tern/progress.h"
#include "tern/server_startup.h"
#include "worker/model_export.h"
#include "worker/worker_flags.h"

namespace tern {
namespace {

// Creates the output directory: the given one (which may exist), or a new
// runs/<time>[-k] that no other launch uses.
absl::StatusOr<std::string> MakeOutDir(const std::string& requested,
                                       absl::Time now) {
  std::error_code error;
  if (!requested.empty()) {
    std::filesystem::create_directories(requested, error);
    if (error) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--out_dir: cannot create ", requested, ": ", error.message()));
    }
    return requested;
  }
  const std::string base = DefaultOutDir(now);
  std::filesystem::create_directories(std::filesystem::path(base).parent_path(),
                                      error);
  for (int attempt = 1; !error && attempt < 1000; ++attempt) {
    const std::string candidate =
        attempt == 1 ? base : absl::StrCat(base, "-", attempt);
    if (std::filesystem::create_directory(candidate, error)) return candidate;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("cannot create an output directory ", base,
                   "[-k]: ", error ? error.message() : "all names taken"));
}

std::string ReadSelfPath() {
  std::error_code error;
  const std::filesystem::path path =
      std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::string("tern") : path.string();
}

// The output directory, under --tls the run's certificates, and under
// --emulate_wan the tern-wan script, into `run`. An error to print when one
// cannot be had.
absl::Status PrepareRun(absl::Time start, const std::string& self,
                        LaunchContext* run) {
  absl::StatusOr<std::string> out_dir =
      MakeOutDir(run->options->out_dir, start);
  if (!out_dir.ok()) return out_dir.status();
  run->out_dir = *out_dir;
  if (run->options->tls) {
    const std::string tls_dir = TlsDirOf(run->out_dir);
    if (absl::Status status = WriteLaunchCerts(*run->options, tls_dir);
        !status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat("--tls: ", status.message()));
    }
    run->tls_dir = tls_dir;
    run->console->Note(absl::StrCat(
        "mutual TLS: the run's CA and certificates are in ", tls_dir));
  }
  if (!run->wan()) return absl::OkStatus();
  std::error_code ignored;
  absl::StatusOr<std::string> script =
      FindWanScript(run->options->geo.wan_script, self,
                    std::filesystem::current_path(ignored).string());
  if (!script.ok()) return script.status();
  run->wan_script = *script;
  return absl::OkStatus();
}

// Starts every worker, once every server serves; their child indices.
std::vector<size_t> StartWorkers(const LaunchContext& run,
                                 const std::vector<std::string>& targets) {
  const LaunchOptions& options = *run.options;
  std::vector<size_t> workers;
  for (uint32_t g = 0; run.outcome->ok() && g < options.workers; ++g) {
    const std::string metrics =
        absl::StrCat(run.out_dir, "/worker-", g, ".jsonl");
    std::vector<std::string> args =
        UsesLps(run.mode)
            ? LpsWorkerArgs(options, g, targets[g], metrics)
            : WorkerArgs(options, g, absl::StrSplit(targets[g], ','), metrics);
    // Worker g is worker-<g> in every mode, whatever --worker_id its LPS
    // gives it.
    for (std::string& arg : TlsArgs(run.tls_dir, certs::Role::kWorker, g)) {
      args.push_back(std::move(arg));
    }
    std::optional<size_t> index = run.children->SpawnTern(
        absl::StrCat("worker/", g), DcRegion(PlaceWorker(options, g).datacenter),
        args, ChildRole::kWorker);
    if (!index.has_value()) break;
    workers.push_back(*index);
  }
  return workers;
}

// Training: follows worker 0's records on the console until every worker
// is done, a child fails, or a signal arrives.
void FollowTraining(const LaunchContext& run,
                    const std::vector<size_t>& workers) {
  MetricsTail progress_tail(absl::StrCat(run.out_dir, "/worker-0.jsonl"));
  ProgressTracker tracker(run.options->job.steps);
  while (run.outcome->ok() && !workers.empty() &&
         run.children->AnyRunning(workers)) {
    run.children->Poll(absl::Milliseconds(200));
    if (run.children->Interrupted()) break;
    for (const MetricsRecord& record : progress_tail.ReadNew()) {
      tracker.Add(record);
    }
    if (!tracker.empty()) run.console->Progress(tracker.Snapshot());
  }
  run.children->CheckExits();
  run.console->EndProgress();
}

// The servers when training is over (the LPSs before the GS, which reports
// its totals as it stops), every child otherwise. Ends caused by the stop
// are not failures.
void StopChildren(const LaunchContext& run, const StartedServers& servers) {
  if (run.outcome->ok()) {
    run.console->Note("workers finished; stopping the servers");
    run.children->Stop(servers.lps);
    run.children->Stop(servers.first_tier);
  } else {
    run.console->Note(
        absl::StrCat("stopping every child (SIGTERM, SIGKILL after ",
                     run.options->stop_timeout_s, " s)"));
    run.children->StopAll();
  }
}

// The job itself, from the emulated WAN to the summary.
int RunJob(const LaunchContext& run, absl::Time launch_start) {
  // Everything after a successful start of the emulated WAN (or a failed
  // or interrupted one, which may have made part of it) ends with down.
  const bool wan_needs_down = run.wan() && BringUpWan(run);
  JobTimes times{launch_start, absl::Now(), absl::Time()};
  StartedServers servers;
  if (run.outcome->ok()) servers = StartServers(run);
  FollowTraining(run, StartWorkers(run, servers.worker_targets));
  times.job_end = absl::Now();
  StopChildren(run, servers);
  if (wan_needs_down) TakeDownWan(run);
  return FinishRun(run, times);
}

// --metrics_listen: a base port for every child (each server, each
// worker); not under --emulate_wan, whose children listen in network
// namespaces that a Prometheus on this machine cannot reach.
absl::Status ValidateLaunchMetricsFlags(const LaunchOptions& options) {
  if (options.metrics.listen.empty()) {
    return metrics::ValidateMetricsOptions(options.metrics);
  }
  if (options.geo.emulate_wan) {
    return absl::InvalidArgumentError(
        "--metrics_listen with --emulate_wan: the children listen in the "
        "regions' network namespaces, out of reach of this machine's "
        "Prometheus (not supported yet)");
  }
  const LaunchOptions resolved = ResolveLaunchOptions(options);
  const uint32_t servers = UsesLps(resolved.geo.mode)
                               ? resolved.geo.datacenters + 1
                               : resolved.shards;
  return ValidateLaunchMetrics(options.metrics, servers + resolved.workers);
}

}  // namespace

absl::Status ValidateLaunchOptions(const LaunchOptions& options, bool is_root) {
  if (absl::Status status = ValidateGeoOptions(options, is_root);
      !status.ok()) {
    return status;
  }
  if (absl::Status status = ValidateLaunchTls(options); !status.ok()) {
    return status;
  }
  if (absl::Status status = ValidateLaunchMetricsFlags(options);
      !status.ok()) {
    return status;
  }
  const LaunchOptions resolved = ResolveLaunchOptions(options);
  const WorkerPlacement placement = PlaceWorker(resolved, 0);
  worker::WorkerOptions as_worker = resolved.job;
  as_worker.ps.assign(
      UsesLps(resolved.geo.mode) ? 1 : resolved.shards,
      "127.0.0.1:1");
  as_worker.num_workers = placement.num_workers;
  as_worker.worker_id = placement.worker_id;
  if (absl::Status status = worker::ValidateWorkerOptions(as_worker);
      !status.ok()) {
    return status;
  }
  // Worker 0 checks it again; a path it cannot write to is found before
  // anything starts.
  if (!resolved.job.save_model.empty()) {
    return worker::CheckModelPath(resolved.job.save_model);
  }
  return absl::OkStatus();
}

std::string DefaultOutDir(absl::Time now) {
  return absl::StrCat(
      "runs/", absl::FormatTime("%Y%m%d-%H%M%SZ", now, absl::UTCTimeZone()));
}

int RunLaunch(const LaunchOptions& requested) {
  const absl::Time start = absl::Now();
  const LaunchOptions options = ResolveLaunchOptions(requested);
  Console console(::isatty(STDERR_FILENO) == 1,
                  absl::Seconds(options.progress_every_s));
  LaunchContext run;
  run.options = &options;
  run.mode = options.geo.mode;
  run.console = &console;
  LaunchOutcome outcome;
  outcome.shards =
      UsesLps(run.mode) ? options.geo.datacenters : options.shards;
  outcome.workers = options.workers;
  outcome.total_steps = options.job.steps;
  run.outcome = &outcome;

  const std::string self = ReadSelfPath();
  if (absl::Status status = PrepareRun(start, self, &run); !status.ok()) {
    console.Note(absl::StrCat("error: ", status.message()));
    return process::kExitPermanent;
  }
  outcome.out_dir = run.out_dir;
  // A closed stderr pipe must not kill the launcher (and so every child).
  ::signal(SIGPIPE, SIG_IGN);
  absl::StatusOr<std::unique_ptr<ChildSupervisor>> children =
      ChildSupervisor::Create(
          {run.out_dir, self, run.wan_script,
           absl::Seconds(options.stop_timeout_s)},
          &options, &console, &outcome);
  if (!children.ok()) {
    console.Note(absl::StrCat("error: ", children.status().message()));
    return process::kExitStartFailure;
  }
  run.children = children->get();
  return RunJob(run, start);
}

}  // namespace tern
