// The data of `tern plot` (tern/plot_command.h): what one run directory of
// `tern launch` holds, its workers' JSONL records (worker-<i>.jsonl,
// common/records/step_record.h) and, when the run has ended, its
// summary.json (tern/run_summary.h), reduced to the series the charts
// draw. The reading is done here, with the records' own parser, so that the
// plotting script only draws and the schema stays in one place.
#ifndef TERN_TERN_PLOT_DATA_H_
#define TERN_TERN_PLOT_DATA_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tern {

// One run, one entry per step that any worker recorded, in step order.
struct RunSeries {
  std::string dir;
  // The run's name on the charts (LabelRuns).
  std::string label;
  // From summary.json, "" when it is absent or does not say: the codec of a
  // plain launch and the --geo mode of a geo run.
  std::string codec;
  std::string geo_mode;

  uint32_t workers = 0;
  // The worker whose clock and evaluations the charts use: worker 0, as in
  // the summary, or the lowest id that wrote records.
  uint32_t reference_worker = 0;
  // Lines that did not parse (a worker killed mid-line), skipped.
  int64_t bad_lines = 0;

  std::vector<uint64_t> step;
  // The reference worker's seconds since training began (NaN at a step it
  // did not record).
  std::vector<double> wall_s;
  // Means over the workers that recorded the step: local batch loss, codec
  // payload bytes per direction, and the time split of the step.
  std::vector<double> loss;
  std::vector<double> push_bytes;
  std::vector<double> pull_bytes;
  std::vector<double> compute_s;
  std::vector<double> encode_s;
  std::vector<double> network_s;
  std::vector<double> decode_s;
  // What fp32 would send per step and direction (the records' fp32_bytes).
  double fp32_bytes = 0;

  // The reference worker's test-set evaluations.
  std::vector<uint64_t> eval_step;
  std::vector<double> eval_wall_s;
  std::vector<double> test_accuracy;

  // summary.json's target accuracy and time to reach it (worker 0's
  // training seconds, evaluations excluded), and a geo run's WAN bytes.
  std::optional<double> target_accuracy;
  std::optional<double> time_to_target_s;
  std::optional<double> wan_bytes_up;
  std::optional<double> wan_bytes_down;
};

// Reads the run in `dir`. NOT_FOUND naming `dir` when it is not a folder
// or holds no records (no worker-<i>.jsonl, or none with a line that
// parses); INVALID_ARGUMENT naming the file when summary.json is there but
// is not a JSON object. A record repeated for the same worker and step (a
// worker that resumed from a checkpoint appends to its file) counts once,
// the last one.
absl::StatusOr<RunSeries> LoadRun(const std::string& dir);

// Names every run: labels[i] when given, else the geo mode, else the
// codec, else the folder's name; runs that would share a name are told
// apart by their folder's name. INVALID_ARGUMENT when `labels` is neither
// empty nor one per run.
absl::Status LabelRuns(const std::vector<std::string>& labels,
                       std::vector<RunSeries>* runs);

// The plotting script's input: {"out_dir": ..., "runs": [...]}, each run
// with the fields of RunSeries (NaN and absent values as null).
nlohmann::json PlotInput(const std::vector<RunSeries>& runs,
                         const std::string& out_dir);

}  // namespace tern

#endif  // TERN_TERN_PLOT_DATA_H_
