// The Prometheus metrics of a WeightGrad/Gaia LPS's rounds with the global
// server (DESIGN section 8), beside the push metrics it shares with the
// shard (shard_metrics.h, role="lps"), counted once per round, never per
// chunk sent:
//
//   tern_lps_rounds_total                rounds built and sent to the GS
//   tern_lps_chunks_total{decision}      chunks the significance filter
//                                        sent ("sent") or held back
//                                        ("skipped"), summed over rounds
//   tern_lps_threshold                   the threshold the last round's
//                                        chunks were compared with (the
//                                        dynamic one once it is set; 0 in
//                                        the gaia mode)
//   tern_lps_holds_total                 times the LPS began holding its
//                                        workers for a GS that did not
//                                        answer within --sync_timeout_s
//
// Every series carries role="lps", datacenter="<index>". Thread-safe.
#ifndef TERN_SERVER_LPS_METRICS_H_
#define TERN_SERVER_LPS_METRICS_H_

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"
#include "server/gradient_synchronizer.h"

namespace tern::server {

class LpsMetrics {
 public:
  // Registers the metrics above in `registry`, which must outlive this
  // object, with `labels` (ShardMetrics::LpsLabels) on every series.
  LpsMetrics(prometheus::Registry& registry, const prometheus::Labels& labels);

  // A round was built: its decisions and threshold.
  void RoundBuilt(const SyncRound& round);
  // The LPS began holding its workers' answers for the GS.
  void HoldBegan() { holds_.Increment(); }

 private:
  prometheus::Counter& rounds_;
  prometheus::Counter& sent_;
  prometheus::Counter& skipped_;
  prometheus::Gauge& threshold_;
  prometheus::Counter& holds_;
};

}  // namespace tern::server

#endif  // TERN_SERVER_LPS_METRICS_H_
