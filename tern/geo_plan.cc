#include "tern/geo_plan.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace tern {
namespace {

// tern-wan addresses a DC's link as 10.77.<d>.0/30 (deploy/wan/tern-wan).
constexpr uint32_t kMaxWanDatacenters = 256;
// The most workers a plain launch starts (--workers' range).
constexpr uint32_t kMaxWorkers = 1024;

// The flags that only a geo run has, and those that only an emulated WAN
// has.
constexpr const char* kGeoOnlyFlags[] = {
    "datacenters", "workers_per_dc", "sync_every", "weight_codec",
    "t_global_s",  "max_lag",        "emulate_wan"};
constexpr const char* kWanOnlyFlags[] = {"wan_mbit", "wan_script",
                                         "wan_prefix"};
// The flags that only a run with a global server has.
constexpr const char* kLpsOnlyFlags[] = {"sync_every", "weight_codec",
                                         "t_global_s", "max_lag"};

bool Given(const LaunchOptions& options, absl::string_view flag) {
  return std::find(options.given_flags.begin(), options.given_flags.end(),
                   flag) != options.given_flags.end();
}

// Whether a worker flag was given to launch (it is passed to the workers).
bool WorkerFlagGiven(const LaunchOptions& options, absl::string_view flag) {
  const std::string prefix = absl::StrCat("--", flag, "=");
  return std::any_of(
      options.worker_args.begin(), options.worker_args.end(),
      [&](const std::string& arg) { return absl::StartsWith(arg, prefix); });
}

absl::string_view ModeName(GeoMode mode) {
  switch (mode) {
    case GeoMode::kBaseline:
      return "baseline";
    case GeoMode::kTerngrad:
      return "terngrad";
    case GeoMode::kGaia:
      return "gaia";
    case GeoMode::kWeightgrad:
      return "weightgrad";
    case GeoMode::kNone:
      break;
  }
  return "";
}

// The --codec that baseline and terngrad run the shards' protocol with.
absl::string_view CodecOf(GeoMode mode) {
  return mode == GeoMode::kBaseline ? "fp32" : "terngrad";
}

bool IsExecutableFile(const std::string& path) {
  std::error_code error;
  return std::filesystem::is_regular_file(path, error) &&
         ::access(path.c_str(), X_OK) == 0;
}

std::string Absolute(const std::string& path) {
  std::error_code error;
  std::filesystem::path absolute = std::filesystem::absolute(path, error);
  if (error) return path;
  return absolute.lexically_normal().string();
}

}  // namespace

absl::StatusOr<GeoMode> ParseGeoMode(absl::string_view text) {
  if (text.empty()) return GeoMode::kNone;
  for (GeoMode mode : {GeoMode::kBaseline, GeoMode::kTerngrad, GeoMode::kGaia,
                       GeoMode::kWeightgrad}) {
    if (text == ModeName(mode)) return mode;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--geo: '", text,
                   "' is not one of baseline, terngrad, gaia, weightgrad"));
}

bool UsesLps(GeoMode mode) {
  return mode == GeoMode::kGaia || mode == GeoMode::kWeightgrad;
}

namespace {

// The flags of the modes with LPSs (gaia, weightgrad), or their absence in
// the others.
absl::Status ValidateLpsFlags(const LaunchOptions& options, GeoMode mode,
                              const std::string& with) {
  const GeoOptions& geo = options.geo;
  if (!UsesLps(mode)) {
    for (const char* flag : kLpsOnlyFlags) {
      if (Given(options, flag)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", flag, " does not apply with ", with,
                         ": it is for --geo=gaia|weightgrad"));
      }
    }
    return absl::OkStatus();
  }
  if (options.shards != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--shards=", options.shards, " does not apply with ", with,
        ": each data center has one LPS (--shards is for baseline and "
        "terngrad)"));
  }
  if (Given(options, "sync_every") && geo.sync_every == 0) {
    return absl::InvalidArgumentError("--sync_every must be at least 1");
  }
  if (!geo.weight_codec.empty() && geo.weight_codec != "ternary" &&
      geo.weight_codec != "int8" && geo.weight_codec != "fp32") {
    return absl::InvalidArgumentError(
        absl::StrCat("--weight_codec: '", geo.weight_codec,
                     "' is not one of ternary, int8, fp32"));
  }
  if (mode == GeoMode::kGaia && !geo.weight_codec.empty() &&
      geo.weight_codec != "fp32") {
    return absl::InvalidArgumentError(
        absl::StrCat("--weight_codec=", geo.weight_codec,
                     " does not apply with --geo=gaia: gaia's LPS sends "
                     "fp32 weights"));
  }
  if (Given(options, "t_global_s") && !(geo.t_global_s > 0)) {
    return absl::InvalidArgumentError("--t_global_s must be > 0");
  }
  if (Given(options, "max_lag") && geo.max_lag < 0) {
    return absl::InvalidArgumentError("--max_lag must be at least 0");
  }
  return absl::OkStatus();
}

