// tern/plot_charts.py, embedded in the binary (tern/BUILD, genrule
// plot_script_cc), so that `tern plot` runs the same from bazel-bin, an
// install or a container image without looking for a file.
#ifndef TERN_TERN_PLOT_SCRIPT_H_
#define TERN_TERN_PLOT_SCRIPT_H_

namespace tern {

// The script's text, for `python3 -c`.
extern const char kPlotScript[];

}  // namespace tern

#endif  // TERN_TERN_PLOT_SCRIPT_H_
