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
#include "absl/time/clock.h"
#include "tern/metrics_file.h"
#include "tern/progress.h"
#include "tern/run_summary.h"
#include "worker/worker_flags.h"

namespace tern {
namespace {

// The children run this very binary, whatever its name or path.
constexpr char kSelfExe[] = "/proc/self/exe";

// The file a shard with a free port reports it in, read by the launcher.
std::string PortFile(const std::string& out_dir, uint32_t shard) {
  return absl::StrCat(out_dir, "/ps-", shard, ".port");
}

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
  std::filesystem::create_directories(
      std::filesystem::path(base).parent_path(), error);
  for (int attempt = 1; !error && attempt < 1000; ++attempt) {
    const std::string candidate =
        attempt == 1 ? base : absl::StrCat(base, "-", attempt);
    if (std::filesystem::create_directory(candidate, error)) return candidate;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("cannot create an output directory ", base, "[-k]: ",
                   error ? error.message() : "all names taken"));
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
                    const std::string& help) {
    return app
        ->add_option("--" + name, *value, help)
        ->envname("TERN_" + absl::AsciiStrToUpper(name))
        ->capture_default_str()
        ->group("Launch");
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
  app->callback([options, worker_flags] {
    options->worker_args = GivenFlags(worker_flags);
  });
}

absl::Status ValidateLaunchOptions(const LaunchOptions& options) {
  worker::WorkerOptions as_worker = options.job;
  as_worker.ps.assign(options.shards, "127.0.0.1:1");
  as_worker.num_workers = options.workers;
  as_worker.worker_id = 0;
  return worker::ValidateWorkerOptions(as_worker);
}

std::vector<std::string> ShardArgs(const LaunchOptions& options,
                                   uint32_t shard,
                                   const std::string& port_file) {
  return {"ps",
          "--listen=127.0.0.1:0",
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
  args.insert(args.end(), options.worker_args.begin(),
              options.worker_args.end());
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

int RunLaunch(const LaunchOptions& options) {
  const absl::Time start = absl::Now();
  Console console(::isatty(STDERR_FILENO) == 1,
                  absl::Seconds(options.progress_every_s));
  LaunchOutcome outcome;
  outcome.shards = options.shards;
  outcome.workers = options.workers;
  outcome.total_steps = options.job.steps;

  absl::StatusOr<std::string> out_dir = MakeOutDir(options.out_dir, start);
  if (!out_dir.ok()) {
    console.Note(absl::StrCat("error: ", out_dir.status().message()));
    return 1;
  }
  outcome.out_dir = *out_dir;
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
  const std::string self = ReadSelfPath();
  // The children get their whole configuration as flags; a cluster spec
  // in the environment would only contradict it.
  const std::vector<std::string> unset_env = {"TERN_CLUSTER_SPEC"};

  // The first failure stops the run; later ones are consequences.
  auto fail = [&](std::string child, std::string why, int code) {
    if (outcome.status != "ok") return;
    outcome.status = "failed";
    outcome.failed_child = std::move(child);
    outcome.failure = std::move(why);
    outcome.exit_code = code;
  };
  auto spawn = [&](std::string name, std::vector<std::string> args,
                   std::string log) -> std::optional<size_t> {
    ChildSpec spec;
    spec.name = std::move(name);
    spec.path = kSelfExe;
    spec.argv = {self};
    spec.argv.insert(spec.argv.end(), args.begin(), args.end());
    spec.unset_env = unset_env;
    spec.log_path = std::move(log);
    absl::StatusOr<size_t> index = children.Spawn(spec);
    if (!index.ok()) {
      fail(spec.name, std::string(index.status().message()),
           kExitStartFailure);
      return std::nullopt;
    }
    return *index;
  };
  auto interrupted = [&] {
    if (children.interrupt_signal() == 0) return false;
    if (outcome.status == "ok") {
      outcome.status = "interrupted";
      outcome.failure = absl::StrCat("received ",
                                     strsignal(children.interrupt_signal()));
      outcome.exit_code = 128 + children.interrupt_signal();
    }
    return true;
  };
  // A child that ended: a failure unless it is a worker that succeeded.
  std::vector<bool> is_shard;
  auto check_exits = [&] {
    for (size_t i : children.TakeExited()) {
      const ChildExit& exit = *children.exit(i);
      if (!is_shard[i] && exit.success()) continue;
      const std::string why =
          exit.success() ? "exited before the workers finished"
                         : exit.Describe();
      if (outcome.status == "ok") {
        console.Note(absl::StrCat(children.name(i), " failed: ", why,
                                  ". Its last lines (all in ", outcome.out_dir,
                                  "/",
                                  absl::StrReplaceAll(children.name(i),
                                                      {{"/", "-"}}),
                                  ".log):"));
        for (const std::string& line : children.LastLines(i)) {
          console.Note(absl::StrCat("  | ", line));
        }
      }
      fail(children.name(i), why,
           exit.success() ? kExitStartFailure : ExitCodeFor(exit));
    }
  };

  // 1. Shards, each on a free loopback port that it reports in a file.
  console.Note(absl::StrCat("starting ", options.shards, " shard(s) and ",
                            options.workers, " worker(s); output in ",
                            outcome.out_dir));
  std::vector<std::string> addresses(options.shards);
  std::vector<size_t> shard_children;
  for (uint32_t s = 0; s < options.shards && outcome.status == "ok"; ++s) {
    const std::string port_file = PortFile(outcome.out_dir, s);
    std::error_code ignored;
    std::filesystem::remove(port_file, ignored);  // from an earlier run
    std::optional<size_t> index =
        spawn(absl::StrCat("ps/", s), ShardArgs(options, s, port_file),
              absl::StrCat(outcome.out_dir, "/ps-", s, ".log"));
    if (!index.has_value()) break;
    shard_children.push_back(*index);
    is_shard.push_back(true);
  }
  const absl::Time start_deadline =
      absl::Now() + absl::Seconds(options.start_timeout_s);
  auto all_serving = [&] {
    return std::none_of(addresses.begin(), addresses.end(),
                        [](const std::string& a) { return a.empty(); });
  };
  while (outcome.status == "ok" && !all_serving()) {
    children.Poll(absl::Milliseconds(50));
    check_exits();
    if (interrupted()) break;
    for (uint32_t s = 0; s < options.shards; ++s) {
      if (!addresses[s].empty()) continue;
      if (std::optional<uint32_t> port =
              ReadPort(PortFile(outcome.out_dir, s))) {
        addresses[s] = absl::StrCat("127.0.0.1:", *port);
      }
    }
    if (!all_serving() && absl::Now() > start_deadline) {
      for (uint32_t s = 0; s < options.shards; ++s) {
        if (!addresses[s].empty()) continue;
        console.Note(absl::StrCat("ps/", s, " did not write ",
                                  PortFile(outcome.out_dir, s), " within ",
                                  options.start_timeout_s, " s"));
        fail(absl::StrCat("ps/", s),
             absl::StrCat("not serving after --start_timeout_s=",
                          options.start_timeout_s),
             kExitStartFailure);
      }
    }
  }

  // 2. Workers, once every shard serves.
  std::vector<size_t> worker_children;
  if (outcome.status == "ok") {
    console.Note(absl::StrCat("shards serving at ",
                              absl::StrJoin(addresses, ",")));
    for (uint32_t w = 0; w < options.workers; ++w) {
      std::optional<size_t> index = spawn(
          absl::StrCat("worker/", w),
          WorkerArgs(options, w, addresses,
                     absl::StrCat(outcome.out_dir, "/worker-", w, ".jsonl")),
          absl::StrCat(outcome.out_dir, "/worker-", w, ".log"));
      if (!index.has_value()) break;
      worker_children.push_back(*index);
      is_shard.push_back(false);
    }
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

  // 4. Stop: the shards when training is over, everything otherwise.
  const absl::Duration grace = absl::Seconds(options.stop_timeout_s);
  if (outcome.status == "ok") {
    console.Note("workers finished; stopping the shards");
    children.Stop(shard_children, grace);
  } else {
    console.Note(absl::StrCat("stopping every child (SIGTERM, SIGKILL after ",
                              options.stop_timeout_s, " s)"));
    children.StopAll(grace);
  }
  // Shards that end on the SIGTERM they were sent are not failures.
  children.TakeExited();
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
  if (outcome.status == "ok" && !training.checksums_agree) {
    // Every worker exited 0, yet the replicas are not proven identical.
    outcome.status = "failed";
    outcome.failure = "the workers' final param_checksum values differ or "
                      "are missing";
    outcome.exit_code = 1;
  }
  outcome.wall_s = absl::ToDoubleSeconds(absl::Now() - start);
  const std::string summary_path =
      absl::StrCat(outcome.out_dir, "/summary.json");
  std::ofstream summary_file(summary_path);
  summary_file << SummaryJson(outcome, training);
  summary_file.close();
  if (!summary_file) {
    console.Note(absl::StrCat("warning: could not write ", summary_path));
  }
  std::fputs(SummaryText(outcome, training).c_str(), stdout);
  std::fflush(stdout);
  return outcome.exit_code;
}

}  // namespace tern