// --emulate_wan's own checks: root, the link rate, the namespace prefix.
absl::Status ValidateWanFlags(const LaunchOptions& options, bool is_root) {
  const GeoOptions& geo = options.geo;
  if (!is_root) {
    return absl::InvalidArgumentError(
        "--emulate_wan needs root (network namespaces and tc): run tern "
        "launch as root, or leave --emulate_wan out");
  }
  if (Given(options, "wan_mbit") &&
      !(geo.wan_mbit >= 1 && geo.wan_mbit <= 10000)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--wan_mbit=", geo.wan_mbit, " is not in [1, 10000]"));
  }
  // tern-wan names the namespaces <prefix>gs and <prefix>dc<d>.
  const bool prefix_ok =
      !geo.wan_prefix.empty() && geo.wan_prefix.size() <= 16 &&
      std::all_of(geo.wan_prefix.begin(), geo.wan_prefix.end(), [](char c) {
        return absl::ascii_isalnum(c) || c == '-' || c == '_';
      });
  if (!prefix_ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("--wan_prefix: '", geo.wan_prefix,
                     "' must be 1 to 16 letters, digits, '-' or '_'"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateGeoOptions(const LaunchOptions& options, bool is_root) {
  absl::StatusOr<GeoMode> mode = ParseGeoMode(options.geo.mode);
  if (!mode.ok()) return mode.status();
  const GeoOptions& geo = options.geo;
  if (*mode == GeoMode::kNone) {
    for (const char* flag : kGeoOnlyFlags) {
      if (Given(options, flag)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--", flag, " needs --geo=baseline|terngrad|gaia|weightgrad"));
      }
    }
  }
  if (!geo.emulate_wan) {
    for (const char* flag : kWanOnlyFlags) {
      if (Given(options, flag)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", flag, " needs --emulate_wan"));
      }
    }
  }
  if (*mode == GeoMode::kNone) return absl::OkStatus();

  const std::string with = absl::StrCat("--geo=", ModeName(*mode));
  if (Given(options, "workers")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--workers does not apply with ", with,
                     ": the job has --datacenters x --workers_per_dc workers"));
  }
  if (WorkerFlagGiven(options, "codec")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--codec does not apply with ", with,
        ": the mode sets it (baseline fp32, terngrad terngrad; gaia and "
        "weightgrad use their own exchange)"));
  }
  if (geo.datacenters == 0 || geo.datacenters > kMaxWanDatacenters) {
    return absl::InvalidArgumentError(
        absl::StrCat("--datacenters=", geo.datacenters, " is not in [1, ",
                     kMaxWanDatacenters, "]"));
  }
  if (geo.workers_per_dc == 0 ||
      uint64_t{geo.datacenters} * geo.workers_per_dc > kMaxWorkers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--workers_per_dc=", geo.workers_per_dc,
        " with --datacenters=", geo.datacenters,
        ": need 1 <= datacenters x workers_per_dc <= ", kMaxWorkers));
  }
  if (absl::Status status = ValidateLpsFlags(options, *mode, with);
      !status.ok()) {
    return status;
  }
  if (geo.emulate_wan) return ValidateWanFlags(options, is_root);
  return absl::OkStatus();
}

LaunchOptions ResolveLaunchOptions(const LaunchOptions& options) {
  LaunchOptions resolved = options;
  const absl::StatusOr<GeoMode> mode = ParseGeoMode(options.geo.mode);
  if (!mode.ok() || *mode == GeoMode::kNone) return resolved;
  resolved.workers = options.geo.datacenters * options.geo.workers_per_dc;
  if (!UsesLps(*mode)) {
    resolved.worker_args.push_back(absl::StrCat("--codec=", CodecOf(*mode)));
  }
  return resolved;
}

