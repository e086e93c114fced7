#include "tern/launch.h"

#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tern/geo_plan.h"
#include "tern/geo_report.h"
#include "tern/metrics_file.h"
#include "tern/progress.h"
#include "tern/run_summary.h"
#include "worker/worker_flags.h"

namespace tern {
namespace {

// The children run this very binary, whatever its name or path.
constexpr char kSelfExe[] = "/proc/self/exe";

// "--name=value" for each value of each given option, in definition order.
// Repeating a list flag once per value keeps values with commas intact.
std::vector<std::string> GivenFlags(const std::vector<CLI::Option*>& flags) {
  std::vector<std::string> args;
  for (const CLI::Option* flag : flags) {
    if (flag->count() == 0) continue;
    for (const std::string& value : flag->reduced_results()) {
      args.push_back(absl::StrCat("--", flag->get_single_name(), "=", value));
    }
  }
  return args;
}

// Reads a port that a shard wrote: a decimal number in [1, 65535], perhaps
// followed by a newline. Nothing while the file is absent or still partial.
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

int TerminalWidth() {
  winsize size{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
    return size.ws_col;
  }
  return 80;
}

// Everything launch writes to stderr: children's lines with their prefix,
// its own notes, and the progress, which is a bar redrawn on the last line
// of a terminal (cleared before each other line) or a periodic plain line.
class Console {
 public:
  Console(bool terminal, absl::Duration plain_every)
      : terminal_(terminal), plain_every_(plain_every) {}

  void ChildLine(absl::string_view child, absl::string_view line) {
    Write(absl::StrCat("[", child, "] ", line, "\n"));
  }

  void Note(absl::string_view text) {
    Write(absl::StrCat("[launch] ", text, "\n"));
  }

  void Progress(const ProgressSnapshot& snapshot) {
    const absl::Time now = absl::Now();
    if (terminal_) {
      bar_ = FormatProgressBar(snapshot, TerminalWidth() - 1);
      // Redraws are throttled (a terminal is slow, and steps can be fast)
      // and skipped when nothing changed.
      if (bar_ != drawn_ && now - last_draw_ >= absl::Milliseconds(100)) {
        Emit(absl::StrCat("\r\x1b[K", bar_));
        drawn_ = bar_;
        last_draw_ = now;
      }
    } else if (plain_every_ > absl::ZeroDuration() &&
               now - last_draw_ >= plain_every_) {
      Emit(absl::StrCat("[launch] ", FormatProgressLine(snapshot), "\n"));
      last_draw_ = now;
    }
  }

  // Removes the bar for good (before the summary).
  void EndProgress() {
    if (terminal_ && !bar_.empty()) Emit("\r\x1b[K");
    bar_.clear();
  }

 private:
  void Write(absl::string_view text) {
    if (terminal_ && !bar_.empty()) {
      Emit(absl::StrCat("\r\x1b[K", text, bar_));
      drawn_ = bar_;
    } else {
      Emit(text);
    }
  }

  static void Emit(absl::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
  }

  bool terminal_;
  absl::Duration plain_every_;
  std::string bar_;    // the current bar; empty: none shown
  std::string drawn_;  // the bar last drawn by Progress()
  absl::Time last_draw_ = absl::InfinitePast();
};

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
      std::filesystem::read_symlink(kSelfExe, error);
  return error ? std::string("tern") : path.string();
}

}  // namespace

