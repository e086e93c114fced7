// The Prometheus metrics of the WeightGrad global server (DESIGN section
// 8), read from the RoundAggregator by `tern global`'s serve loop every
// 100 ms (Update) and, for the round latency, as each round closes:
//
//   tern_gs_rounds_total                 rounds closed
//   tern_gs_round                        the open round
//   tern_gs_datacenter_lag_rounds{datacenter}  rounds a data center is
//                                        behind the open round (bounded: K
//                                        series, K <= 256)
//   tern_gs_held_datacenters             data centers beyond --max_lag,
//                                        for which the open round is held
//   tern_gs_holds_total                  times the open round was held
//   tern_gs_payload_bytes_total{direction}  update payloads in, answers out
//   tern_gs_round_seconds                histogram: a round's first update
//                                        to its close
//
// Every series carries role="global". Thread-safe.
#ifndef TERN_GLOBAL_GS_METRICS_H_
#define TERN_GLOBAL_GS_METRICS_H_

#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "global/round_aggregator.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace tern::global {

class GsMetrics {
 public:
  // Registers the metrics above in `registry`, which must outlive this
  // object, for `num_datacenters` data centers.
  GsMetrics(prometheus::Registry& registry, uint32_t num_datacenters);

  // The aggregator's state now: its counters since the start (the
  // Prometheus counters advance by the difference), the open round, each
  // data center's lag and how many are beyond max_lag.
  void Update(const RoundStats& stats, uint64_t open_round,
              const std::vector<uint64_t>& lags, uint32_t max_lag);
  // A round closed `open_for` after its first update arrived.
  void RoundClosed(absl::Duration open_for) {
    round_seconds_.Observe(absl::ToDoubleSeconds(open_for));
  }

 private:
  prometheus::Counter& rounds_;
  prometheus::Gauge& round_;
  std::vector<prometheus::Gauge*> lag_;
  prometheus::Gauge& held_;
  prometheus::Counter& holds_;
  prometheus::Counter& bytes_in_;
  prometheus::Counter& bytes_out_;
  prometheus::Histogram& round_seconds_;
  // What Update saw last (one thread calls it).
  RoundStats last_;
};

}  // namespace tern::global

#endif  // TERN_GLOBAL_GS_METRICS_H_
