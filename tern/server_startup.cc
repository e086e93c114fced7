#include "tern/server_startup.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "common/process/exit_codes.h"
#include "tern/launch_tls.h"

namespace tern {
namespace {

// A server to start: a tern role that reports its port in `port_file`.
struct ServerSpec {
  std::string name;  // "ps/0", "global", "lps/1"
  std::string region;
  std::vector<std::string> args;
  std::string port_file;
};

// `args` with the TLS flags of identity `role`/`id` under --tls, and the
// run's id, which a server then requires of every caller's certificate;
// with --insecure instead, --insecure.
std::vector<std::string> WithTls(const LaunchContext& run,
                                 std::vector<std::string> args,
                                 certs::Role role, uint32_t id) {
  if (run.options->insecure) args.push_back("--insecure");
  if (run.tls_dir.empty()) return args;
  for (std::string& arg : TlsArgs(run.tls_dir, role, id)) {
    args.push_back(std::move(arg));
  }
  args.push_back(absl::StrCat("--run_id=", run.options->job.run_id));
  return args;
}

// Notes and records the servers that have no port yet as not serving.
void FailUnserved(const LaunchContext& run,
                  const std::vector<ServerSpec>& servers,
                  const std::vector<uint32_t>& ports) {
  const double timeout_s = run.options->start_timeout_s;
  for (size_t s = 0; s < servers.size(); ++s) {
    if (ports[s] != 0) continue;
    run.console->Note(absl::StrCat(servers[s].name, " did not write ",
                                   servers[s].port_file, " within ", timeout_s,
                                   " s"));
    run.outcome->Fail(
        servers[s].name,
        absl::StrCat("not serving after --start_timeout_s=", timeout_s),
        process::kExitStartFailure);
  }
}

// Starts `servers` (their child indices appended to `started`) and waits
// until all serve: their ports, or nothing when the run failed meanwhile.
std::optional<std::vector<uint32_t>> StartAndAwait(
    const LaunchContext& run, const std::vector<ServerSpec>& servers,
    std::vector<size_t>* started) {
  for (const ServerSpec& server : servers) {
    if (!run.outcome->ok()) break;
    std::error_code ignored;
    std::filesystem::remove(server.port_file, ignored);  // an earlier run's
    std::optional<size_t> index = run.children->SpawnTern(
        server.name, server.region, server.args, ChildRole::kServer);
    if (!index.has_value()) break;
    started->push_back(*index);
  }
  std::vector<uint32_t> ports(servers.size(), 0);
  const absl::Time deadline =
      absl::Now() + absl::Seconds(run.options->start_timeout_s);
  auto all_serving = [&ports] {
    return std::none_of(ports.begin(), ports.end(),
                        [](uint32_t port) { return port == 0; });
  };
  while (run.outcome->ok() && !all_serving()) {
    run.children->Poll(absl::Milliseconds(50));
    if (run.children->Interrupted()) break;
    for (size_t s = 0; s < servers.size(); ++s) {
      if (ports[s] != 0) continue;
      if (std::optional<uint32_t> port = ReadPort(servers[s].port_file)) {
        ports[s] = *port;
      }
    }
    if (!all_serving() && absl::Now() > deadline) {
      FailUnserved(run, servers, ports);
    }
  }
  if (!run.outcome->ok()) return std::nullopt;
  return ports;
}

// The address at which `dialer`'s region reaches `listener`'s port, or
// nothing after recording the failure.
std::optional<std::string> Dial(const LaunchContext& run,
                                absl::string_view listener,
                                absl::string_view dialer, uint32_t port) {
  absl::StatusOr<std::string> address =
      DialAddress(run.wan(), listener, dialer, port);
  if (!address.ok()) {
    run.outcome->Fail("launch", std::string(address.status().message()), 1);
    return std::nullopt;
  }
  return *address;
}

void StartShards(const LaunchContext& run, StartedServers* started) {
  const LaunchOptions& options = *run.options;
  std::vector<ServerSpec> shards;
  for (uint32_t s = 0; s < options.shards; ++s) {
    const std::string name = absl::StrCat("ps/", s);
    const std::string port_file = PortFileOf(run.out_dir, name);
    shards.push_back({name, kGsRegion,
                      WithTls(run, ShardArgs(options, s, port_file),
                              certs::Role::kPs, s),
                      port_file});
  }
  std::optional<std::vector<uint32_t>> ports =
      StartAndAwait(run, shards, &started->first_tier);
  if (!ports.has_value()) return;
  for (uint32_t g = 0; g < options.workers; ++g) {
    const std::string region = DcRegion(PlaceWorker(options, g).datacenter);
    std::vector<std::string> addresses;
    for (uint32_t port : *ports) {
      std::optional<std::string> address = Dial(run, kGsRegion, region, port);
      if (!address.has_value()) break;
      addresses.push_back(*address);
    }
    started->worker_targets[g] = absl::StrJoin(addresses, ",");
  }
  run.console->Note(
      absl::StrCat("shards serving at ", started->worker_targets[0]));
}

// The LPS of every data center, which reach the GS at `gs_port`.
void StartLpss(const LaunchContext& run, uint32_t gs_port,
               StartedServers* started) {
  const LaunchOptions& options = *run.options;
  std::vector<ServerSpec> lpss;
  for (uint32_t d = 0; d < options.geo.datacenters; ++d) {
    std::optional<std::string> gs_address =
        Dial(run, kGsRegion, DcRegion(d), gs_port);
    if (!gs_address.has_value()) return;
    const std::string name = absl::StrCat("lps/", d);
    const std::string port_file = PortFileOf(run.out_dir, name);
    lpss.push_back({name, DcRegion(d),
                    WithTls(run,
                            LpsArgs(options, d, *gs_address, port_file,
                                    ReportFileOf(run.out_dir, name)),
                            certs::Role::kLps, d),
                    port_file});
  }
  run.console->Note(absl::StrCat("global server serving on port ", gs_port));
  std::optional<std::vector<uint32_t>> lps_ports =
      StartAndAwait(run, lpss, &started->lps);
  if (!lps_ports.has_value()) return;
  for (uint32_t g = 0; g < options.workers; ++g) {
    const uint32_t d = PlaceWorker(options, g).datacenter;
    const std::string region = DcRegion(d);
    std::optional<std::string> address =
        Dial(run, region, region, (*lps_ports)[d]);
    if (!address.has_value()) break;
    started->worker_targets[g] = *address;
  }
  run.console->Note("LPSs serving");
}

void StartGlobalServerAndLpss(const LaunchContext& run,
                              StartedServers* started) {
  const std::string name = "global";
  const std::string port_file = PortFileOf(run.out_dir, name);
  std::optional<std::vector<uint32_t>> gs_port =
      StartAndAwait(run,
                    {{name, kGsRegion,
                      WithTls(run,
                              GlobalServerArgs(*run.options, port_file,
                                               ReportFileOf(run.out_dir, name)),
                              certs::Role::kGlobal, 0),
                      port_file}},
                    &started->first_tier);
  if (gs_port.has_value()) StartLpss(run, gs_port->front(), started);
}

}  // namespace

std::optional<uint32_t> ReadPort(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  uint32_t port = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text.str()), &port) ||
      port == 0 || port > 65535) {
    return std::nullopt;
  }
  return port;
}

