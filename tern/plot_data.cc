#include "tern/plot_data.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "tern/metrics_file.h"

namespace tern {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Records of one worker by step.
using WorkerRecords = std::map<uint64_t, MetricsRecord>;

// worker-<i>.jsonl in `dir`, by worker id.
std::map<uint32_t, std::string> WorkerFiles(const std::string& dir) {
  std::map<uint32_t, std::string> files;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    absl::string_view name = entry.path().filename().native();
    uint32_t id = 0;
    if (absl::ConsumePrefix(&name, "worker-") &&
        absl::ConsumeSuffix(&name, ".jsonl") && absl::SimpleAtoi(name, &id)) {
      files[id] = entry.path().string();
    }
  }
  return files;
}

// Every record of the file, the last one of a repeated step; lines that do
// not parse are counted, as tern launch's own reader does.
WorkerRecords ReadWorker(const std::string& path, int64_t* bad_lines) {
  WorkerRecords records;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    absl::StatusOr<MetricsRecord> record = ParseMetricsLine(line);
    if (record.ok()) {
      records[record->step] = *std::move(record);
    } else {
      ++*bad_lines;
    }
  }
  return records;
}

// The sums over the workers that recorded one step.
struct StepSums {
  int workers = 0;
  double loss = 0, push = 0, pull = 0;
  double compute = 0, encode = 0, network = 0, decode = 0;
  double reference_wall_s = kNaN;
};

void AddWorker(const WorkerRecords& records, bool reference,
               std::map<uint64_t, StepSums>* steps, RunSeries* run) {
  for (const auto& [step, r] : records) {
    StepSums& sums = (*steps)[step];
    ++sums.workers;
    sums.loss += r.loss;
    sums.push += r.push_bytes;
    sums.pull += r.pull_bytes;
    sums.compute += r.compute_s;
    sums.encode += r.encode_s;
    sums.network += r.network_s;
    sums.decode += r.decode_s;
    run->fp32_bytes = std::max(run->fp32_bytes, double(r.fp32_bytes));
    if (!reference) continue;
    sums.reference_wall_s = r.wall_s;
    if (r.test_accuracy.has_value()) {
      run->eval_step.push_back(step);
      run->eval_wall_s.push_back(r.wall_s);
      run->test_accuracy.push_back(*r.test_accuracy);
    }
  }
}

void FillSeries(const std::map<uint64_t, StepSums>& steps, RunSeries* run) {
  for (const auto& [step, sums] : steps) {
    const double n = sums.workers;
    run->step.push_back(step);
    run->wall_s.push_back(sums.reference_wall_s);
    run->loss.push_back(sums.loss / n);
    run->push_bytes.push_back(sums.push / n);
    run->pull_bytes.push_back(sums.pull / n);
    run->compute_s.push_back(sums.compute / n);
    run->encode_s.push_back(sums.encode / n);
    run->network_s.push_back(sums.network / n);
    run->decode_s.push_back(sums.decode / n);
  }
}

std::optional<double> NumberAt(const Json& object, const char* key) {
  if (!object.is_object()) return std::nullopt;
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::string StringAt(const Json& object, const char* key) {
  if (!object.is_object()) return "";
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

// summary.json, when the run has ended: it names the codec or geo mode and
// holds what the records do not (time to target, WAN bytes).
absl::Status ReadSummary(const std::string& dir, RunSeries* run) {
  const std::string path = absl::StrCat(dir, "/summary.json");
  std::ifstream in(path);
  if (!in) return absl::OkStatus();
  const Json json = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not a JSON object (a summary of tern launch)"));
  }
  run->codec = StringAt(json, "codec");
  run->target_accuracy = NumberAt(json, "target_accuracy");
  run->time_to_target_s = NumberAt(json, "time_to_target_s");
  const Json geo = json.value("geo", Json());
  run->geo_mode = StringAt(geo, "mode");
  run->wan_bytes_up = NumberAt(geo, "wan_bytes_up");
  run->wan_bytes_down = NumberAt(geo, "wan_bytes_down");
  return absl::OkStatus();
}

std::string FolderName(const std::string& dir) {
  fs::path path(dir);
  if (!path.has_filename()) path = path.parent_path();  // "runs/a/"
  return path.filename().string();
}

Json Numbers(const std::vector<double>& values) {
  Json array = Json::array();
  for (double value : values) {
    array.push_back(std::isfinite(value) ? Json(value) : Json(nullptr));
  }
  return array;
}

Json Optional(const std::optional<double>& value) {
  return value.has_value() && std::isfinite(*value) ? Json(*value)
                                                    : Json(nullptr);
}

}  // namespace

