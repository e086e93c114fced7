// The `tern` binary: every role of a job is a subcommand of one program
// (DESIGN section 1), so a container image, a Kubernetes manifest and
// `tern launch` all run the same file.
//
//   tern ps       one parameter-server shard (server/)
//   tern worker   one training worker (worker/)
//   tern global   the WeightGrad global server of K data centers (global/)
//   tern launch   a whole job on this machine (tern/launch.h)
//   tern health   is a server SERVING? (tern/health.h; for probes)
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
#include "tern/cluster_spec.h"
#include "tern/health.h"
#include "tern/launch.h"
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

int Main(int argc, char** argv) {
  CLI::App app(
      "tern: data-parallel training with ternary gradients (TernGrad) over "
      "sharded parameter servers",
      "tern");
  app.set_version_flag("--version", absl::StrCat("tern ", kVersion));
  app.require_subcommand(1, 1);

  server::PsOptions ps_options;
  std::string ps_spec;
  CLI::App* ps = app.add_subcommand(
      "ps", "Run one parameter-server shard: it sums the workers' ternary "
            "gradients for the chunks it owns");
  server::AddPsFlags(ps, &ps_options);
  AddClusterSpecFlag(ps, &ps_spec);

  worker::WorkerOptions worker_options;
  std::string worker_spec;
  CLI::App* worker = app.add_subcommand(
      "worker", "Train as one worker: compute gradients, exchange them in "
                "2 bits with the shards, keep a local replica");
  worker::AddWorkerFlags(worker, &worker_options);
  AddClusterSpecFlag(worker, &worker_spec);

  global::GsOptions global_options;
  CLI::App* global_server = app.add_subcommand(
      "global", "Run the WeightGrad global server: it averages the "
                "significant updates of the data centers' local parameter "
                "servers, round by round");
  global::AddGsFlags(global_server, &global_options);

  LaunchOptions launch_options;
  CLI::App* launch = app.add_subcommand(
      "launch", "Run a whole job on this machine: --shards shards and "
                "--workers workers as child processes on loopback, or with "
                "--geo a geo-distributed run (baseline, terngrad, gaia, "
                "weightgrad), optionally over an emulated WAN; every "
                "worker flag is accepted and passed on");
  AddLaunchFlags(launch, &launch_options);

  HealthOptions health_options;
  CLI::App* health = app.add_subcommand(
      "health", "Ask a server (tern ps, tern global) whether it is serving "
                "(grpc.health.v1): exit 0 when SERVING, 1 otherwise; for "
                "container healthchecks and Kubernetes probes");
  AddHealthFlags(health, &health_options);

  CLI::App* bench = app.add_subcommand(
      "bench", "Measure tern's own speed (ratios to references measured in "
               "the same run, BENCHMARKS.md)");
  bench->require_subcommand(1, 1);
  CLI::App* bench_kernels = bench->add_subcommand(
      "kernels", "Codec throughput per stage, as GB/s of fp32 input and as a "
                 "ratio to references timed in the same run (CPU: memcpy "
                 "and a read-only sum; CUDA: a device-to-device cudaMemcpy "
                 "and a read-only reduction); extra arguments go to the "
                 "benchmark (CPU: Google Benchmark, e.g. "
                 "--benchmark_filter=terngrad; CUDA: --elements, --workers, "
                 "--runs)");
  std::string bench_device = "cpu";
  bench_kernels
      ->add_option("--device", bench_device,
                   "cpu, or cuda in a tern built with --config=cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  bench_kernels->allow_extras();

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

  if (ps->parsed()) {
    absl::Status status = ApplySpecFile(ps_spec, *ps, &ps_options);
    if (status.ok()) status = server::ValidatePsOptions(ps_options);
    if (!status.ok()) return ConfigError("tern ps", status.message());
    process::StopRequest stop;
    const process::SignalWatcher signals(&stop);
    return server::RunParameterServer(
        ps_options,
        MakeRoleLogger("ps", ps_options.shard_index, ps_options.log_level),
        stop);
  }
  if (worker->parsed()) {
    absl::Status status = ApplySpecFile(worker_spec, *worker, &worker_options);
    if (status.ok()) status = worker::ValidateWorkerOptions(worker_options);
    if (!status.ok()) return ConfigError("tern worker", status.message());
    return worker::RunWorker(
        worker_options, MakeRoleLogger("worker", worker_options.worker_id,
                                       worker_options.log_level));
  }
  if (global_server->parsed()) {
    if (absl::Status status = global::ValidateGsOptions(global_options);
        !status.ok()) {
      return ConfigError("tern global", status.message());
    }
    process::StopRequest stop;
    const process::SignalWatcher signals(&stop);
    return global::RunGlobalServer(
        global_options, MakeRoleLogger("global", 0, global_options.log_level),
        stop);
  }
  if (health->parsed()) return RunHealth(health_options);
  if (bench_kernels->parsed()) {
    std::vector<std::string> extras = bench_kernels->remaining();
    std::vector<char*> args = {argv[0]};
    for (std::string& extra : extras) args.push_back(extra.data());
    return kernels::RunKernelBench(bench_device, static_cast<int>(args.size()),
                                   args.data());
  }
  if (absl::Status status =
          ValidateLaunchOptions(launch_options, ::geteuid() == 0);
      !status.ok()) {
    return ConfigError("tern launch", status.message());
  }
  return RunLaunch(launch_options);
}

}  // namespace
}  // namespace tern

int main(int argc, char** argv) { return tern::Main(argc, argv); }
