#include "tern/geo_report.h"

#include "absl/strings/str_cat.h"
#include "tern/geo_plan.h"

namespace tern {

std::optional<TargetReached> TimeToTarget(
    const std::vector<MetricsRecord>& reference, double target) {
  double eval_s = 0;
  for (const MetricsRecord& record : reference) {
    eval_s += record.eval_s;
    if (record.test_accuracy.has_value() && *record.test_accuracy >= target) {
      return TargetReached{record.step, record.wall_s - eval_s};
    }
  }
  return std::nullopt;
}

WanBytes WorkerWanBytes(
    const std::vector<std::vector<MetricsRecord>>& per_worker) {
  WanBytes bytes;
  for (const std::vector<MetricsRecord>& worker : per_worker) {
    for (const MetricsRecord& record : worker) {
      bytes.up += record.push_msg_bytes;
      bytes.down += record.pull_msg_bytes;
    }
  }
  return bytes;
}

WanMeasurement LpsRunWanBytes(
    const std::vector<std::optional<records::LpsReport>>& lpss,
    const std::optional<records::GlobalServerReport>& global,
    uint32_t datacenters) {
  WanBytes total;
  bool complete = true;
  uint32_t counted = 0;
  for (const std::optional<records::LpsReport>& lps : lpss) {
    if (!lps.has_value()) continue;
    total.up += static_cast<double>(lps->wan_bytes_up);
    total.down += static_cast<double>(lps->wan_bytes_down);
    complete = complete && lps->final_sync_done;
    ++counted;
  }
  if (counted == datacenters && datacenters > 0) {
    return {total,
            complete ? "update and answer payloads from the LPSs' reports"
                     : "update and answer payloads from the LPSs' reports "
                       "(not every LPS finished its final round)"};
  }
  if (global.has_value()) {
    return {WanBytes{static_cast<double>(global->bytes_in),
                     static_cast<double>(datacenters) *
                         static_cast<double>(global->bytes_out)},
            "update and answer payloads from the global server's report (an "
            "LPS left none); down = data centers x one answer per round"};
  }
  return {std::nullopt,
          "neither the LPSs nor the global server left a report"};
}

std::vector<std::string> LpsChecksums(
    const std::vector<std::optional<records::LpsReport>>& lpss) {
  std::vector<std::string> checksums;
  for (const std::optional<records::LpsReport>& lps : lpss) {
    checksums.push_back(lps.has_value() ? lps->param_checksum : "");
  }
  return checksums;
}

std::vector<std::optional<records::LpsReport>> LpsReportsIn(
    const std::string& out_dir, uint32_t datacenters) {
  std::vector<std::optional<records::LpsReport>> reports;
  for (uint32_t d = 0; d < datacenters; ++d) {
    absl::StatusOr<records::LpsReport> report = records::ReadLpsReport(
        ReportFileOf(out_dir, absl::StrCat("lps/", d)));
    reports.push_back(report.ok() ? std::optional(*std::move(report))
                                  : std::nullopt);
  }
  return reports;
}

std::optional<records::GlobalServerReport> GlobalServerReportIn(
    const std::string& out_dir) {
  absl::StatusOr<records::GlobalServerReport> report =
      records::ReadGlobalServerReport(ReportFileOf(out_dir, "global"));
  if (!report.ok()) return std::nullopt;
  return *std::move(report);
}

}  // namespace tern
