// The `tern` binary: every role of a job is a subcommand of one program
// (DESIGN section 1), so a container image, a Kubernetes manifest and
// `tern launch` all run the same file.
//
//   tern ps       one parameter-server shard (server/)
//   tern worker   one training worker (worker/)
//   tern global   the WeightGrad global server of K data centers (global/)
//   tern launch   a whole job on this machine (tern/launch.h)
//   tern health   is a server SERVING? (tern/health.h; for probes)
//   tern certs    a run's CA and certificates for mTLS (tern/certs_command.h)
//   tern plot     PNG charts of runs (tern/plot_command.h)
//
// Flags are also read from TERN_<FLAG> environment variables; a flag on the
// command line wins over the environment, which wins over --cluster_spec,
// which wins over the default. Exit codes (DESIGN section 7): 0 success,
// 1 configuration error, >= 128 transient failure.
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/net/grpc_lifetime.h"
#include "common/process/allocator.h"
#include "common/process/exit_codes.h"
#include "common/process/signals.h"
#include "common/process/stop.h"
#include "global/gs_flags.h"
#include "global/gs_main.h"
#include "global/gs_options.h"
#include "kernels/kernel_bench.h"
#include "server/ps_flags.h"
#include "server/ps_main.h"
#include "server/ps_options.h"
#include "tern/certs_command.h"
#include "tern/cluster_spec.h"
#include "tern/health.h"
#include "tern/launch.h"
#include "tern/plot_command.h"
#include "worker/worker_flags.h"
#include "worker/worker_main.h"
#include "worker/worker_options.h"