WorkerPlacement PlaceWorker(const LaunchOptions& resolved, uint32_t worker) {
  WorkerPlacement placement;
  const absl::StatusOr<GeoMode> mode = ParseGeoMode(resolved.geo.mode);
  if (!mode.ok() || *mode == GeoMode::kNone) {
    placement.worker_id = worker;
    placement.num_workers = resolved.workers;
    return placement;
  }
  const uint32_t per_dc = resolved.geo.workers_per_dc;
  placement.datacenter = worker / per_dc;
  if (UsesLps(*mode)) {
    placement.worker_id = worker % per_dc;
    placement.num_workers = per_dc;
  } else {
    placement.worker_id = worker;
    placement.num_workers = resolved.workers;
  }
  return placement;
}

std::string DcRegion(uint32_t datacenter) {
  return absl::StrCat("dc", datacenter);
}

std::string ListenAddress(bool emulate_wan, absl::string_view region) {
  return emulate_wan && region == kGsRegion ? "0.0.0.0:0" : "127.0.0.1:0";
}

absl::StatusOr<std::string> DialAddress(bool emulate_wan,
                                        absl::string_view listener,
                                        absl::string_view dialer,
                                        uint32_t port) {
  if (!emulate_wan || listener == dialer) {
    return absl::StrCat("127.0.0.1:", port);
  }
  uint32_t datacenter = 0;
  if (listener == kGsRegion && absl::StartsWith(dialer, "dc") &&
      absl::SimpleAtoi(dialer.substr(2), &datacenter) &&
      datacenter < kMaxWanDatacenters) {
    return absl::StrCat("10.77.", datacenter, ".1:", port);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("no route from region ", dialer, " to region ", listener,
                   " (a DC reaches the GS's region, or its own)"));
}

std::string ReportFileOf(const std::string& out_dir, absl::string_view name) {
  return absl::StrCat(out_dir, "/", absl::StrReplaceAll(name, {{"/", "-"}}),
                      ".report.json");
}

std::vector<std::string> ShardArgs(const LaunchOptions& options, uint32_t shard,
                                   const std::string& port_file) {
  return {"ps",
          absl::StrCat("--listen=",
                       ListenAddress(options.geo.emulate_wan, kGsRegion)),
          absl::StrCat("--port_file=", port_file),
          absl::StrCat("--shard_index=", shard),
          absl::StrCat("--num_shards=", options.shards),
          absl::StrCat("--num_workers=", options.workers),
          absl::StrCat("--log_level=", options.job.log_level)};
}

std::vector<std::string> WorkerArgs(const LaunchOptions& options,
                                    uint32_t worker,
                                    const std::vector<std::string>& shards,
                                    const std::string& metrics_out) {
  std::vector<std::string> args = {"worker"};
  const std::vector<std::string> flags = WorkerFlagsOf(options, worker);
  args.insert(args.end(), flags.begin(), flags.end());
  args.push_back(absl::StrCat("--ps=", absl::StrJoin(shards, ",")));
  args.push_back(absl::StrCat("--num_workers=", options.workers));
  args.push_back(absl::StrCat("--worker_id=", worker));
  args.push_back(absl::StrCat("--metrics_out=", metrics_out));
  return args;
}

std::vector<std::string> GlobalServerArgs(const LaunchOptions& resolved,
                                          const std::string& port_file,
                                          const std::string& report_file) {
  const GeoOptions& geo = resolved.geo;
  std::vector<std::string> args = {
      "global",
      absl::StrCat("--listen=", ListenAddress(geo.emulate_wan, kGsRegion)),
      absl::StrCat("--port_file=", port_file),
      absl::StrCat("--report_file=", report_file),
      absl::StrCat("--num_datacenters=", geo.datacenters),
      absl::StrCat("--seed=", resolved.job.seed)};
  if (geo.t_global_s > 0) {
    args.push_back(absl::StrCat("--t_global_s=", geo.t_global_s));
  }
  if (geo.max_lag >= 0) {
    args.push_back(absl::StrCat("--max_lag=", geo.max_lag));
  }
  args.push_back(absl::StrCat("--log_level=", resolved.job.log_level));
  return args;
}

std::vector<std::string> LpsArgs(const LaunchOptions& resolved,
                                 uint32_t datacenter,
                                 const std::string& gs_address,
                                 const std::string& port_file,
                                 const std::string& report_file) {
  const GeoOptions& geo = resolved.geo;
  std::vector<std::string> args = {
      "ps",
      absl::StrCat("--mode=", geo.mode),
      absl::StrCat("--listen=",
                   ListenAddress(geo.emulate_wan, DcRegion(datacenter))),
      absl::StrCat("--port_file=", port_file),
      absl::StrCat("--report_file=", report_file),
      "--shard_index=0",
      "--num_shards=1",
      absl::StrCat("--num_workers=", geo.workers_per_dc),
      absl::StrCat("--global=", gs_address),
      absl::StrCat("--datacenter=", datacenter),
      absl::StrCat("--num_datacenters=", geo.datacenters)};
  if (geo.sync_every > 0) {
    args.push_back(absl::StrCat("--sync_every=", geo.sync_every));
  }
  // gaia's LPS sends fp32 weights (DESIGN section 4), whatever its default.
  const std::string weight_codec =
      geo.mode == "gaia" ? std::string("fp32") : geo.weight_codec;
  if (!weight_codec.empty()) {
    args.push_back(absl::StrCat("--weight_codec=", weight_codec));
  }
  args.push_back(absl::StrCat("--log_level=", resolved.job.log_level));
  return args;
}

