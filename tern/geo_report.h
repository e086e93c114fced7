// The measured parts of a run's RunReport (tern/run_summary.h): when worker
// 0 reached --target_accuracy, and what a geo run sent over the WAN, read
// from the workers' records and from the servers' logs.
#ifndef TERN_TERN_GEO_REPORT_H_
#define TERN_TERN_GEO_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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

// gaia/weightgrad, from one LPS's log (server/local_ps.cc): its "final
// synchronization done after R rounds: U B up, D B down in all" line, or,
// when it has none (an LPS stopped before its final round), the sum of its
// per-round lines "round r ...: sent ..., U B up, D B down, ...". Payload
// bytes of the updates it sent and the answers it received. `complete` says
// which of the two it was. Nothing when the log has neither.
struct LpsWanBytes {
  WanBytes bytes;
  bool complete = false;
};
std::optional<LpsWanBytes> LpsLogWanBytes(
    const std::vector<std::string>& log_lines);

// gaia/weightgrad, from `tern global`'s log: its last "stopped at round
// ...: ..., U bytes in, D bytes out" line (global/gs_main.cc). U is the
// payload bytes of every LPS's updates; D is one copy of each round's answer,
// which each of the `datacenters` LPSs receives, so down = datacenters * D.
// Payload bytes only (no protobuf framing). Nothing when the line is absent
// (a GS that was killed before its shutdown line).
std::optional<WanBytes> GlobalServerWanBytes(
    const std::vector<std::string>& log_lines, uint32_t datacenters);

// An LPS's final parameter checksum: the last "0x" + 16 hex digits on the
// last line of its log that mentions "checksum". "" when there is none.
std::string LastLpsChecksum(const std::vector<std::string>& log_lines);

// Reads a child's log (one line per output line); empty when unreadable.
std::vector<std::string> ReadLogLines(const std::string& path);

}  // namespace tern

#endif  // TERN_TERN_GEO_REPORT_H_