absl::StatusOr<RunSeries> LoadRun(const std::string& dir) {
  std::error_code error;
  if (!fs::is_directory(dir, error)) {
    return absl::NotFoundError(absl::StrCat(dir, ": no such run directory"));
  }
  const std::map<uint32_t, std::string> files = WorkerFiles(dir);
  if (files.empty()) {
    return absl::NotFoundError(
        absl::StrCat(dir,
                     " holds no step records (no worker-<i>.jsonl; tern launch "
                     "writes them into its --out_dir)"));
  }
  RunSeries run;
  run.dir = dir;
  std::map<uint64_t, StepSums> steps;
  for (const auto& [id, path] : files) {
    const WorkerRecords records = ReadWorker(path, &run.bad_lines);
    if (records.empty()) continue;
    const bool reference = run.workers == 0;  // the lowest id with records
    if (reference) run.reference_worker = id;
    ++run.workers;
    AddWorker(records, reference, &steps, &run);
  }
  if (run.workers == 0) {
    return absl::NotFoundError(absl::StrCat(
        dir, " holds no step records (", files.size(),
        " worker-<i>.jsonl file(s), none with a record that parses)"));
  }
  FillSeries(steps, &run);
  if (absl::Status status = ReadSummary(dir, &run); !status.ok()) {
    return status;
  }
  return run;
}

absl::Status LabelRuns(const std::vector<std::string>& labels,
                       std::vector<RunSeries>* runs) {
  if (!labels.empty() && labels.size() != runs->size()) {
    return absl::InvalidArgumentError(absl::StrCat("--labels gives ",
                                                   labels.size(), " names for ",
                                                   runs->size(), " run(s)"));
  }
  std::map<std::string, int> uses;
  for (size_t i = 0; i < runs->size(); ++i) {
    RunSeries& run = (*runs)[i];
    run.label = !labels.empty()         ? labels[i]
                : !run.geo_mode.empty() ? run.geo_mode
                : !run.codec.empty()    ? run.codec
                                        : FolderName(run.dir);
    ++uses[run.label];
  }
  for (RunSeries& run : *runs) {
    if (labels.empty() && uses[run.label] > 1) {
      run.label = absl::StrCat(run.label, " (", FolderName(run.dir), ")");
    }
  }
  return absl::OkStatus();
}

Json PlotInput(const std::vector<RunSeries>& runs, const std::string& out_dir) {
  Json array = Json::array();
  for (const RunSeries& run : runs) {
    array.push_back({
        {"dir", run.dir},
        {"label", run.label},
        {"codec", run.codec},
        {"geo_mode", run.geo_mode},
        {"workers", run.workers},
        {"reference_worker", run.reference_worker},
        {"step", run.step},
        {"wall_s", Numbers(run.wall_s)},
        {"loss", Numbers(run.loss)},
        {"push_bytes", Numbers(run.push_bytes)},
        {"pull_bytes", Numbers(run.pull_bytes)},
        {"compute_s", Numbers(run.compute_s)},
        {"encode_s", Numbers(run.encode_s)},
        {"network_s", Numbers(run.network_s)},
        {"decode_s", Numbers(run.decode_s)},
        {"fp32_bytes", run.fp32_bytes},
        {"eval_step", run.eval_step},
        {"eval_wall_s", Numbers(run.eval_wall_s)},
        {"test_accuracy", Numbers(run.test_accuracy)},
        {"target_accuracy", Optional(run.target_accuracy)},
        {"time_to_target_s", Optional(run.time_to_target_s)},
        {"wan_bytes_up", Optional(run.wan_bytes_up)},
        {"wan_bytes_down", Optional(run.wan_bytes_down)},
    });
  }
  return {{"out_dir", out_dir}, {"runs", array}};
}

}  // namespace tern
