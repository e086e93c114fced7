// The measured parts of a run's RunReport (tern/run_summary.h): when worker
// 0 reached --target_accuracy, and what a geo run sent over the WAN, read
// from the workers' records and from the servers' reports.
#ifndef TERN_TERN_GEO_REPORT_H_
#define TERN_TERN_GEO_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/records/server_report.h"
#include "tern/metrics_file.h"

namespace tern {

// The first record of `reference` (worker 0's, in file order) whose test
// accuracy is at least `target`: its step, and its wall_s less the time
// spent evaluating up to and including it (every record's eval_s), so that
// how often a run evaluates does not count as training time. Nothing when
// none is.
struct TargetReached {
  uint64_t step = 0;
  double wall_s = 0;  // training time to the target, evaluations excluded
};
std::optional<TargetReached> TimeToTarget(
    const std::vector<MetricsRecord>& reference, double target);

// Bytes each way, summed.
struct WanBytes {
  double up = 0;
  double down = 0;
};

// baseline/terngrad: the shards sit in the GS's region, so every byte a
// worker sends or receives crosses the WAN: the serialized requests
// (push_msg_bytes: scaler sharing and push) and responses (pull_msg_bytes)
// of every record of every worker.
WanBytes WorkerWanBytes(
    const std::vector<std::vector<MetricsRecord>>& per_worker);

// gaia/weightgrad: what crossed the WAN, from the servers' own reports
// (common/records/server_report.h), never from their logs. `lpss[d]` is
// data center d's LPS report, absent when it left none (it was killed).
// When every LPS reported, their own counts: each is what one data
// center's link carried (payload bytes of the updates sent and the answers
// received). Otherwise the global server's: up = the updates it accepted,
// down = `datacenters` x one copy of each round's answer. `bytes` is absent
// when neither is there; `source` says which it was, or why none.
struct WanMeasurement {
  std::optional<WanBytes> bytes;
  std::string source;
};
WanMeasurement LpsRunWanBytes(
    const std::vector<std::optional<records::LpsReport>>& lpss,
    const std::optional<records::GlobalServerReport>& global,
    uint32_t datacenters);

// Each LPS's parameter checksum as it stopped, "" for one without a report.
std::vector<std::string> LpsChecksums(
    const std::vector<std::optional<records::LpsReport>>& lpss);

// The reports under `out_dir` (tern/geo_plan.h, ReportFileOf): data center
// d's LPS's for d < datacenters, and the global server's. A report that is
// missing or unreadable is absent.
std::vector<std::optional<records::LpsReport>> LpsReportsIn(
    const std::string& out_dir, uint32_t datacenters);
std::optional<records::GlobalServerReport> GlobalServerReportIn(
    const std::string& out_dir);

}  // namespace tern

#endif  // TERN_TERN_GEO_REPORT_H_