std::string PortFileOf(const std::string& out_dir, const std::string& name) {
  return absl::StrCat(out_dir, "/", absl::StrReplaceAll(name, {{"/", "-"}}),
                      ".port");
}

bool BringUpWan(const LaunchContext& run) {
  const std::vector<std::string> argv = WanUpArgv(run.wan_script, *run.options);
  run.console->Note(
      absl::StrCat("building the emulated WAN: ", absl::StrJoin(argv, " ")));
  std::optional<ChildExit> up =
      run.children->RunTool("wan-up", argv, absl::Minutes(5), true);
  // tern-wan refuses with 2 before it makes anything (bad flags, not root,
  // namespaces with this prefix already there: another run's, which down
  // would destroy).
  const bool refused =
      up.has_value() && !up->signaled() && up->code_or_signal() == 2;
  if (run.outcome->ok() && !run.children->Interrupted() &&
      !(up.has_value() && up->success())) {
    const std::string why =
        up.has_value() ? up->Describe() : "did not finish within 5 min";
    run.console->Note(absl::StrCat("tern-wan up failed (", why, "); see ",
                                   run.children->LogOf("wan-up")));
    run.outcome->Fail(
        "wan-up", why,
        refused ? process::kExitPermanent : process::kExitStartFailure);
  }
  return !refused;
}

void TakeDownWan(const LaunchContext& run) {
  const std::vector<std::string> argv =
      WanDownArgv(run.wan_script, *run.options);
  std::optional<ChildExit> down =
      run.children->RunTool("wan-down", argv, absl::Minutes(2), false);
  if (down.has_value() && down->success()) return;
  run.console->Note(
      absl::StrCat("warning: tern-wan down failed (",
                   down.has_value() ? down->Describe() : "did not finish",
                   "); namespaces may remain: run ", absl::StrJoin(argv, " ")));
  run.outcome->Fail("wan-down", "could not remove the emulated WAN", 1);
}

StartedServers StartServers(const LaunchContext& run) {
  const LaunchOptions& options = *run.options;
  StartedServers started;
  started.worker_targets.resize(options.workers);
  run.console->Note(absl::StrCat(
      "starting ",
      UsesLps(run.mode) ? absl::StrCat("the global server, ",
                                       options.geo.datacenters, " LPS(s)")
                        : absl::StrCat(options.shards, " shard(s)"),
      " and ", options.workers, " worker(s)",
      run.geo() ? absl::StrCat(" (--geo=", GeoModeName(run.mode), ", ",
                               options.geo.datacenters, " x ",
                               options.geo.workers_per_dc,
                               run.wan() ? ", emulated WAN)" : ", loopback)")
                : std::string(),
      "; output in ", run.out_dir));
  if (UsesLps(run.mode)) {
    StartGlobalServerAndLpss(run, &started);
  } else {
    StartShards(run, &started);
  }
  return started;
}

}  // namespace tern