namespace tern {
namespace {

constexpr char kVersion[] = "0.1.0";

// A configuration error: one line naming the command, then exit code 1.
int ConfigError(absl::string_view command, absl::string_view message) {
  std::fprintf(stderr, "%s: error: %.*s\n", std::string(command).c_str(),
               static_cast<int>(message.size()), message.data());
  return process::kExitPermanent;
}

// The flags of `app` that were given on the command line or through the
// environment: what a cluster spec must not overwrite.
ExplicitFlags GivenFlags(const CLI::App& app) {
  ExplicitFlags given;
  for (const CLI::Option* option : app.get_options()) {
    if (option->count() > 0) given.insert(option->get_single_name());
  }
  return given;
}

CLI::Option* AddClusterSpecFlag(CLI::App* app, std::string* path) {
  return app
      ->add_option("--cluster_spec", *path,
                   "JSON file {\"shards\": [\"host:port\", ...], "
                   "\"num_workers\": N}; explicit flags override it")
      ->envname("TERN_CLUSTER_SPEC")
      ->group("Cluster");
}

// Loads the spec at `path` (if any) into `options`.
template <typename Options>
absl::Status ApplySpecFile(const std::string& path, const CLI::App& command,
                           Options* options) {
  if (path.empty()) return absl::OkStatus();
  absl::StatusOr<v1::ClusterSpec> spec = LoadClusterSpec(path);
  if (!spec.ok()) return spec.status();
  return ApplyClusterSpec(*spec, path, GivenFlags(command), options);
}

Logger MakeRoleLogger(absl::string_view role, uint32_t id,
                      absl::string_view level) {
  Logger logger = MakeLogger(role, absl::StrCat(id));
  // The flag's own check has accepted the name already.
  if (absl::StatusOr<spdlog::level::level_enum> parsed = ParseLogLevel(level);
      parsed.ok()) {
    logger->set_level(*parsed);
  }
  return logger;
}

// Every subcommand's options, filled in by parsing, and the subcommands.
struct Commands {
  server::PsOptions ps_options;
  std::string ps_spec;
  CLI::App* ps = nullptr;
  worker::WorkerOptions worker_options;
  std::string worker_spec;
  CLI::App* worker = nullptr;
  global::GsOptions global_options;
  CLI::App* global_server = nullptr;
  LaunchOptions launch_options;
  CLI::App* launch = nullptr;
  HealthOptions health_options;
  CLI::App* health = nullptr;
  CertsOptions certs_options;
  CLI::App* certs = nullptr;
  PlotOptions plot_options;
  CLI::App* plot = nullptr;
  std::string bench_device = "cpu";
  CLI::App* bench_kernels = nullptr;
};

// `tern bench` and its one subcommand, `tern bench kernels`.
void AddBenchCommands(CLI::App* app, Commands* commands) {
  CLI::App* bench = app->add_subcommand(
      "bench", "Measure tern's own speed (ratios to references measured in "
               "the same run, BENCHMARKS.md)");
  bench->require_subcommand(1, 1);
  commands->bench_kernels = bench->add_subcommand(
      "kernels", "Codec throughput per stage, as GB/s of fp32 input and as a "
                 "ratio to references timed in the same run (CPU: memcpy "
                 "and a read-only sum; CUDA: a device-to-device cudaMemcpy "
                 "and a read-only reduction); extra arguments go to the "
                 "benchmark (CPU: Google Benchmark, e.g. "
                 "--benchmark_filter=terngrad; CUDA: --elements, --workers, "
                 "--runs)");
  commands->bench_kernels
      ->add_option("--device", commands->bench_device,
                   "cpu, or cuda in a tern built with --config=cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  commands->bench_kernels->allow_extras();
}

// Adds every subcommand to `app`, with its flags bound to `commands`.
void AddCommands(CLI::App* app, Commands* commands) {
  commands->ps = app->add_subcommand(
      "ps", "Run one parameter-server shard: it sums the workers' ternary "
            "gradients for the chunks it owns");
  server::AddPsFlags(commands->ps, &commands->ps_options);
  AddClusterSpecFlag(commands->ps, &commands->ps_spec);

  commands->worker = app->add_subcommand(
      "worker", "Train as one worker: compute gradients, exchange them in "
                "2 bits with the shards, keep a local replica");
  worker::AddWorkerFlags(commands->worker, &commands->worker_options);
  AddClusterSpecFlag(commands->worker, &commands->worker_spec);

  commands->global_server = app->add_subcommand(
      "global", "Run the WeightGrad global server: it averages the "
                "significant updates of the data centers' local parameter "
                "servers, round by round");
  global::AddGsFlags(commands->global_server, &commands->global_options);

  commands->launch = app->add_subcommand(
      "launch", "Run a whole job on this machine: --shards shards and "
                "--workers workers as child processes on loopback, or with "
                "--geo a geo-distributed run (baseline, terngrad, gaia, "
                "weightgrad), optionally over an emulated WAN; every "
                "worker flag is accepted and passed on");
  AddLaunchFlags(commands->launch, &commands->launch_options);

  commands->health = app->add_subcommand(
      "health", "Ask a server (tern ps, tern global) whether it is serving "
                "(grpc.health.v1): exit 0 when SERVING, 1 otherwise; for "
                "container healthchecks and Kubernetes probes");
  AddHealthFlags(commands->health, &commands->health_options);

  commands->certs = app->add_subcommand(
      "certs", "Make a run's CA and a certificate and key per process "
               "(ps-<i>, worker-<i>, lps-<d>, global) for mutual TLS, each "
               "naming its identity tern://<run_id>/<role>/<id>, into a "
               "folder for compose and Kubernetes to mount");
  AddCertsFlags(commands->certs, &commands->certs_options);

  commands->plot = app->add_subcommand(
      "plot", "Draw PNG charts of one or several runs of tern launch from "
              "their records and summary.json: loss and test accuracy "
              "against step and wall time, bytes per step and direction, "
              "the time split per step, and for geo runs WAN bytes and "
              "time to target; one line per run (with Debian's "
              "matplotlib, through /usr/bin/python3)");
  AddPlotFlags(commands->plot, &commands->plot_options);

  AddBenchCommands(app, commands);
}

int RunPsCommand(Commands* commands) {
  server::PsOptions& options = commands->ps_options;
  absl::Status status =
      ApplySpecFile(commands->ps_spec, *commands->ps, &options);
  if (status.ok()) status = server::ValidatePsOptions(options);
  if (!status.ok()) return ConfigError("tern ps", status.message());
  process::StopRequest stop;
  const process::SignalWatcher signals(&stop);
  return server::RunParameterServer(
      options, MakeRoleLogger("ps", options.shard_index, options.log_level),
      stop);
}

int RunWorkerCommand(Commands* commands) {
  worker::WorkerOptions& options = commands->worker_options;
  absl::Status status =
      ApplySpecFile(commands->worker_spec, *commands->worker, &options);
  if (status.ok()) status = worker::ValidateWorkerOptions(options);
  if (!status.ok()) return ConfigError("tern worker", status.message());
  return worker::RunWorker(
      options,
      MakeRoleLogger("worker", options.worker_id, options.log_level));
}

int RunGlobalCommand(const Commands& commands) {
  const global::GsOptions& options = commands.global_options;
  if (absl::Status status = global::ValidateGsOptions(options); !status.ok()) {
    return ConfigError("tern global", status.message());
  }
  process::StopRequest stop;
  const process::SignalWatcher signals(&stop);
  return global::RunGlobalServer(
      options, MakeRoleLogger("global", 0, options.log_level), stop);
}

// `tern bench kernels`: the extra arguments go on to the benchmark.
int RunBenchCommand(const Commands& commands, char* program) {
  std::vector<std::string> extras = commands.bench_kernels->remaining();
  std::vector<char*> args = {program};
  for (std::string& extra : extras) args.push_back(extra.data());
  return kernels::RunKernelBench(commands.bench_device,
                                 static_cast<int>(args.size()), args.data());
}

int RunLaunchCommand(const Commands& commands) {
  if (absl::Status status =
          ValidateLaunchOptions(commands.launch_options, ::geteuid() == 0);
      !status.ok()) {
    return ConfigError("tern launch", status.message());
  }
  return RunLaunch(commands.launch_options);
}

int Main(int argc, char** argv) {
  CLI::App app(
      "tern: data-parallel training with ternary gradients (TernGrad) over "
      "sharded parameter servers",
      "tern");
  app.set_version_flag("--version", absl::StrCat("tern ", kVersion));
  app.require_subcommand(1, 1);
  Commands commands;
  AddCommands(&app, &commands);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
      return app.exit(error);  // --help, --version
    }
    std::string command = "tern";
    if (!app.get_subcommands().empty()) {
      command = absl::StrCat("tern ", app.get_subcommands().front()->get_name());
    }
    return ConfigError(command, absl::StrCat(error.what(), " (see ", command,
                                             " --help)"));
  }

