// The summary `tern launch` prints and writes to OUT/summary.json when a run
// ends: accuracy, speed, bytes on the wire per step against fp32 (the
// compression TernGrad buys, Wen et al. 2017 section 5), and whether every
// worker ended with the same parameters (parameter localization, DESIGN
// section 3).
#ifndef TERN_TERN_RUN_SUMMARY_H_
#define TERN_TERN_RUN_SUMMARY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "tern/metrics_file.h"

namespace tern {

// What the workers' records say.
struct TrainingSummary {
  // Workers that wrote at least one record / a final record.
  uint32_t workers_reporting = 0;
  uint32_t workers_finished = 0;
  // From worker 0 (the reference replica): steps completed, seconds of
  // training, and steps per second (synchronous steps: every worker makes
  // the same number).
  uint64_t steps = 0;
  double train_s = 0;
  double steps_per_s = 0;
  std::optional<double> final_loss;
  std::optional<double> final_test_accuracy;
  std::optional<double> final_test_loss;
  // Means over every step of every worker (one record = one worker's step).
  double push_bytes_per_step = 0;
  double pull_bytes_per_step = 0;
  double push_msg_bytes_per_step = 0;
  double pull_msg_bytes_per_step = 0;
  double fp32_bytes_per_step = 0;
  // fp32 bytes / codec bytes (0 when nothing was sent).
  double push_ratio_vs_fp32 = 0;
  double pull_ratio_vs_fp32 = 0;
  // Each worker's checksum on its final record ("" when it has none).
  std::vector<std::string> final_checksums;
  // True when every worker has a final checksum and they are all equal.
  bool checksums_agree = false;
};

// `per_worker[i]` holds worker i's records in file order.
TrainingSummary Summarize(
    const std::vector<std::vector<MetricsRecord>>& per_worker);

// How a launch ended. The first failure or interruption decides it: later
// ones are its consequences (children stopped because of it).
enum class RunStatus { kOk, kFailed, kInterrupted };

// "ok", "failed", "interrupted": summary.json's "status".
const char* RunStatusName(RunStatus status);

// What happened to the processes.
struct LaunchOutcome {
  bool ok() const { return status == RunStatus::kOk; }
  // Records a failure unless the run has already failed or been
  // interrupted: `child` ("worker/1", or "launch" for launch's own), `why`
  // and the exit code the launcher returns.
  void Fail(std::string child, std::string why, int code);
  // Records an interruption by `signal` unless the run has already ended
  // otherwise: exit code 128 + signal.
  void Interrupt(int signal);

  RunStatus status = RunStatus::kOk;
  int exit_code = 0;
  // The child whose failure stopped the run and why ("worker/1",
  // "exit code 1"), or launch's own reason; empty when ok.
  std::string failed_child;
  std::string failure;
  std::string out_dir;
  uint32_t shards = 0;
  uint32_t workers = 0;
  uint64_t total_steps = 0;
  double wall_s = 0;
  // Every child's name and how it ended, in start order.
  std::vector<std::pair<std::string, std::string>> children;
};

// What a run with --target_accuracy or --geo adds (tern/geo_report.h
// fills the measured parts).
struct RunReport {
  // --target_accuracy (0: none) and when worker 0 first evaluated at or
  // above it: its step and its seconds since training began.
  double target_accuracy = 0;
  std::optional<double> time_to_target_s;
  std::optional<uint64_t> step_to_target;
  // Seconds from the first child's start until the last worker ended: the
  // job without launch's own setup (an emulated WAN's build and check).
  double job_wall_s = 0;

  // --geo ("" for a plain launch) and its shape.
  std::string geo_mode;
  uint32_t datacenters = 0;
  uint32_t workers_per_dc = 0;
  bool emulate_wan = false;
  double wan_mbit = 0;  // 0: tern-wan's default
  // Bytes that cross (or, without --emulate_wan, would cross) the WAN, in
  // each direction; absent when they could not be measured, and then
  // wan_bytes_source says why.
  std::optional<double> wan_bytes_up;
  std::optional<double> wan_bytes_down;
  std::string wan_bytes_source;
  // gaia/weightgrad: each worker loads its own quantized copy of its LPS's
  // weights, so the workers' checksums differ by design; the LPSs' final
  // checksums (from their logs, "" when not found) are what must agree.
  bool lps_mode = false;
  std::vector<std::string> lps_checksums;
};

// True when every LPS reported a final checksum and they are all equal.
bool LpsChecksumsAgree(const RunReport& report);

// OUT/summary.json: one JSON object (keys in a fixed order), written with
// common/records' WriteJsonFile.
nlohmann::ordered_json SummaryDocument(const LaunchOutcome& outcome,
                                       const TrainingSummary& training,
                                       const RunReport& report = RunReport());

// SummaryDocument as the file's text.
std::string SummaryJson(const LaunchOutcome& outcome,
                        const TrainingSummary& training,
                        const RunReport& report = RunReport());

// The human-readable block printed at the end of a run.
std::string SummaryText(const LaunchOutcome& outcome,
                        const TrainingSummary& training,
                        const RunReport& report = RunReport());

}  // namespace tern

#endif  // TERN_TERN_RUN_SUMMARY_H_
