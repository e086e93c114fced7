#include "tern/run_summary.h"

#include <string.h>

#include <cmath>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/checksum.h"
#include "common/process/exit_codes.h"
#include "nlohmann/json.hpp"

namespace tern {
namespace {

using Json = nlohmann::ordered_json;

// JSON has no NaN or infinity: those become null.
Json Number(double value) {
  return std::isfinite(value) ? Json(value) : Json(nullptr);
}

Json Number(const std::optional<double>& value) {
  return value.has_value() ? Number(*value) : Json(nullptr);
}

// Checksums, "" (none) as null.
Json Checksums(const std::vector<std::string>& checksums) {
  Json list = Json::array();
  for (const std::string& checksum : checksums) {
    list.push_back(checksum.empty() ? Json(nullptr) : Json(checksum));
  }
  return list;
}

// 1536 -> "1.50 KiB".
std::string Bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  return unit == 0 ? absl::StrFormat("%.0f B", bytes)
                   : absl::StrFormat("%.2f %s", bytes, units[unit]);
}

double Ratio(double numerator, double denominator) {
  return denominator > 0 ? numerator / denominator : 0;
}

// The "geo" member: null for a plain launch.
Json GeoJson(const RunReport& report) {
  if (report.geo_mode.empty()) return nullptr;
  std::optional<double> total;
  if (report.wan_bytes_up.has_value() && report.wan_bytes_down.has_value()) {
    total = *report.wan_bytes_up + *report.wan_bytes_down;
  }
  return {
      {"mode", report.geo_mode},
      {"datacenters", report.datacenters},
      {"workers_per_dc", report.workers_per_dc},
      {"emulate_wan", report.emulate_wan},
      {"wan_mbit", report.wan_mbit > 0 ? Number(report.wan_mbit) : nullptr},
      {"wan_bytes", Number(total)},
      {"wan_bytes_up", Number(report.wan_bytes_up)},
      {"wan_bytes_down", Number(report.wan_bytes_down)},
      {"wan_bytes_source", report.wan_bytes_source},
      {"lps_checksums",
       report.lps_mode ? Checksums(report.lps_checksums) : nullptr},
      {"lps_checksums_agree",
       report.lps_mode ? Json(LpsChecksumsAgree(report)) : nullptr},
  };
}

// The lines a target accuracy and a geo run add to the printed summary.
std::string ReportText(const RunReport& report) {
  std::string text;
  if (report.target_accuracy > 0) {
    absl::StrAppendFormat(&text, "  time to %.2f%%  ",
                          100 * report.target_accuracy);
    if (report.time_to_target_s.has_value()) {
      absl::StrAppendFormat(&text, "%.1f s (step %u, worker 0)\n",
                            *report.time_to_target_s,
                            report.step_to_target.value_or(0));
    } else {
      absl::StrAppend(&text, "not reached\n");
    }
  }
  if (report.geo_mode.empty()) return text;
  absl::StrAppendFormat(
      &text, "  geo             %s, %u data center(s) x %u worker(s), %s\n",
      report.geo_mode, report.datacenters, report.workers_per_dc,
      report.emulate_wan
          ? (report.wan_mbit > 0
                 ? absl::StrFormat("emulated WAN at %g mbit/s per link",
                                   report.wan_mbit)
                 : std::string("emulated WAN (tern-wan's default rate)"))
          : std::string("on loopback (no WAN emulation)"));
  if (report.wan_bytes_up.has_value() && report.wan_bytes_down.has_value()) {
    absl::StrAppendFormat(&text, "  WAN bytes       %s (up %s, down %s; %s)\n",
                          Bytes(*report.wan_bytes_up + *report.wan_bytes_down),
                          Bytes(*report.wan_bytes_up),
                          Bytes(*report.wan_bytes_down),
                          report.wan_bytes_source);
  } else {
    absl::StrAppend(&text, "  WAN bytes       unavailable (",
                    report.wan_bytes_source, ")\n");
  }
  absl::StrAppendFormat(&text, "  job wall time   %.1f s\n", report.job_wall_s);
  return text;
}

}  // namespace

