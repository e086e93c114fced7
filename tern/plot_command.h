// `tern plot RUN_DIR... [--out DIR]`: PNG charts of one or several runs of
// `tern launch` (DESIGN section 8), from their workers' JSONL records and
// summary.json (tern/plot_data.h). The drawing is matplotlib's, from
// Debian's python3-matplotlib: the binary runs its embedded script
// (tern/plot_charts.py) with `--python` (default /usr/bin/python3, not
// whatever python3 is first on PATH, which may lack Debian's packages) as a
// child process, never through a shell.
//
// Charts (OUT/<name>.png; several runs: one line per run, named by codec,
// geo mode or --labels): loss_step, loss_time, accuracy_step and
// accuracy_time (when worker 0 evaluated), bytes_step (push and pull),
// time_split (compute, encode, network, decode per step), wan_bytes (geo
// runs), time_to_target (runs with --target_accuracy), and overview (four
// of them on one page, for the docs).
#ifndef TERN_TERN_PLOT_COMMAND_H_
#define TERN_TERN_PLOT_COMMAND_H_

#include <string>
#include <vector>

#include "common/flags/cli_fwd.h"

namespace tern {

struct PlotOptions {
  std::vector<std::string> run_dirs;
  // "" for the default: RUN_DIR/plots for one run, plots/ beside the first
  // run (in its parent folder) for several.
  std::string out_dir;
  // One name per run, in order; empty: from the summaries.
  std::vector<std::string> labels;
  std::string python = "/usr/bin/python3";
};

// The arguments and flags of `tern plot` on `app`, bound to `options`
// (which must outlive the parse).
void AddPlotFlags(CLI::App* app, PlotOptions* options);

// The folder the charts go to (options.out_dir or its default).
std::string PlotOutDir(const PlotOptions& options);

// The whole command: reads the runs, draws, prints a line per chart written
// (with its path) on stdout. Returns the exit code: 0, 1 for a run
// directory that is missing or holds no records, bad --labels, a missing
// python or matplotlib (the message says to run deploy/install-deps.sh),
// or a script that failed; 128 + n when stopped by signal n.
int RunPlot(const PlotOptions& options);

}  // namespace tern

#endif  // TERN_TERN_PLOT_COMMAND_H_
