#include "worker/worker_metrics.h"

#include "absl/strings/str_cat.h"

namespace tern::worker {
namespace {

constexpr const char* kDirections[] = {"push", "pull"};
constexpr const char* kPhases[] = {"compute", "encode", "network", "decode"};

// 100 us to about 100 s, by factors of 4: a LeNet step on a CPU takes
// milliseconds, an MLP over a slow link seconds.
prometheus::Histogram::BucketBoundaries PhaseBuckets() {
  prometheus::Histogram::BucketBoundaries buckets;
  for (double bound = 1e-4; bound < 200; bound *= 4) buckets.push_back(bound);
  return buckets;
}

template <typename Builder>
auto& Family(Builder builder, prometheus::Registry& registry,
             const std::string& name, const std::string& help,
             const prometheus::Labels& labels) {
  return builder.Name(name).Help(help).Labels(labels).Register(registry);
}

}  // namespace

WorkerMetrics::WorkerMetrics(prometheus::Registry& registry, uint32_t worker,
                             const std::string& codec, const std::string& mode)
    : WorkerMetrics(registry,
                    prometheus::Labels{{"role", "worker"},
                                       {"worker", absl::StrCat(worker)},
                                       {"codec", codec},
                                       {"mode", mode}}) {}

WorkerMetrics::WorkerMetrics(prometheus::Registry& registry,
                             const prometheus::Labels& labels)
    : steps_(Family(prometheus::BuildCounter(), registry,
                    "tern_worker_steps_total", "Steps finished", labels)
                 .Add({})),
      loss_(Family(prometheus::BuildGauge(), registry, "tern_worker_loss",
                   "The last step's batch loss", labels)
                .Add({})),
      accuracy_(Family(prometheus::BuildGauge(), registry,
                       "tern_worker_test_accuracy",
                       "Test accuracy at the last evaluation, in [0, 1]",
                       labels)
                    .Add({})),
      fp32_(Family(prometheus::BuildCounter(), registry,
                   "tern_worker_fp32_bytes_total",
                   "Bytes fp32 would have sent in each direction", labels)
                .Add({})),
      checkpoints_(Family(prometheus::BuildCounter(), registry,
                          "tern_worker_checkpoint_writes_total",
                          "Checkpoints written", labels)
                       .Add({})),
      last_checkpoint_(
          Family(prometheus::BuildGauge(), registry,
                 "tern_worker_last_checkpoint_timestamp_seconds",
                 "Unix time of the last checkpoint written (0: none yet)",
                 labels)
              .Add({})) {
  auto& payload = Family(prometheus::BuildCounter(), registry,
                         "tern_worker_payload_bytes_total",
                         "Codec payload bytes (data + 4 per scaler)", labels);
  auto& message = Family(
      prometheus::BuildCounter(), registry, "tern_worker_message_bytes_total",
      "Serialized request (push) and response (pull) bytes", labels);
  auto& ratio = Family(
      prometheus::BuildGauge(), registry, "tern_worker_compression_ratio",
      "fp32 bytes over payload bytes, all steps so far", labels);
  for (size_t d = 0; d < 2; ++d) {
    payload_[d] = &payload.Add({{"direction", kDirections[d]}});
    message_[d] = &message.Add({{"direction", kDirections[d]}});
    ratio_[d] = &ratio.Add({{"direction", kDirections[d]}});
  }
  auto& phases = Family(prometheus::BuildHistogram(), registry,
                        "tern_worker_phase_seconds",
                        "Seconds of each step spent in each phase", labels);
  for (size_t p = 0; p < 4; ++p) {
    phases_[p] = &phases.Add({{"phase", kPhases[p]}}, PhaseBuckets());
  }
}

void WorkerMetrics::Observe(const records::StepRecord& record) {
  steps_.Increment();
  loss_.Set(record.loss);
  if (record.test_accuracy.has_value()) accuracy_.Set(*record.test_accuracy);
  const uint64_t payload[] = {record.push_bytes, record.pull_bytes};
  const uint64_t message[] = {record.push_msg_bytes, record.pull_msg_bytes};
  fp32_sum_ += record.fp32_bytes;
  fp32_.Increment(static_cast<double>(record.fp32_bytes));
  for (size_t d = 0; d < 2; ++d) {
    payload_[d]->Increment(static_cast<double>(payload[d]));
    message_[d]->Increment(static_cast<double>(message[d]));
    payload_sum_[d] += payload[d];
    if (payload_sum_[d] > 0) {
      ratio_[d]->Set(static_cast<double>(fp32_sum_) /
                     static_cast<double>(payload_sum_[d]));
    }
  }
  const double seconds[] = {record.compute_s, record.encode_s, record.network_s,
                            record.decode_s};
  for (size_t p = 0; p < 4; ++p) phases_[p]->Observe(seconds[p]);
}

void WorkerMetrics::CheckpointWritten(absl::Time when) {
  checkpoints_.Increment();
  last_checkpoint_.Set(absl::ToDoubleSeconds(when - absl::UnixEpoch()));
}

}  // namespace tern::worker