  // The commands that speak gRPC: none of them waits on gRPC's own
  // shutdown to exit (grpc_lifetime.h). Not tern launch, which speaks no
  // gRPC and routes its signals through a signalfd that gRPC's threads,
  // started by grpc_init with the signals unblocked, would steal.
  if (commands.ps->parsed() || commands.worker->parsed() ||
      commands.global_server->parsed() || commands.health->parsed()) {
    net::HoldGrpcUntilExit();
  }
  if (commands.ps->parsed()) return RunPsCommand(&commands);
  if (commands.worker->parsed()) return RunWorkerCommand(&commands);
  if (commands.global_server->parsed()) return RunGlobalCommand(commands);
  if (commands.health->parsed()) return RunHealth(commands.health_options);
  if (commands.certs->parsed()) return RunCerts(commands.certs_options);
  if (commands.plot->parsed()) return RunPlot(commands.plot_options);
  if (commands.bench_kernels->parsed()) {
    return RunBenchCommand(commands, argv[0]);
  }
  return RunLaunchCommand(commands);
}

}  // namespace
}  // namespace tern

int main(int argc, char** argv) {
  // Before any thread starts: every role frees and allocates the same large
  // buffers each step (common/process/allocator.h).
  tern::process::KeepFreedMemory();
  return tern::Main(argc, argv);
}
