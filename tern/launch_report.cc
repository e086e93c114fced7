#include "tern/launch_report.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/records/json_file.h"
#include "kernels/payload.h"
#include "tern/geo_report.h"
#include "tern/metrics_file.h"

namespace tern {
namespace {

std::vector<std::vector<MetricsRecord>> ReadWorkerRecords(
    const LaunchContext& run) {
  std::vector<std::vector<MetricsRecord>> records(run.options->workers);
  for (uint32_t w = 0; w < run.options->workers; ++w) {
    MetricsTail tail(absl::StrCat(run.out_dir, "/worker-", w, ".jsonl"));
    records[w] = tail.ReadNew();
  }
  return records;
}

// gaia/weightgrad: the LPSs' checksums and what crossed their WAN links,
// from the servers' reports.
void MeasureLpsRun(const LaunchContext& run, RunReport* report) {
  const uint32_t datacenters = run.options->geo.datacenters;
  const std::vector<std::optional<records::LpsReport>> lpss =
      LpsReportsIn(run.out_dir, datacenters);
  report->lps_checksums = LpsChecksums(lpss);
  const WanMeasurement wan =
      LpsRunWanBytes(lpss, GlobalServerReportIn(run.out_dir), datacenters);
  if (wan.bytes.has_value()) {
    report->wan_bytes_up = wan.bytes->up;
    report->wan_bytes_down = wan.bytes->down;
  }
  report->wan_bytes_source = wan.source;
}

}  // namespace

RunReport MeasureRun(const LaunchContext& run, const JobTimes& times,
                     TrainingSummary* training) {
  const LaunchOptions& options = *run.options;
  const std::vector<std::vector<MetricsRecord>> records =
      ReadWorkerRecords(run);
  *training = Summarize(records);
  RunReport report;
  report.target_accuracy = options.target_accuracy;
  if (options.target_accuracy > 0) {
    if (std::optional<TargetReached> reached =
            TimeToTarget(records.front(), options.target_accuracy)) {
      report.time_to_target_s = reached->wall_s;
      report.step_to_target = reached->step;
    }
  }
  report.job_wall_s = absl::ToDoubleSeconds(times.job_end - times.job_start);
  if (!run.geo()) return report;
  report.geo_mode = std::string(GeoModeName(run.mode));
  report.datacenters = options.geo.datacenters;
  report.workers_per_dc = options.geo.workers_per_dc;
  report.emulate_wan = run.wan();
  report.wan_mbit = options.geo.wan_mbit;
  report.lps_mode = UsesLps(run.mode);
  if (UsesLps(run.mode)) {
    MeasureLpsRun(run, &report);
  } else {
    const WanBytes bytes = WorkerWanBytes(records);
    report.wan_bytes_up = bytes.up;
    report.wan_bytes_down = bytes.down;
    report.wan_bytes_source =
        "the workers' push and pull messages, all to shards in the GS's "
        "region";
  }
  return report;
}

void CheckReplicas(const LaunchContext& run, const TrainingSummary& training,
                   const RunReport& report) {
  if (!UsesLps(run.mode) && !training.checksums_agree) {
    // Every worker exited 0, yet the replicas are not proven identical.
    run.outcome->Fail(
        "", "the workers' final param_checksum values differ or are missing",
        1);
  }
  if (UsesLps(run.mode) &&
      std::all_of(report.lps_checksums.begin(), report.lps_checksums.end(),
                  [](const std::string& c) { return !c.empty(); }) &&
      !LpsChecksumsAgree(report)) {
    // Every data center must end on the same model (the final round).
    run.outcome->Fail("", "the LPSs' final parameter checksums differ", 1);
  }
}

int FinishRun(const LaunchContext& run, const JobTimes& times) {
  LaunchOutcome& outcome = *run.outcome;
  outcome.children = run.children->Ends();
  TrainingSummary training;
  const RunReport report = MeasureRun(run, times, &training);
  CheckReplicas(run, training, report);
  outcome.wall_s = absl::ToDoubleSeconds(absl::Now() - times.launch_start);
  const std::string summary_path = absl::StrCat(run.out_dir, "/summary.json");
  nlohmann::ordered_json document = SummaryDocument(outcome, training, report);
  // --tls: every link was mutual TLS with the run's certificates (null:
  // plaintext, or whatever TERN_TLS_* the children inherited).
  nlohmann::ordered_json tls = nullptr;
  if (!run.tls_dir.empty()) {
    tls = {{"mutual", true}, {"certs_dir", run.tls_dir}};
  }
  document["tls"] = tls;
  // --save_model: where worker 0 wrote the trained model (null: nowhere).
  const std::string& model_file = run.options->job.save_model;
  const bool model_written = outcome.exit_code == 0 && !model_file.empty() &&
                             std::filesystem::exists(model_file);
  document["model_file"] = model_written ? nlohmann::ordered_json(model_file)
                                         : nlohmann::ordered_json(nullptr);
  // The codec names the run on `tern plot`'s charts; a geo run is named by
  // its mode, which decides the codec (tern/geo_plan.h).
  document["codec"] =
      run.geo()
          ? nlohmann::ordered_json(nullptr)
          : nlohmann::ordered_json(kernels::CodecName(run.options->job.codec));
  if (absl::Status status = records::WriteJsonFile(summary_path, document);
      !status.ok()) {
    run.console->Note(absl::StrCat("warning: ", status.message()));
  }
  std::string text = SummaryText(outcome, training, report);
  if (!run.tls_dir.empty()) {
    absl::StrAppend(&text, "  tls             mutual TLS on every link, "
                    "certificates in ", run.tls_dir, "\n");
  }
  if (model_written) {
    absl::StrAppend(&text, "  model           ", model_file,
                    " (worker 0's, --save_model)\n");
  }
  // The charts of the run, a failed one's included: its records tell why.
  if (training.workers_reporting > 0) {
    absl::StrAppend(&text, "plot it: tern plot ", run.out_dir, "\n");
  }
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  return outcome.exit_code;
}

}  // namespace tern
