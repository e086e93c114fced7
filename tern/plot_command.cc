#include "tern/plot_command.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/flags/flags.h"
#include "common/process/exit_codes.h"
#include "tern/plot_data.h"
#include "tern/plot_script.h"
#include "tern/process_group.h"

namespace tern {
namespace {

namespace fs = std::filesystem;

// The script's exit code when it cannot import matplotlib.
constexpr int kNoMatplotlib = 3;
// Drawing a few runs takes seconds; a script still busy after this is stuck.
constexpr absl::Duration kScriptLimit = absl::Minutes(10);
constexpr char kInstallHint[] =
    "run deploy/install-deps.sh as root (it installs python3-matplotlib)";

int Error(absl::string_view message) {
  std::fprintf(stderr, "tern plot: error: %s\n", std::string(message).c_str());
  return process::kExitPermanent;
}

// What the script reported on its way (plot_charts.py's protocol).
struct ScriptReport {
  int charts = 0;
};

// One line of the script's output: a chart written or a note go to stdout;
// anything else (a traceback, matplotlib's warnings) to stderr.
void HandleScriptLine(absl::string_view line, ScriptReport* report) {
  const std::vector<std::string> fields = absl::StrSplit(line, '\t');
  if (fields.size() == 5 && fields[0] == "wrote") {
    ++report->charts;
    std::printf("tern plot: [%s/%s] %s: %s\n", fields[1].c_str(),
                fields[2].c_str(), fields[3].c_str(), fields[4].c_str());
  } else if (fields.size() == 2 && fields[0] == "note") {
    std::printf("tern plot: note: %s\n", fields[1].c_str());
  } else {
    std::fprintf(stderr, "tern plot: [python] %s\n", std::string(line).c_str());
  }
  std::fflush(stdout);
}

// Waits for the script, at most kScriptLimit; a Ctrl-C or SIGTERM stops it.
int WaitForScript(ProcessGroup& group, const std::string& python) {
  const absl::Time deadline = absl::Now() + kScriptLimit;
  while (group.running(0)) {
    group.Poll(absl::Milliseconds(200));
    if (group.interrupt_signal() != 0) {
      group.StopAll(absl::Seconds(2));
      return process::ExitCodeForSignal(group.interrupt_signal());
    }
    if (absl::Now() > deadline) {
      group.StopAll(absl::Seconds(2));
      return Error(absl::StrCat("the plotting script did not finish in ",
                                absl::FormatDuration(kScriptLimit)));
    }
  }
  const ChildExit& exit = *group.exit(0);
  if (exit.success()) return process::kExitOk;
  if (!exit.signaled() && exit.code_or_signal() == kNoMatplotlib) {
    return Error(
        absl::StrCat("matplotlib is missing for ", python, "; ", kInstallHint));
  }
  return Error(absl::StrCat("the plotting script failed (", exit.Describe(),
                            "); its output is above"));
}

// Runs the embedded script on `input_path` with `python`.
int RunScript(const std::string& python, const std::string& input_path,
              ScriptReport* report) {
  absl::StatusOr<std::unique_ptr<ProcessGroup>> group = ProcessGroup::Create(
      [report](const std::string&, absl::string_view line) {
        HandleScriptLine(line, report);
      });
  if (!group.ok()) return Error(group.status().message());
  ChildSpec spec;
  spec.name = "python";
  spec.path = python;
  spec.argv = {python, "-c", kPlotScript, input_path};
  if (absl::StatusOr<size_t> child = (*group)->Spawn(spec); !child.ok()) {
    return Error(child.status().message());
  }
  return WaitForScript(**group, python);
}

absl::StatusOr<std::vector<RunSeries>> LoadRuns(const PlotOptions& options) {
  std::vector<RunSeries> runs;
  for (const std::string& dir : options.run_dirs) {
    absl::StatusOr<RunSeries> run = LoadRun(dir);
    if (!run.ok()) return run.status();
    if (run->bad_lines > 0) {
      std::printf(
          "tern plot: note: %s: skipped %lld line(s) that do not "
          "parse\n",
          dir.c_str(), static_cast<long long>(run->bad_lines));
    }
    runs.push_back(*std::move(run));
  }
  if (absl::Status status = LabelRuns(options.labels, &runs); !status.ok()) {
    return status;
  }
  return runs;
}

// Writes the script's input to a new file in `out_dir`.
absl::StatusOr<std::string> WriteInput(const std::string& text,
                                       const std::string& out_dir) {
  std::string path = absl::StrCat(out_dir, "/.tern-plot-input-XXXXXX");
  const int fd = ::mkstemp(path.data());
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create a file in ", out_dir));
  }
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  ::close(fd);
  if (written < text.size()) {
    ::unlink(path.c_str());
    return absl::FailedPreconditionError(absl::StrCat("cannot write ", path));
  }
  return path;
}

}  // namespace