TrainingSummary Summarize(
    const std::vector<std::vector<MetricsRecord>>& per_worker) {
  TrainingSummary summary;
  double records = 0;
  for (const std::vector<MetricsRecord>& worker : per_worker) {
    std::string checksum;
    if (!worker.empty()) {
      ++summary.workers_reporting;
      if (worker.back().final) {
        ++summary.workers_finished;
        const std::optional<uint64_t>& last = worker.back().param_checksum;
        if (last.has_value()) checksum = FormatChecksum(*last);
      }
    }
    summary.final_checksums.push_back(checksum);
    for (const MetricsRecord& record : worker) {
      records += 1;
      summary.push_bytes_per_step += record.push_bytes;
      summary.pull_bytes_per_step += record.pull_bytes;
      summary.push_msg_bytes_per_step += record.push_msg_bytes;
      summary.pull_msg_bytes_per_step += record.pull_msg_bytes;
      summary.fp32_bytes_per_step += record.fp32_bytes;
    }
  }
  if (records > 0) {
    summary.push_bytes_per_step /= records;
    summary.pull_bytes_per_step /= records;
    summary.push_msg_bytes_per_step /= records;
    summary.pull_msg_bytes_per_step /= records;
    summary.fp32_bytes_per_step /= records;
  }
  summary.push_ratio_vs_fp32 =
      Ratio(summary.fp32_bytes_per_step, summary.push_bytes_per_step);
  summary.pull_ratio_vs_fp32 =
      Ratio(summary.fp32_bytes_per_step, summary.pull_bytes_per_step);

  summary.checksums_agree = !per_worker.empty();
  for (const std::string& checksum : summary.final_checksums) {
    if (checksum.empty() || checksum != summary.final_checksums.front()) {
      summary.checksums_agree = false;
    }
  }

  if (!per_worker.empty() && !per_worker.front().empty()) {
    const std::vector<MetricsRecord>& reference = per_worker.front();
    const MetricsRecord& last = reference.back();
    summary.steps = last.step + 1;
    summary.train_s = last.wall_s;
    summary.steps_per_s =
        Ratio(static_cast<double>(summary.steps), summary.train_s);
    summary.final_loss = last.loss;
    // The final record carries an evaluation (launch never turns it off); a
    // run that stopped early reports its latest one.
    for (auto it = reference.rbegin(); it != reference.rend(); ++it) {
      if (it->test_accuracy.has_value()) {
        summary.final_test_accuracy = it->test_accuracy;
        summary.final_test_loss = it->test_loss;
        break;
      }
    }
  }
  return summary;
}

const char* RunStatusName(RunStatus status) {
  switch (status) {
    case RunStatus::kOk:
      return "ok";
    case RunStatus::kFailed:
      return "failed";
    case RunStatus::kInterrupted:
      return "interrupted";
  }
  return "unknown";
}

void LaunchOutcome::Fail(std::string child, std::string why, int code) {
  if (!ok()) return;
  status = RunStatus::kFailed;
  failed_child = std::move(child);
  failure = std::move(why);
  exit_code = code;
}

void LaunchOutcome::Interrupt(int signal) {
  if (!ok()) return;
  status = RunStatus::kInterrupted;
  failure = absl::StrCat("received ", strsignal(signal));
  exit_code = process::ExitCodeForSignal(signal);
}

bool LpsChecksumsAgree(const RunReport& report) {
  if (report.lps_checksums.empty()) return false;
  for (const std::string& checksum : report.lps_checksums) {
    if (checksum.empty() || checksum != report.lps_checksums.front()) {
      return false;
    }
  }
  return true;
}

nlohmann::ordered_json SummaryDocument(const LaunchOutcome& outcome,
                                       const TrainingSummary& training,
                                       const RunReport& report) {
  Json children = Json::array();
  for (const auto& [name, exit] : outcome.children) {
    children.push_back({{"name", name}, {"exit", exit}});
  }
  const Json json = {
      {"status", RunStatusName(outcome.status)},
      {"exit_code", outcome.exit_code},
      {"failed_child", outcome.failed_child},
      {"failure", outcome.failure},
      {"out_dir", outcome.out_dir},
      {"shards", outcome.shards},
      {"workers", outcome.workers},
      {"total_steps", outcome.total_steps},
      {"wall_s", Number(outcome.wall_s)},
      {"workers_reporting", training.workers_reporting},
      {"workers_finished", training.workers_finished},
      {"steps", training.steps},
      {"train_s", Number(training.train_s)},
      {"steps_per_s", Number(training.steps_per_s)},
      {"final_loss", Number(training.final_loss)},
      {"final_test_accuracy", Number(training.final_test_accuracy)},
      {"final_test_loss", Number(training.final_test_loss)},
      {"push_bytes_per_step", Number(training.push_bytes_per_step)},
      {"pull_bytes_per_step", Number(training.pull_bytes_per_step)},
      {"push_msg_bytes_per_step", Number(training.push_msg_bytes_per_step)},
      {"pull_msg_bytes_per_step", Number(training.pull_msg_bytes_per_step)},
      {"fp32_bytes_per_step", Number(training.fp32_bytes_per_step)},
      {"push_ratio_vs_fp32", Number(training.push_ratio_vs_fp32)},
      {"pull_ratio_vs_fp32", Number(training.pull_ratio_vs_fp32)},
      {"param_checksums", Checksums(training.final_checksums)},
      {"checksums_agree", training.checksums_agree},
      {"children", children},
      {"target_accuracy",
       report.target_accuracy > 0 ? Number(report.target_accuracy) : nullptr},
      {"time_to_target_s", Number(report.time_to_target_s)},
      {"step_to_target", report.step_to_target.has_value()
                             ? Json(*report.step_to_target)
                             : Json(nullptr)},
      {"job_wall_s", Number(report.job_wall_s)},
      {"geo", GeoJson(report)},
  };
  return json;
}