std::vector<std::string> WorkerFlagsOf(const LaunchOptions& options,
                                       uint32_t worker) {
  const bool geo = !options.geo.mode.empty() && options.geo.workers_per_dc > 0;
  const bool evaluates =
      geo ? worker % options.geo.workers_per_dc == 0 : worker == 0;
  std::vector<std::string> flags;
  for (const std::string& flag : options.worker_args) {
    if (!evaluates && absl::StartsWith(flag, "--eval_every=")) continue;
    flags.push_back(flag);
  }
  if (!evaluates) flags.push_back("--eval_every=0");
  return flags;
}

std::vector<std::string> LpsWorkerArgs(const LaunchOptions& resolved,
                                       uint32_t worker,
                                       const std::string& lps_address,
                                       const std::string& metrics_out) {
  const WorkerPlacement placement = PlaceWorker(resolved, worker);
  std::vector<std::string> args = {"worker"};
  const std::vector<std::string> flags = WorkerFlagsOf(resolved, worker);
  args.insert(args.end(), flags.begin(), flags.end());
  args.push_back(absl::StrCat("--mode=", resolved.geo.mode));
  args.push_back(absl::StrCat("--ps=", lps_address));
  args.push_back(absl::StrCat("--num_workers=", placement.num_workers));
  args.push_back(absl::StrCat("--worker_id=", placement.worker_id));
  // Every worker of the job reads its own slice of the data, whichever
  // LPS numbers it (the same examples as in baseline and terngrad).
  args.push_back(absl::StrCat("--data_slice=", worker));
  args.push_back(absl::StrCat("--num_data_slices=", resolved.workers));
  args.push_back(absl::StrCat("--metrics_out=", metrics_out));
  return args;
}

std::vector<std::string> WanUpArgv(const std::string& script,
                                   const LaunchOptions& options) {
  std::vector<std::string> argv = {script, "up", "--datacenters",
                                   absl::StrCat(options.geo.datacenters)};
  if (options.geo.wan_mbit > 0) {
    argv.push_back("--wan_mbit");
    argv.push_back(absl::StrCat(options.geo.wan_mbit));
  }
  argv.push_back("--prefix");
  argv.push_back(options.geo.wan_prefix);
  return argv;
}

std::vector<std::string> WanDownArgv(const std::string& script,
                                     const LaunchOptions& options) {
  return {script, "down", "--prefix", options.geo.wan_prefix};
}

std::vector<std::string> WanExecArgv(const std::string& script,
                                     const LaunchOptions& options,
                                     absl::string_view region,
                                     const std::string& program,
                                     const std::vector<std::string>& args) {
  std::vector<std::string> argv = {
      script, "exec", std::string(region), "--prefix", options.geo.wan_prefix,
      "--",   program};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

absl::StatusOr<std::string> FindWanScript(const std::string& flag,
                                          const std::string& self_exe,
                                          const std::string& cwd) {
  if (!flag.empty()) {
    if (IsExecutableFile(flag)) return Absolute(flag);
    return absl::InvalidArgumentError(
        absl::StrCat("--wan_script: '", flag, "' is not an executable file"));
  }
  const std::filesystem::path self(self_exe);
  const std::vector<std::string> candidates = {
      absl::StrCat(self_exe, ".runfiles/tern/deploy/wan/tern-wan"),
      (self.parent_path() / "../../../../deploy/wan/tern-wan")
          .lexically_normal()
          .string(),
      (std::filesystem::path(cwd) / "deploy/wan/tern-wan").string()};
  for (const std::string& candidate : candidates) {
    if (IsExecutableFile(candidate)) return Absolute(candidate);
  }
  return absl::NotFoundError(absl::StrCat(
      "deploy/wan/tern-wan not found (looked in ",
      absl::StrJoin(candidates, ", "),
      "); pass --wan_script PATH or run from the repository root"));
}

}  // namespace tern