void AddPlotFlags(CLI::App* app, PlotOptions* options) {
  app->add_option("RUN_DIR", options->run_dirs,
                  "run directories of tern launch (its --out_dir: "
                  "worker-<i>.jsonl and, once the run ended, summary.json); "
                  "several runs share each chart, one line per run")
      ->required();
  flags::Flag(app, "out", &options->out_dir,
              "folder for the PNG files, created when missing (default: "
              "RUN_DIR/plots for one run, else plots/ in the first run's "
              "parent folder)");
  // One word split here: a list option of CLI11 would also swallow the
  // RUN_DIRs after it.
  app->add_option_function<std::string>(
         "--labels",
         [options](const std::string& text) {
           options->labels = absl::StrSplit(text, ',');
         },
         "comma-separated names of the runs on the charts, one per RUN_DIR "
         "(default: the codec, or the --geo mode, from summary.json, else "
         "the folder's name)")
      ->envname("TERN_LABELS");
  flags::Flag(app, "python", &options->python,
              "the Python 3 that draws, with matplotlib (Debian: "
              "python3-matplotlib)");
  app->footer(
      "Charts (OUT/<name>.png): loss_step, loss_time, accuracy_step and "
      "accuracy_time (when worker 0 evaluated), bytes_step (push and pull), "
      "time_split (compute, encode, network, decode per step), wan_bytes "
      "(geo runs), time_to_target (with --target_accuracy), overview (four "
      "on one page). Example: tern plot runs/a runs/b --labels fp32,terngrad "
      "--out charts");
}

std::string PlotOutDir(const PlotOptions& options) {
  if (!options.out_dir.empty()) return options.out_dir;
  fs::path first(options.run_dirs.front());
  if (!first.has_filename()) first = first.parent_path();  // "runs/a/"
  if (options.run_dirs.size() == 1) return (first / "plots").string();
  const fs::path parent = first.parent_path();
  return (parent.empty() ? fs::path("plots") : parent / "plots").string();
}

int RunPlot(const PlotOptions& options) {
  absl::StatusOr<std::vector<RunSeries>> runs = LoadRuns(options);
  if (!runs.ok()) return Error(runs.status().message());
  if (::access(options.python.c_str(), X_OK) != 0) {
    return Error(
        absl::StrCat("no Python at ", options.python, "; ", kInstallHint));
  }
  const std::string out_dir = PlotOutDir(options);
  std::error_code error;
  fs::create_directories(out_dir, error);
  if (error) {
    return Error(
        absl::StrCat("cannot create ", out_dir, ": ", error.message()));
  }
  absl::StatusOr<std::string> input =
      WriteInput(PlotInput(*runs, out_dir).dump(), out_dir);
  if (!input.ok()) return Error(input.status().message());
  ScriptReport report;
  const int code = RunScript(options.python, *input, &report);
  ::unlink(input->c_str());
  if (code == process::kExitOk) {
    std::printf("tern plot: %d chart(s) of %zu run(s) in %s\n", report.charts,
                runs->size(), out_dir.c_str());
  }
  return code;
}

}  // namespace tern
