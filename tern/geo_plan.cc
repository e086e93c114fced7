// The launch's processes: placement, regions and addresses, and the command
// lines of shards, workers, the global server and the LPSs. The geo options'
// checks are in geo_plan_check.cc, tern-wan's command lines in
// geo_plan_wan.cc.
#include "tern/geo_plan.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace tern {
namespace {

// The --codec that baseline and terngrad run the shards' protocol with.
absl::string_view CodecOf(GeoMode mode) {
  return mode == GeoMode::kBaseline ? "fp32" : "terngrad";
}

}  // namespace

LaunchOptions ResolveLaunchOptions(const LaunchOptions& options) {
  LaunchOptions resolved = options;
  const GeoMode mode = options.geo.mode;
  if (mode == GeoMode::kNone) return resolved;
  resolved.workers = options.geo.datacenters * options.geo.workers_per_dc;
  if (!UsesLps(mode)) {
    resolved.worker_args.push_back(absl::StrCat("--codec=", CodecOf(mode)));
  }
  return resolved;
}

WorkerPlacement PlaceWorker(const LaunchOptions& resolved, uint32_t worker) {
  WorkerPlacement placement;
  const GeoMode mode = resolved.geo.mode;
  if (mode == GeoMode::kNone) {
    placement.worker_id = worker;
    placement.num_workers = resolved.workers;
    return placement;
  }
  const uint32_t per_dc = resolved.geo.workers_per_dc;
  placement.datacenter = worker / per_dc;
  if (UsesLps(mode)) {
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

std::vector<std::string> DialHosts(bool emulate_wan, absl::string_view region,
                                   uint32_t datacenters) {
  std::vector<std::string> hosts = {"127.0.0.1"};
  if (!emulate_wan || region != kGsRegion) return hosts;
  for (uint32_t d = 0; d < datacenters && d < kMaxWanDatacenters; ++d) {
    absl::StatusOr<std::string> address =
        DialAddress(true, kGsRegion, DcRegion(d), 1);
    if (address.ok()) hosts.push_back(address->substr(0, address->rfind(':')));
  }
  return hosts;
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
      absl::StrCat("--mode=", GeoModeName(geo.mode)),
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
      geo.mode == GeoMode::kGaia ? std::string("fp32") : geo.weight_codec;
  if (!weight_codec.empty()) {
    args.push_back(absl::StrCat("--weight_codec=", weight_codec));
  }
  if (geo.g_thresh > 0) {
    args.push_back(absl::StrCat("--g_thresh=", geo.g_thresh));
  }
  args.push_back(absl::StrCat("--log_level=", resolved.job.log_level));
  return args;
}

std::vector<std::string> WorkerFlagsOf(const LaunchOptions& options,
                                       uint32_t worker) {
  const bool geo =
      options.geo.mode != GeoMode::kNone && options.geo.workers_per_dc > 0;
  const bool evaluates =
      geo ? worker % options.geo.workers_per_dc == 0 : worker == 0;
  std::vector<std::string> flags;
  for (const std::string& flag : options.worker_args) {
    if (!evaluates && absl::StartsWith(flag, "--eval_every=")) continue;
    // One file, one writer: worker 0's model (every replica's, or in a geo
    // run the one its LPS answered last).
    if (worker != 0 && absl::StartsWith(flag, "--save_model=")) continue;
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
  args.push_back(absl::StrCat("--mode=", GeoModeName(resolved.geo.mode)));
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

}  // namespace tern
