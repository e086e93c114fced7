// The processes of `tern launch` and their command lines, as plain functions
// of the options (no processes here; tern/server_startup.cc and
// tern/launch.cc start them): shards and workers, and with --geo those of a
// geo-distributed run.
//
// K data centers of W workers each, trained one of four ways (DESIGN.md
// section 4):
//   baseline    fp32 synchronous: one set of shards in the GS's region for
//               all K*W workers (the TernGrad protocol with --codec=fp32)
//   terngrad    the same with --codec=terngrad
//   gaia        `tern global` + one LPS per DC (`tern ps --mode=gaia`)
//   weightgrad  `tern global` + one LPS per DC (`tern ps --mode=weightgrad`)
//
// Regions: "gs" holds the global server (and the baseline/terngrad shards),
// "dc<d>" holds data center d's LPS and its workers. With --emulate_wan each
// region is a network namespace of deploy/wan/tern-wan, and a process in
// dc<d> reaches one in gs at 10.77.<d>.1 over that DC's shaped WAN link;
// without it every process runs on this machine's loopback.
//
// Workers are numbered g = d * W + w (w: index inside DC d), so names, logs
// and metrics files (worker-<g>.jsonl) are the same in every mode; every
// process gets the job's --seed.
#ifndef TERN_TERN_GEO_PLAN_H_
#define TERN_TERN_GEO_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tern/geo_mode.h"
#include "tern/launch_options.h"

namespace tern {

// Checks the geo flags and their combinations with the others (e.g.
// --workers with --geo, --codec with --geo, --sync_every with baseline,
// --emulate_wan when `is_root` is false). INVALID_ARGUMENT naming the flag.
// Worker flags are not checked here (ValidateLaunchOptions does).
absl::Status ValidateGeoOptions(const LaunchOptions& options, bool is_root);

// The options as the launch runs them: for a geo run, `workers` becomes
// the total K * W, and for baseline/terngrad the mode's --codec is added to
// the worker flags (the shards' protocol is the plain TernGrad one).
// Expects options that ValidateGeoOptions accepted.
LaunchOptions ResolveLaunchOptions(const LaunchOptions& options);

// Where worker g runs and what it is told.
struct WorkerPlacement {
  uint32_t datacenter = 0;
  // --worker_id and --num_workers: global (g of K*W) when the shards serve
  // every worker; the index inside the data center (w of W) for an LPS,
  // which numbers its own workers from 0.
  uint32_t worker_id = 0;
  uint32_t num_workers = 1;
};
WorkerPlacement PlaceWorker(const LaunchOptions& resolved, uint32_t worker);

// tern-wan addresses data center d's link as 10.77.<d>.0/30
// (deploy/wan/tern-wan), so a geo run has at most this many data centers.
inline constexpr uint32_t kMaxWanDatacenters = 256;

// Region names: "gs" and "dc<d>".
inline constexpr char kGsRegion[] = "gs";
std::string DcRegion(uint32_t datacenter);

// The address a process in `region` listens on: any interface in the GS's
// region under an emulated WAN (the DCs come in over their links), loopback
// otherwise; always port 0 (a free one, reported in a port file).
std::string ListenAddress(bool emulate_wan, absl::string_view region);

// The address at which a process in region `dialer` reaches a listener in
// region `listener` on `port`: 10.77.<d>.1 from dc<d> to gs under an
// emulated WAN (tern-wan's addressing), loopback otherwise.
absl::StatusOr<std::string> DialAddress(bool emulate_wan,
                                        absl::string_view listener,
                                        absl::string_view dialer,
                                        uint32_t port);

// The hosts (no ports) at which the run's processes dial a listener in
// `region`: 127.0.0.1, and under an emulated WAN for the GS's region also
// 10.77.<d>.1 for every data center d < `datacenters` (DialAddress). What a
// server's certificate must name for the TLS host check (`tern launch
// --tls`).
std::vector<std::string> DialHosts(bool emulate_wan, absl::string_view region,
                                   uint32_t datacenters);

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

// OUT/<name with "/" as "-">.report.json: where the global server ("global")
// and the LPSs ("lps/<d>") write their reports when they stop
// (common/records/server_report.h; tern/geo_report.h reads them).
std::string ReportFileOf(const std::string& out_dir, absl::string_view name);

// argv (without the program) of `tern global` for a gaia/weightgrad run.
std::vector<std::string> GlobalServerArgs(const LaunchOptions& resolved,
                                          const std::string& port_file,
                                          const std::string& report_file);

// argv (without the program) of data center `datacenter`'s LPS, which
// reaches the global server at `gs_address`.
std::vector<std::string> LpsArgs(const LaunchOptions& resolved,
                                 uint32_t datacenter,
                                 const std::string& gs_address,
                                 const std::string& port_file,
                                 const std::string& report_file);

// The job's worker flags as worker `worker` gets them (every launch, geo or
// not). The summary reports worker 0's evaluations, so the others evaluate
// once, at the end (--eval_every=0 replaces the job's), instead of taking
// cores from training while worker 0 evaluates. In a geo run the first
// worker of every data center evaluates (worker % workers_per_dc == 0), in
// all four modes: an evaluation stalls its data center, and a data center
// stalled alone falls rounds behind the others (gaia, weightgrad), which
// the global server's bounded staleness then makes everyone wait for.
// --save_model goes to worker 0 alone.
std::vector<std::string> WorkerFlagsOf(const LaunchOptions& options,
                                       uint32_t worker);

// argv (without the program) of worker `worker` of a gaia/weightgrad run,
// whose LPS is at `lps_address`.
std::vector<std::string> LpsWorkerArgs(const LaunchOptions& resolved,
                                       uint32_t worker,
                                       const std::string& lps_address,
                                       const std::string& metrics_out);

// deploy/wan/tern-wan command lines (argv[0] is the script).
std::vector<std::string> WanUpArgv(const std::string& script,
                                   const LaunchOptions& options);
std::vector<std::string> WanDownArgv(const std::string& script,
                                     const LaunchOptions& options);
// Runs `program args...` in `region`'s namespace.
std::vector<std::string> WanExecArgv(const std::string& script,
                                     const LaunchOptions& options,
                                     absl::string_view region,
                                     const std::string& program,
                                     const std::vector<std::string>& args);

// Finds deploy/wan/tern-wan, as an absolute path, in this order:
//   1. `flag` (--wan_script, or TERN_WAN_SCRIPT): it must be an executable
//      file, or this is an error (no looking further);
//   2. the tern binary's Bazel runfiles:
//      <self_exe>.runfiles/tern/deploy/wan/tern-wan (//tern:tern has
//      //deploy/wan:tern_wan as data);
//   3. the source tree around a binary in bazel-bin: Bazel's execroot links
//      the workspace's folders next to bazel-out, so
//      <dir of self_exe>/../../../../deploy/wan/tern-wan;
//   4. <cwd>/deploy/wan/tern-wan (launch run from the repository root).
// NOT_FOUND listing where it looked.
absl::StatusOr<std::string> FindWanScript(const std::string& flag,
                                          const std::string& self_exe,
                                          const std::string& cwd);

}  // namespace tern

#endif  // TERN_TERN_GEO_PLAN_H_