std::string SummaryJson(const LaunchOutcome& outcome,
                        const TrainingSummary& training,
                        const RunReport& report) {
  // Invalid UTF-8 (a child's odd name) is replaced, never thrown, as
  // records::WriteJsonFile does.
  return SummaryDocument(outcome, training, report)
             .dump(2, ' ', false, Json::error_handler_t::replace) +
         "\n";
}

std::string SummaryText(const LaunchOutcome& outcome,
                        const TrainingSummary& training,
                        const RunReport& report) {
  std::string text =
      absl::StrCat("tern launch: ", RunStatusName(outcome.status), " (exit ",
                   outcome.exit_code, "), output in ", outcome.out_dir, "\n");
  if (!outcome.failure.empty()) {
    absl::StrAppend(&text, "  stopped by      ",
                    outcome.failed_child.empty() ? "" : outcome.failed_child,
                    outcome.failed_child.empty() ? "" : ": ", outcome.failure,
                    "\n");
  }
  absl::StrAppendFormat(
      &text, "  workers         %u of %u finished, %u shard(s)\n",
      training.workers_finished, outcome.workers, outcome.shards);
  absl::StrAppendFormat(&text,
                        "  steps           %u of %u in %.1f s (%.2f steps/s)\n",
                        training.steps, outcome.total_steps, training.train_s,
                        training.steps_per_s);
  if (training.final_test_accuracy.has_value()) {
    absl::StrAppendFormat(&text, "  test accuracy   %.2f%% (test loss %.4f)\n",
                          100 * *training.final_test_accuracy,
                          training.final_test_loss.value_or(NAN));
  }
  if (training.final_loss.has_value()) {
    absl::StrAppendFormat(&text, "  last loss       %.4f\n",
                          *training.final_loss);
  }
  if (training.workers_reporting > 0) {
    absl::StrAppendFormat(
        &text,
        "  push per step   %s (%.2fx less than fp32's %s), %s on the "
        "wire\n",
        Bytes(training.push_bytes_per_step), training.push_ratio_vs_fp32,
        Bytes(training.fp32_bytes_per_step),
        Bytes(training.push_msg_bytes_per_step));
    absl::StrAppendFormat(
        &text, "  pull per step   %s (%.2fx less than fp32), %s on the wire\n",
        Bytes(training.pull_bytes_per_step), training.pull_ratio_vs_fp32,
        Bytes(training.pull_msg_bytes_per_step));
    absl::StrAppend(
        &text, "  replicas        ",
        report.lps_mode
            ? absl::StrCat(
                  "workers' copies differ by design (each loads its own "
                  "quantized weights); LPS checksums ",
                  LpsChecksumsAgree(report)
                      ? absl::StrCat("agree (", report.lps_checksums.front(),
                                     ")")
                      : absl::StrCat(
                            "NOT confirmed equal: [",
                            absl::StrJoin(
                                report.lps_checksums, ", ",
                                [](std::string* out, const std::string& c) {
                                  out->append(c.empty() ? "none" : c);
                                }),
                            "]"))
        : training.checksums_agree
            ? absl::StrCat("identical (param_checksum ",
                           training.final_checksums.front(), ")")
            : absl::StrCat(
                  "NOT confirmed identical: final checksums [",
                  absl::StrJoin(training.final_checksums, ", ",
                                [](std::string* out, const std::string& c) {
                                  out->append(c.empty() ? "none" : c);
                                }),
                  "]"),
        "\n");
  }
  absl::StrAppend(&text, ReportText(report));
  return text;
}

}  // namespace tern