void AddLaunchFlags(CLI::App* app, LaunchOptions* options) {
  auto flag = [app](const std::string& name, auto* value,
                    const std::string& help,
                    const std::string& group = "Launch") {
    return app->add_option("--" + name, *value, help)
        ->envname("TERN_" + absl::AsciiStrToUpper(name))
        ->capture_default_str()
        ->group(group);
  };
  flag("shards", &options->shards, "parameter-server shards to start")
      ->check(CLI::Range(1u, 256u));
  flag("workers", &options->workers, "workers to start")
      ->check(CLI::Range(1u, 1024u));
  flag("out_dir", &options->out_dir,
       "directory for logs, metrics and summary.json (default: "
       "runs/<UTC time>)");
  flag("start_timeout_s", &options->start_timeout_s,
       "seconds the shards may take to start serving")
      ->check(CLI::PositiveNumber);
  flag("stop_timeout_s", &options->stop_timeout_s,
       "seconds between SIGTERM and SIGKILL when stopping children")
      ->check(CLI::NonNegativeNumber);
  flag("progress_every_s", &options->progress_every_s,
       "seconds between progress lines when stderr is not a terminal (0: "
       "none)")
      ->check(CLI::NonNegativeNumber);
  flag("target_accuracy", &options->target_accuracy,
       "report when worker 0 first evaluates at or above this test accuracy "
       "(a fraction; 0: not reported)")
      ->check(CLI::Range(0.0, 1.0));

  // The job's flags are the worker's own definitions (one source of truth);
  // those that launch sets per worker are taken out again.
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
                  name) != std::end(kLaunchOwnedWorkerFlags)) {
      app->remove_option(option);
    } else {
      worker_flags.push_back(option);
    }
  }

  // The geo flags (tern/geo_plan.h). Registered after the worker's, so that
  // a worker flag of the same name (the LPS's --sync_every, say, should the
  // worker ever take it) is launch's: the mode decides it for every process.
  auto geo_flag = [&](const std::string& name, auto* value,
                      const std::string& help) {
    if (CLI::Option* taken = app->get_option_no_throw("--" + name)) {
      worker_flags.erase(
          std::remove(worker_flags.begin(), worker_flags.end(), taken),
          worker_flags.end());
      app->remove_option(taken);
    }
    return flag(name, value, help, "Geo");
  };
  GeoOptions& geo = options->geo;
  geo_flag("geo", &geo.mode,
           "a geo-distributed run of --datacenters x --workers_per_dc "
           "workers: baseline (fp32 shards in the GS's region for all), "
           "terngrad (the same, ternary), gaia or weightgrad (tern global + "
           "one LPS per data center); empty: a plain local cluster")
      ->check(
          CLI::IsMember({"", "baseline", "terngrad", "gaia", "weightgrad"}));
  geo_flag("datacenters", &geo.datacenters, "--geo: data centers (K)")
      ->check(CLI::Range(1u, 256u));
  geo_flag("workers_per_dc", &geo.workers_per_dc,
           "--geo: workers in each data center (W)")
      ->check(CLI::Range(1u, 1024u));
  geo_flag("sync_every", &geo.sync_every,
           "--geo=gaia|weightgrad: local steps per global round (0: the "
           "LPS's default)");
  geo_flag("weight_codec", &geo.weight_codec,
           "--geo=weightgrad: how the LPS sends weights to its workers: "
           "ternary, int8 or fp32 (empty: the LPS's default; gaia: fp32)")
      ->check(CLI::IsMember({"", "ternary", "int8", "fp32"}));
  geo_flag("t_global_s", &geo.t_global_s,
           "--geo=gaia|weightgrad: the GS's T_global in seconds (0: its "
           "default)")
      ->check(CLI::NonNegativeNumber);
  geo_flag("max_lag", &geo.max_lag,
           "--geo=gaia|weightgrad: the GS's --max_lag (-1: its default)")
      ->check(CLI::Range(-1, 1000));
  if (CLI::Option* taken = app->get_option_no_throw("--emulate_wan")) {
    app->remove_option(taken);
  }
  app->add_flag("--emulate_wan", geo.emulate_wan,
                "--geo: run each region in a network namespace of "
                "deploy/wan/tern-wan, joined by shaped WAN links (root "
                "only); tern-wan down always runs at the end")
      ->envname("TERN_EMULATE_WAN")
      ->group("Geo");
  geo_flag("wan_mbit", &geo.wan_mbit,
           "--emulate_wan: rate of each WAN link and direction, mbit/s, in "
           "[1, 10000] (0: tern-wan's default, 100 = LAN / 10)")
      ->check(CLI::Range(0.0, 10000.0));
  geo_flag("wan_script", &geo.wan_script,
           "--emulate_wan: the tern-wan script (default: found in tern's "
           "runfiles, beside bazel-out, or ./deploy/wan/tern-wan)");
  geo_flag("wan_prefix", &geo.wan_prefix,
           "--emulate_wan: tern-wan's namespace prefix (runs at the same "
           "time need different ones)");

  app->callback([app, options, worker_flags] {
    options->worker_args = GivenFlags(worker_flags);
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

absl::Status ValidateLaunchOptions(const LaunchOptions& options, bool is_root) {
  if (absl::Status status = ValidateGeoOptions(options, is_root);
      !status.ok()) {
    return status;
  }
  const LaunchOptions resolved = ResolveLaunchOptions(options);
  const WorkerPlacement placement = PlaceWorker(resolved, 0);
  worker::WorkerOptions as_worker = resolved.job;
  as_worker.ps.assign(
      UsesLps(*ParseGeoMode(resolved.geo.mode)) ? 1 : resolved.shards,
      "127.0.0.1:1");
  as_worker.num_workers = placement.num_workers;
  as_worker.worker_id = placement.worker_id;
  return worker::ValidateWorkerOptions(as_worker);
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

int ExitCodeFor(const ChildExit& exit) {
  if (exit.signaled()) return 128 + exit.code_or_signal();
  const int code = exit.code_or_signal();
  if (code == 0) return 0;
  return code < 128 ? 1 : code;
}

std::string DefaultOutDir(absl::Time now) {
  return absl::StrCat(
      "runs/", absl::FormatTime("%Y%m%d-%H%M%SZ", now, absl::UTCTimeZone()));
}

int RunLaunch(const LaunchOptions& requested) {
  const absl::Time start = absl::Now();
  const LaunchOptions options = ResolveLaunchOptions(requested);
  // ValidateLaunchOptions has accepted the mode.
  const GeoMode mode = ParseGeoMode(options.geo.mode).value_or(GeoMode::kNone);
  const bool geo = mode != GeoMode::kNone;
  const bool wan = options.geo.emulate_wan;
  Console console(::isatty(STDERR_FILENO) == 1,
                  absl::Seconds(options.progress_every_s));
  LaunchOutcome outcome;
  outcome.shards = UsesLps(mode) ? options.geo.datacenters : options.shards;
  outcome.workers = options.workers;
  outcome.total_steps = options.job.steps;

  absl::StatusOr<std::string> out_dir = MakeOutDir(options.out_dir, start);
  if (!out_dir.ok()) {
    console.Note(absl::StrCat("error: ", out_dir.status().message()));
    return 1;
  }
  outcome.out_dir = *out_dir;
  const std::string self = ReadSelfPath();
  std::string wan_script;
  if (wan) {
    std::error_code ignored;
    absl::StatusOr<std::string> script =
        FindWanScript(options.geo.wan_script, self,
                      std::filesystem::current_path(ignored).string());
    if (!script.ok()) {
      console.Note(absl::StrCat("error: ", script.status().message()));
      return 1;
    }
    wan_script = *script;
  }
  // A closed stderr pipe must not kill the launcher (and so every child).
  ::signal(SIGPIPE, SIG_IGN);

  auto group = ProcessGroup::Create(
      [&console](const std::string& child, absl::string_view line) {
        console.ChildLine(child, line);
      });
  if (!group.ok()) {
    console.Note(absl::StrCat("error: ", group.status().message()));
    return kExitStartFailure;
  }
  ProcessGroup& children = **group;
  // The children get their whole configuration as flags; a cluster spec
  // in the environment would only contradict it.
  const std::vector<std::string> unset_env = {"TERN_CLUSTER_SPEC"};
  auto log_of = [&](absl::string_view name) {
    return absl::StrCat(outcome.out_dir, "/",
                        absl::StrReplaceAll(name, {{"/", "-"}}), ".log");
  };

  // The first failure stops the run; later ones are consequences.
  auto fail = [&](std::string child, std::string why, int code) {
    if (outcome.status != "ok") return;
    outcome.status = "failed";
    outcome.failed_child = std::move(child);
    outcome.failure = std::move(why);
    outcome.exit_code = code;
  };
  // What each child is: servers must keep running until the workers are
  // done; tools (tern-wan up/down) are waited for where they run.
  enum class Role { kServer, kWorker, kTool };
  std::vector<Role> roles;
  auto spawn_argv = [&](std::string name, std::string path,
                        std::vector<std::string> argv,
                        Role role) -> std::optional<size_t> {
    ChildSpec spec;
    spec.name = std::move(name);
    spec.path = std::move(path);
    spec.argv = std::move(argv);
    spec.unset_env = unset_env;
    spec.log_path = log_of(spec.name);
    absl::StatusOr<size_t> index = children.Spawn(spec);
    if (!index.ok()) {
      fail(spec.name, std::string(index.status().message()), kExitStartFailure);
      return std::nullopt;
    }
    roles.push_back(role);
    return *index;
  };
  // A tern role in `region`: this binary itself, inside the region's
  // namespace under an emulated WAN.
  auto spawn = [&](std::string name, absl::string_view region,
                   const std::vector<std::string>& args,
                   Role role) -> std::optional<size_t> {
    if (wan) {
      return spawn_argv(std::move(name), wan_script,
                        WanExecArgv(wan_script, options, region, self, args),
                        role);
    }
    // This very file, whatever its name or path now.
    std::vector<std::string> argv = {self};
    argv.insert(argv.end(), args.begin(), args.end());
    return spawn_argv(std::move(name), kSelfExe, std::move(argv), role);
  };
  auto interrupted = [&] {
    if (children.interrupt_signal() == 0) return false;
    if (outcome.status == "ok") {
      outcome.status = "interrupted";
      outcome.failure =
          absl::StrCat("received ", strsignal(children.interrupt_signal()));
      outcome.exit_code = 128 + children.interrupt_signal();
    }
    return true;
  };
  // A child that ended: a failure unless it is a worker that succeeded.
  auto check_exits = [&] {
    for (size_t i : children.TakeExited()) {
      if (roles[i] == Role::kTool) continue;
      const ChildExit& exit = *children.exit(i);
      if (roles[i] == Role::kWorker && exit.success()) continue;
      const std::string why = exit.success()
                                  ? "exited before the workers finished"
                                  : exit.Describe();
      if (outcome.status == "ok") {
        console.Note(absl::StrCat(children.name(i), " failed: ", why,
                                  ". Its last lines (all in ",
                                  log_of(children.name(i)), "):"));
        for (const std::string& line : children.LastLines(i)) {
          console.Note(absl::StrCat("  | ", line));
        }
      }
      fail(children.name(i), why,
           exit.success() ? kExitStartFailure : ExitCodeFor(exit));
    }
  };
  // Runs a tool to its end (at most `limit`); with `interruptible`, a
  // Ctrl-C/SIGTERM stops it. Its exit, or nothing when it did not end.
  auto run_tool = [&](std::string name, std::vector<std::string> argv,
                      absl::Duration limit,
                      bool interruptible) -> std::optional<ChildExit> {
    std::string path = argv.front();
    std::optional<size_t> index = spawn_argv(std::move(name), std::move(path),
                                             std::move(argv), Role::kTool);
    if (!index.has_value()) return std::nullopt;
    const absl::Time deadline = absl::Now() + limit;
    while (children.running(*index)) {
      children.Poll(absl::Milliseconds(100));
      if ((interruptible && interrupted()) || absl::Now() > deadline) {
        children.Stop({*index}, absl::Seconds(options.stop_timeout_s));
        break;
      }
    }
    check_exits();  // the tool's own exit is skipped there
    return children.exit(*index);
  };
  // Starts servers, each reporting its port in a file, and waits until all
  // serve: their ports, or nothing when the run failed meanwhile.
  struct Server {
    std::string name;  // "ps/0", "global", "lps/1"
    std::string region;
    std::vector<std::string> args;
    std::string port_file;
  };
  auto start_servers = [&](const std::vector<Server>& servers,
                           std::vector<size_t>* started)
      -> std::optional<std::vector<uint32_t>> {
    for (const Server& server : servers) {
      if (outcome.status != "ok") break;
      std::error_code ignored;
      std::filesystem::remove(server.port_file, ignored);  // an earlier run's
      std::optional<size_t> index =
          spawn(server.name, server.region, server.args, Role::kServer);
      if (!index.has_value()) break;
      started->push_back(*index);
    }
    std::vector<uint32_t> ports(servers.size(), 0);
    const absl::Time deadline =
        absl::Now() + absl::Seconds(options.start_timeout_s);
    auto all_serving = [&] {
      return std::none_of(ports.begin(), ports.end(),
                          [](uint32_t port) { return port == 0; });
    };
    while (outcome.status == "ok" && !all_serving()) {
      children.Poll(absl::Milliseconds(50));
      check_exits();
      if (interrupted()) break;
      for (size_t s = 0; s < servers.size(); ++s) {
        if (ports[s] != 0) continue;
        if (std::optional<uint32_t> port = ReadPort(servers[s].port_file)) {
          ports[s] = *port;
        }
      }
      if (!all_serving() && absl::Now() > deadline) {
        for (size_t s = 0; s < servers.size(); ++s) {
          if (ports[s] != 0) continue;
          console.Note(absl::StrCat(servers[s].name, " did not write ",
                                    servers[s].port_file, " within ",
                                    options.start_timeout_s, " s"));
          fail(servers[s].name,
               absl::StrCat("not serving after --start_timeout_s=",
                            options.start_timeout_s),
               kExitStartFailure);
        }
      }
    }
    if (outcome.status != "ok") return std::nullopt;
    return ports;
  };
  auto dial = [&](absl::string_view listener, absl::string_view dialer,
                  uint32_t port) -> std::optional<std::string> {
    absl::StatusOr<std::string> address =
        DialAddress(wan, listener, dialer, port);
    if (!address.ok()) {
      fail("launch", std::string(address.status().message()), 1);
      return std::nullopt;
    }
    return *address;
  };
  auto port_file = [&](absl::string_view name) {
    return absl::StrCat(outcome.out_dir, "/",
                        absl::StrReplaceAll(name, {{"/", "-"}}), ".port");
  };

  // 0. The emulated WAN. Everything after a successful start (or a failed
  // or interrupted one, which may have made part of it) ends with down.
  bool wan_needs_down = false;
  if (wan) {
    console.Note(
        absl::StrCat("building the emulated WAN: ",
                     absl::StrJoin(WanUpArgv(wan_script, options), " ")));
    std::optional<ChildExit> up = run_tool(
        "wan-up", WanUpArgv(wan_script, options), absl::Minutes(5), true);
    // tern-wan refuses with 2 before it makes anything (bad flags, not
    // root, namespaces with this prefix already there: another run's,
    // which down would destroy).
    const bool refused =
        up.has_value() && !up->signaled() && up->code_or_signal() == 2;
    wan_needs_down = !refused;
    if (outcome.status == "ok" && !interrupted() &&
        !(up.has_value() && up->success())) {
      const std::string why =
          up.has_value() ? up->Describe() : "did not finish within 5 min";
      console.Note(absl::StrCat("tern-wan up failed (", why, "); see ",
                                log_of("wan-up")));
      fail("wan-up", why, refused ? 1 : kExitStartFailure);
    }
  }
  const absl::Time job_start = absl::Now();

  // 1. The servers: shards for all workers, or the GS and then an LPS per
  // data center (which need the GS's address).
  std::vector<size_t> first_tier;  // shards, or the GS
  std::vector<size_t> lps_children;
  std::vector<std::string> worker_targets(options.workers);
  if (outcome.status == "ok") {
    console.Note(absl::StrCat(
        "starting ",
        UsesLps(mode) ? absl::StrCat("the global server, ",
                                     options.geo.datacenters, " LPS(s)")
                      : absl::StrCat(options.shards, " shard(s)"),
        " and ", options.workers, " worker(s)",
        geo ? absl::StrCat(" (--geo=", options.geo.mode, ", ",
                           options.geo.datacenters, " x ",
                           options.geo.workers_per_dc,
                           wan ? ", emulated WAN)" : ", loopback)")
            : std::string(),
        "; output in ", outcome.out_dir));
  }
  if (outcome.status == "ok" && !UsesLps(mode)) {
    std::vector<Server> shards;
    for (uint32_t s = 0; s < options.shards; ++s) {
      const std::string name = absl::StrCat("ps/", s);
      shards.push_back({name, kGsRegion, ShardArgs(options, s, port_file(name)),
                        port_file(name)});
    }
    if (std::optional<std::vector<uint32_t>> ports =
            start_servers(shards, &first_tier)) {
      for (uint32_t g = 0; g < options.workers; ++g) {
        const std::string region = DcRegion(PlaceWorker(options, g).datacenter);
        std::vector<std::string> addresses;
        for (uint32_t port : *ports) {
          std::optional<std::string> address = dial(kGsRegion, region, port);
          if (!address.has_value()) break;
          addresses.push_back(*address);
        }
        worker_targets[g] = absl::StrJoin(addresses, ",");
      }
      console.Note(absl::StrCat("shards serving at ", worker_targets[0]));
    }
  }
  if (outcome.status == "ok" && UsesLps(mode)) {
    const std::string gs_name = "global";
    std::optional<std::vector<uint32_t>> gs_port = start_servers(
        {{gs_name, kGsRegion, GlobalServerArgs(options, port_file(gs_name)),
          port_file(gs_name)}},
        &first_tier);
    std::vector<Server> lpss;
    for (uint32_t d = 0; gs_port.has_value() && d < options.geo.datacenters;
         ++d) {
      std::optional<std::string> gs_address =
          dial(kGsRegion, DcRegion(d), gs_port->front());
      if (!gs_address.has_value()) break;
      const std::string name = absl::StrCat("lps/", d);
      lpss.push_back({name, DcRegion(d),
                      LpsArgs(options, d, *gs_address, port_file(name)),
                      port_file(name)});
    }
    if (outcome.status == "ok") {
      console.Note(
          absl::StrCat("global server serving on port ", gs_port->front()));
      if (std::optional<std::vector<uint32_t>> lps_ports =
              start_servers(lpss, &lps_children)) {
        for (uint32_t g = 0; g < options.workers; ++g) {
          const std::string region =
              DcRegion(PlaceWorker(options, g).datacenter);
          const uint32_t d = PlaceWorker(options, g).datacenter;
          std::optional<std::string> address =
              dial(region, region, (*lps_ports)[d]);
          if (!address.has_value()) break;
          worker_targets[g] = *address;
        }
        console.Note("LPSs serving");
      }
    }
  }

  // 2. Workers, once every server serves.
  std::vector<size_t> worker_children;
  for (uint32_t g = 0; outcome.status == "ok" && g < options.workers; ++g) {
    const std::string metrics =
        absl::StrCat(outcome.out_dir, "/worker-", g, ".jsonl");
    std::optional<size_t> index =
        spawn(absl::StrCat("worker/", g),
              DcRegion(PlaceWorker(options, g).datacenter),
              UsesLps(mode)
                  ? LpsWorkerArgs(options, g, worker_targets[g], metrics)
                  : WorkerArgs(options, g,
                               absl::StrSplit(worker_targets[g], ','), metrics),
              Role::kWorker);
    if (!index.has_value()) break;
    worker_children.push_back(*index);
  }

  // 3. Training: follow worker 0's records until every worker is done.
  MetricsTail progress_tail(absl::StrCat(outcome.out_dir, "/worker-0.jsonl"));
  ProgressTracker tracker(options.job.steps);
  auto workers_done = [&] {
    return std::none_of(worker_children.begin(), worker_children.end(),
                        [&](size_t i) { return children.running(i); });
  };
  while (outcome.status == "ok" && !worker_children.empty() &&
         !workers_done()) {
    children.Poll(absl::Milliseconds(200));
    check_exits();
    if (interrupted()) break;
    for (const MetricsRecord& record : progress_tail.ReadNew()) {
      tracker.Add(record);
    }
    if (!tracker.empty()) console.Progress(tracker.Snapshot());
  }
  check_exits();
  console.EndProgress();
  const absl::Time job_end = absl::Now();

  // 4. Stop: the servers when training is over (the LPSs before the GS,
  // which logs its byte totals as it stops), everything otherwise.
  const absl::Duration grace = absl::Seconds(options.stop_timeout_s);
  if (outcome.status == "ok") {
    console.Note("workers finished; stopping the servers");
    children.Stop(lps_children, grace);
    children.Stop(first_tier, grace);
  } else {
    console.Note(absl::StrCat("stopping every child (SIGTERM, SIGKILL after ",
                              options.stop_timeout_s, " s)"));
    children.StopAll(grace);
  }
  // Servers that end on the SIGTERM they were sent are not failures.
  children.TakeExited();
  if (wan_needs_down) {
    // Not interruptible: a Ctrl-C now must not leave namespaces behind.
    std::optional<ChildExit> down = run_tool(
        "wan-down", WanDownArgv(wan_script, options), absl::Minutes(2), false);
    if (!(down.has_value() && down->success())) {
      console.Note(
          absl::StrCat("warning: tern-wan down failed (",
                       down.has_value() ? down->Describe() : "did not finish",
                       "); namespaces may remain: run ",
                       absl::StrJoin(WanDownArgv(wan_script, options), " ")));
      fail("wan-down", "could not remove the emulated WAN", 1);
    }
  }
  for (size_t i = 0; i < children.size(); ++i) {
    outcome.children.emplace_back(children.name(i),
                                  children.exit(i).has_value()
                                      ? children.exit(i)->Describe()
                                      : std::string("still running"));
  }

  // 5. Summary.
  std::vector<std::vector<MetricsRecord>> records(options.workers);
  for (uint32_t w = 0; w < options.workers; ++w) {
    MetricsTail tail(absl::StrCat(outcome.out_dir, "/worker-", w, ".jsonl"));
    records[w] = tail.ReadNew();
  }
  const TrainingSummary training = Summarize(records);
  RunReport report;
  report.target_accuracy = options.target_accuracy;
  if (options.target_accuracy > 0) {
    if (std::optional<TargetReached> reached =
            TimeToTarget(records.front(), options.target_accuracy)) {
      report.time_to_target_s = reached->wall_s;
      report.step_to_target = reached->step;
    }
  }
  report.job_wall_s = absl::ToDoubleSeconds(job_end - job_start);
  if (geo) {
    report.geo_mode = options.geo.mode;
    report.datacenters = options.geo.datacenters;
    report.workers_per_dc = options.geo.workers_per_dc;
    report.emulate_wan = wan;
    report.wan_mbit = options.geo.wan_mbit;
    report.lps_mode = UsesLps(mode);
  }
  if (geo && !UsesLps(mode)) {
    const WanBytes bytes = WorkerWanBytes(records);
    report.wan_bytes_up = bytes.up;
    report.wan_bytes_down = bytes.down;
    report.wan_bytes_source =
        "the workers' push and pull messages, all to shards in the GS's "
        "region";
  } else if (geo) {
    for (uint32_t d = 0; d < options.geo.datacenters; ++d) {
      report.lps_checksums.push_back(
          LastLpsChecksum(ReadLogLines(log_of(absl::StrCat("lps/", d)))));
    }
    // The LPSs' own counts first: each is what one data center's link
    // carried.
    WanBytes lps_total;
    uint32_t lps_counted = 0;
    bool lps_complete = true;
    for (uint32_t d = 0; d < options.geo.datacenters; ++d) {
      if (std::optional<LpsWanBytes> bytes =
              LpsLogWanBytes(ReadLogLines(log_of(absl::StrCat("lps/", d))))) {
        lps_total.up += bytes->bytes.up;
        lps_total.down += bytes->bytes.down;
        lps_complete = lps_complete && bytes->complete;
        ++lps_counted;
      }
    }
    if (lps_counted == options.geo.datacenters) {
      report.wan_bytes_up = lps_total.up;
      report.wan_bytes_down = lps_total.down;
      report.wan_bytes_source =
          lps_complete
              ? "update and answer payloads from the LPSs' final lines"
              : "update and answer payloads summed from the LPSs' round "
                "lines (not every LPS finished its final round)";
    } else if (std::optional<WanBytes> bytes = GlobalServerWanBytes(
                   ReadLogLines(log_of("global")), options.geo.datacenters)) {
      report.wan_bytes_up = bytes->up;
      report.wan_bytes_down = bytes->down;
      report.wan_bytes_source =
          "update and answer payloads from the global server's log (an "
          "LPS log had no byte counts); down = data centers x one answer "
          "per round";
    } else {
      report.wan_bytes_source =
          "neither the LPSs' logs nor the global server's have byte counts";
    }
  }
  if (outcome.status == "ok" && !UsesLps(mode) && !training.checksums_agree) {
    // Every worker exited 0, yet the replicas are not proven identical.
    outcome.status = "failed";
    outcome.failure =
        "the workers' final param_checksum values differ or "
        "are missing";
    outcome.exit_code = 1;
  }
  if (outcome.status == "ok" && UsesLps(mode) &&
      std::all_of(report.lps_checksums.begin(), report.lps_checksums.end(),
                  [](const std::string& c) { return !c.empty(); }) &&
      !LpsChecksumsAgree(report)) {
    // Every data center must end on the same model (the final round).
    outcome.status = "failed";
    outcome.failure = "the LPSs' final parameter checksums differ";
    outcome.exit_code = 1;
  }
  outcome.wall_s = absl::ToDoubleSeconds(absl::Now() - start);
  const std::string summary_path =
      absl::StrCat(outcome.out_dir, "/summary.json");
  std::ofstream summary_file(summary_path);
  summary_file << SummaryJson(outcome, training, report);
  summary_file.close();
  if (!summary_file) {
    console.Note(absl::StrCat("warning: could not write ", summary_path));
  }
  std::fputs(SummaryText(outcome, training, report).c_str(), stdout);
  std::fflush(stdout);
  return outcome.exit_code;
}

}  // namespace tern
