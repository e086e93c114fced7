// The Prometheus metrics of a worker (DESIGN section 8), updated once per
// step from the same StepRecord that goes to the JSONL file, so the two
// agree by construction (tests/metrics_test.sh checks it):
//
//   tern_worker_steps_total                  steps finished
//   tern_worker_loss                         the last step's batch loss
//   tern_worker_test_accuracy                the last test-set evaluation
//   tern_worker_payload_bytes_total{direction}  codec payload bytes, push
//                                            and pull (push_bytes,
//                                            pull_bytes of the records)
//   tern_worker_message_bytes_total{direction}  serialized messages
//                                            (push_msg_bytes, pull_msg_bytes)
//   tern_worker_fp32_bytes_total             what fp32 would have sent per
//                                            direction (fp32_bytes)
//   tern_worker_compression_ratio{direction} fp32 bytes over payload bytes,
//                                            over the steps so far
//   tern_worker_phase_seconds{phase}         histogram of each step's
//                                            compute, encode, network and
//                                            decode seconds
//   tern_worker_checkpoint_writes_total      checkpoints written
//   tern_worker_last_checkpoint_timestamp_seconds  Unix time of the last
//                                            one; its age is
//                                            time() - this in PromQL
//
// Every series carries role="worker", worker="<global id>", codec and mode.
// Not thread-safe: the one training loop calls it (the metrics it updates
// are themselves thread-safe for the scrape).
#ifndef TERN_WORKER_WORKER_METRICS_H_
#define TERN_WORKER_WORKER_METRICS_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "common/records/step_record.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace tern::worker {

class WorkerMetrics {
 public:
  // Registers the metrics above in `registry`, which must outlive this
  // object, labelled worker=`worker`, codec=`codec`, mode=`mode`.
  WorkerMetrics(prometheus::Registry& registry, uint32_t worker,
                const std::string& codec, const std::string& mode);

  // One finished step, as its JSONL record says.
  void Observe(const records::StepRecord& record);
  // A checkpoint was written at `when`.
  void CheckpointWritten(absl::Time when);

 private:
  prometheus::Counter& steps_;
  prometheus::Gauge& loss_;
  prometheus::Gauge& accuracy_;
  std::array<prometheus::Counter*, 2> payload_;  // push, pull
  std::array<prometheus::Counter*, 2> message_;
  prometheus::Counter& fp32_;
  std::array<prometheus::Gauge*, 2> ratio_;
  std::array<prometheus::Histogram*, 4> phases_;  // compute .. decode
  prometheus::Counter& checkpoints_;
  prometheus::Gauge& last_checkpoint_;
  // The sums behind the ratio (the counters' values are doubles).
  std::array<uint64_t, 2> payload_sum_{};
  uint64_t fp32_sum_ = 0;

  WorkerMetrics(prometheus::Registry& registry,
                const prometheus::Labels& labels);
};

}  // namespace tern::worker

#endif  // TERN_WORKER_WORKER_METRICS_H_
