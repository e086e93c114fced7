// AddLaunchFlags (tern/launch.h): launch's own flags, every worker flag,
// and the geo flags, on the `launch` subcommand.
#include <algorithm>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/flags/flags.h"
#include "tern/geo_mode.h"
#include "tern/launch.h"
#include "worker/worker_flags.h"

namespace tern {
namespace {

// --name, also read from TERN_<NAME>, in the help's `group`.
template <typename T>
CLI::Option* AddFlag(CLI::App* app, const std::string& name, T* value,
                     const std::string& help,
                     const std::string& group = "Launch") {
  return app->add_option("--" + name, *value, help)
      ->envname("TERN_" + absl::AsciiStrToUpper(name))
      ->capture_default_str()
      ->group(group);
}

// The values given for each worker flag, as they were typed. CLI11 runs an
// option's transforms on its results in place (the worker's enum flags turn
// "terngrad" into the enum's number), and a worker must get the name back.
using RawValues = std::map<const CLI::Option*, std::vector<std::string>>;

// Records each value of `option` before any other validator sees it:
// transform() puts its validator first.
void RecordRawValues(CLI::Option* option,
                     const std::shared_ptr<RawValues>& raw) {
  option->transform(CLI::Validator(
      [option, raw](std::string& value) {
        (*raw)[option].push_back(value);
        return std::string();
      },
      ""));
}

// "--name=value" for each value of each given option, in definition order.
// Repeating a list flag once per value keeps values with commas intact.
std::vector<std::string> GivenFlags(const std::vector<CLI::Option*>& flags,
                                    const RawValues& raw) {
  std::vector<std::string> args;
  for (const CLI::Option* flag : flags) {
    const size_t count = flag->count();
    if (count == 0) continue;
    const auto recorded = raw.find(flag);
    // CLI11 may validate an option's results more than once: the last
    // `count` recorded are the current ones.
    const std::vector<std::string> values =
        recorded != raw.end() && recorded->second.size() >= count
            ? std::vector<std::string>(recorded->second.end() - count,
                                       recorded->second.end())
            : flag->reduced_results();
    for (const std::string& value : values) {
      args.push_back(absl::StrCat("--", flag->get_single_name(), "=", value));
    }
  }
  return args;
}

void AddClusterFlags(CLI::App* app, LaunchOptions* options) {
  AddFlag(app, "shards", &options->shards, "parameter-server shards to start")
      ->check(CLI::Range(1u, 256u));
  AddFlag(app, "workers", &options->workers, "workers to start")
      ->check(CLI::Range(1u, 1024u));
  AddFlag(app, "out_dir", &options->out_dir,
          "directory for logs, metrics and summary.json (default: "
          "runs/<UTC time>)");
  AddFlag(app, "start_timeout_s", &options->start_timeout_s,
          "seconds the shards may take to start serving")
      ->check(CLI::PositiveNumber);
  AddFlag(app, "stop_timeout_s", &options->stop_timeout_s,
          "seconds between SIGTERM and SIGKILL when stopping children")
      ->check(CLI::NonNegativeNumber);
  AddFlag(app, "progress_every_s", &options->progress_every_s,
          "seconds between progress lines when stderr is not a terminal (0: "
          "none)")
      ->check(CLI::NonNegativeNumber);
  AddFlag(app, "target_accuracy", &options->target_accuracy,
          "report when worker 0 first evaluates at or above this test "
          "accuracy (a fraction; 0: not reported)")
      ->check(CLI::Range(0.0, 1.0));
  app->add_flag("--tls", options->tls,
                "mutual TLS on every link: make the run's CA and a "
                "certificate per process (ps-<i> or global and lps-<d>, "
                "worker-<g>; SAN tern://<run_id>/<role>/<id>) in "
                "OUT/tls and start each child with its own --tls_cert, "
                "--tls_key and the CA as --tls_ca (to use your own PKI "
                "instead, run the processes with TERN_TLS_*)")
      ->envname("TERN_TLS")
      ->group("Launch");
  app->add_flag("--insecure", options->insecure,
                "plaintext beyond loopback: with --emulate_wan the servers "
                "listen on the emulated WAN's addresses, which needs --tls "
                "or this (each server then starts with --insecure)")
      ->envname("TERN_INSECURE")
      ->group("Launch");
}

// The worker's metrics flags: launch has its own of the same names
// (AddMetricsFlags), a base port from which every child gets one.
constexpr const char* kMetricsWorkerFlags[] = {"metrics_listen",
                                               "metrics_linger_s"};

// Launch's --metrics_listen and --metrics_linger_s, registered after the
// worker's flags of the same names are taken out (kMetricsWorkerFlags).
void AddMetricsFlags(CLI::App* app, LaunchOptions* options) {
  AddFlag(app, "metrics_listen", &options->metrics.listen,
          "IP:BASE_PORT: each server and worker serves Prometheus metrics "
          "on IP and a port of its own from BASE_PORT up (servers first), "
          "and OUT/prometheus.yml scrapes them all; empty: none");
  AddFlag(app, "metrics_linger_s", &options->metrics.linger_s,
          "with --metrics_listen: seconds each child keeps serving its "
          "metrics after its work, for a last scrape");
}

// The worker's TLS flags, which launch does not take: it would pass them
// to the workers only, cutting them off from plaintext shards. --tls gives
// every child its own files; without it children inherit TERN_TLS_* from
// launch's environment, all alike.
constexpr const char* kTlsWorkerFlags[] = {"tls_cert", "tls_key", "tls_ca",
                                          "tls_refresh_s"};

// The job's flags are the worker's own definitions (one source of truth);
// those that launch sets per worker, and the TLS flags, are taken out
// again. Returns the worker flags that stay.
std::vector<CLI::Option*> AddJobFlags(CLI::App* app, LaunchOptions* options) {
  const std::vector<CLI::Option*> before = app->get_options();
  worker::AddWorkerFlags(app, &options->job);
  std::vector<CLI::Option*> worker_flags;
  for (CLI::Option* option : app->get_options()) {
    if (std::find(before.begin(), before.end(), option) != before.end()) {
      continue;
    }
    const std::string& name = option->get_single_name();
    if (std::find(std::begin(kLaunchOwnedWorkerFlags),
                  std::end(kLaunchOwnedWorkerFlags),
                  name) != std::end(kLaunchOwnedWorkerFlags) ||
        std::find(std::begin(kTlsWorkerFlags), std::end(kTlsWorkerFlags),
                  name) != std::end(kTlsWorkerFlags) ||
        std::find(std::begin(kMetricsWorkerFlags),
                  std::end(kMetricsWorkerFlags),
                  name) != std::end(kMetricsWorkerFlags)) {
      app->remove_option(option);
    } else {
      worker_flags.push_back(option);
    }
  }
  return worker_flags;
}

// Takes --name away from the worker flags (and the app): the geo flag of
// that name replaces it.
void TakeOver(CLI::App* app, const std::string& name,
              std::vector<CLI::Option*>* worker_flags) {
  if (CLI::Option* taken = app->get_option_no_throw("--" + name)) {
    worker_flags->erase(
        std::remove(worker_flags->begin(), worker_flags->end(), taken),
        worker_flags->end());
    app->remove_option(taken);
  }
}

// The geo flags (tern/geo_plan.h). Registered after the worker's, so that
// a worker flag of the same name (the LPS's --sync_every, say, should the
// worker ever take it) is launch's: the mode decides it for every process.
void AddGeoFlags(CLI::App* app, GeoOptions* geo,
                 std::vector<CLI::Option*>* worker_flags) {
  auto geo_flag = [&](const std::string& name, auto* value,
                      const std::string& help) {
    TakeOver(app, name, worker_flags);
    return AddFlag(app, name, value, help, "Geo");
  };
  geo_flag("geo", &geo->mode,
           "a geo-distributed run of --datacenters x --workers_per_dc "
           "workers: baseline (fp32 shards in the GS's region for all), "
           "terngrad (the same, ternary), gaia or weightgrad (tern global + "
           "one LPS per data center); empty: a plain local cluster")
      ->transform(flags::EnumName<GeoMode>(ParseGeoMode, &GeoModeNames,
                                           "{" + GeoModeNames() + "}"))
      ->default_str(std::string(GeoModeName(geo->mode)));
  geo_flag("datacenters", &geo->datacenters, "--geo: data centers (K)")
      ->check(CLI::Range(1u, 256u));
  geo_flag("workers_per_dc", &geo->workers_per_dc,
           "--geo: workers in each data center (W)")
      ->check(CLI::Range(1u, 1024u));
  geo_flag("sync_every", &geo->sync_every,
           "--geo=gaia|weightgrad: local steps per global round (0: the "
           "LPS's default)");
  geo_flag("weight_codec", &geo->weight_codec,
           "--geo=weightgrad: how the LPS sends weights to its workers: "
           "ternary, int8 or fp32 (empty: the LPS's default; gaia: fp32)")
      ->check(CLI::IsMember({"", "ternary", "int8", "fp32"}));
  geo_flag("g_thresh", &geo->g_thresh,
           "--geo=weightgrad: the LPSs' fixed significance threshold in "
           "[0, 1] (net displacement over path length, server/"
           "WEIGHTGRAD.md); 0: the paper's dynamic threshold")
      ->check(CLI::Range(0.0, 1.0));
  geo_flag("t_global_s", &geo->t_global_s,
           "--geo=gaia|weightgrad: the GS's T_global in seconds (0: its "
           "default)")
      ->check(CLI::NonNegativeNumber);
  geo_flag("max_lag", &geo->max_lag,
           "--geo=gaia|weightgrad: the GS's --max_lag (-1: its default)")
      ->check(CLI::Range(-1, 1000));
  TakeOver(app, "emulate_wan", worker_flags);
  app->add_flag("--emulate_wan", geo->emulate_wan,
                "--geo: run each region in a network namespace of "
                "deploy/wan/tern-wan, joined by shaped WAN links (root "
                "only); tern-wan down always runs at the end")
      ->envname("TERN_EMULATE_WAN")
      ->group("Geo");
  geo_flag("wan_mbit", &geo->wan_mbit,
           "--emulate_wan: rate of each WAN link and direction, mbit/s, in "
           "[1, 10000] (0: tern-wan's default, 100 = LAN / 10)")
      ->check(CLI::Range(0.0, 10000.0));
  geo_flag("wan_script", &geo->wan_script,
           "--emulate_wan: the tern-wan script (default: found in tern's "
           "runfiles, beside bazel-out, or ./deploy/wan/tern-wan)");
  geo_flag("wan_prefix", &geo->wan_prefix,
           "--emulate_wan: tern-wan's namespace prefix (runs at the same "
           "time need different ones)");
}

}  // namespace

void AddLaunchFlags(CLI::App* app, LaunchOptions* options) {
  AddClusterFlags(app, options);
  std::vector<CLI::Option*> worker_flags = AddJobFlags(app, options);
  AddMetricsFlags(app, options);
  AddGeoFlags(app, &options->geo, &worker_flags);
  auto raw = std::make_shared<RawValues>();
  for (CLI::Option* option : worker_flags) RecordRawValues(option, raw);
  app->callback([app, options, worker_flags, raw] {
    options->worker_args = GivenFlags(worker_flags, *raw);
    options->given_flags.clear();
    for (const CLI::Option* option : app->get_options()) {
      if (option->count() == 0 ||
          std::find(worker_flags.begin(), worker_flags.end(), option) !=
              worker_flags.end()) {
        continue;
      }
      options->given_flags.push_back(option->get_single_name());
    }
  });
}

}  // namespace tern
