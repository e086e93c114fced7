// The geo flags' checks (ValidateGeoOptions): what tern launch refuses
// before it plans any process.
#include "tern/geo_plan.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tern {
namespace {

// The most workers a plain launch starts (--workers' range).
constexpr uint32_t kMaxWorkers = 1024;

// The flags that only a geo run has, and those that only an emulated WAN
// has.
constexpr const char* kGeoOnlyFlags[] = {
    "datacenters", "workers_per_dc", "sync_every", "weight_codec",
    "g_thresh",    "t_global_s",     "max_lag",    "emulate_wan"};
constexpr const char* kWanOnlyFlags[] = {"wan_mbit", "wan_script",
                                         "wan_prefix"};
// The flags that only a run with a global server has.
constexpr const char* kLpsOnlyFlags[] = {"sync_every", "weight_codec",
                                         "g_thresh", "t_global_s", "max_lag"};

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

// The LPS's own flags in a mode with LPSs: the round length, the weights it
// sends, weightgrad's threshold.
absl::Status ValidateLpsValues(const LaunchOptions& options, GeoMode mode) {
  const GeoOptions& geo = options.geo;
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
  if (!(geo.g_thresh >= 0 && geo.g_thresh <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--g_thresh=", geo.g_thresh, " is not in [0, 1]"));
  }
  if (mode == GeoMode::kGaia && Given(options, "g_thresh")) {
    return absl::InvalidArgumentError(
        "--g_thresh does not apply with --geo=gaia: gaia's LPS sends the "
        "elements that moved by a share of their value, it has no chunk "
        "threshold (--geo=weightgrad has)");
  }
  return absl::OkStatus();
}

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
  if (absl::Status status = ValidateLpsValues(options, mode); !status.ok()) {
    return status;
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
  const GeoOptions& geo = options.geo;
  const GeoMode mode = geo.mode;
  if (!IsKnownGeoMode(mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--geo: ", static_cast<int>(mode), " is not one of ",
                     GeoModeNames()));
  }
  if (mode == GeoMode::kNone) {
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
  if (mode == GeoMode::kNone) return absl::OkStatus();

  const std::string with = absl::StrCat("--geo=", GeoModeName(mode));
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
  if (absl::Status status = ValidateLpsFlags(options, mode, with);
      !status.ok()) {
    return status;
  }
  if (geo.emulate_wan) return ValidateWanFlags(options, is_root);
  return absl::OkStatus();
}

}  // namespace tern
