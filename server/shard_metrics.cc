#include "server/shard_metrics.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace tern::server {
namespace {

// 1 ms to about 65 s, doubling: a barrier waits for the slowest worker's
// compute and its network, and times out at --barrier_timeout_s (50 s).
prometheus::Histogram::BucketBoundaries WaitBuckets() {
  prometheus::Histogram::BucketBoundaries buckets;
  for (double bound = 0.001; bound < 100; bound *= 2) buckets.push_back(bound);
  return buckets;
}

prometheus::Counter& Counter(prometheus::Registry& registry,
                             const std::string& name, const std::string& help,
                             const prometheus::Labels& labels,
                             const prometheus::Labels& own = {}) {
  return prometheus::BuildCounter()
      .Name(name)
      .Help(help)
      .Labels(labels)
      .Register(registry)
      .Add(own);
}

prometheus::Gauge& Gauge(prometheus::Registry& registry,
                         const std::string& name, const std::string& help,
                         const prometheus::Labels& labels) {
  return prometheus::BuildGauge()
      .Name(name)
      .Help(help)
      .Labels(labels)
      .Register(registry)
      .Add({});
}

}  // namespace

prometheus::Labels ShardMetrics::ShardLabels(uint32_t shard_index) {
  return {{"role", "ps"}, {"shard", absl::StrCat(shard_index)}};
}

prometheus::Labels ShardMetrics::LpsLabels(uint32_t datacenter) {
  return {{"role", "lps"}, {"datacenter", absl::StrCat(datacenter)}};
}

ShardMetrics::ShardMetrics(prometheus::Registry& registry,
                           const prometheus::Labels& labels)
    : accepted_(Counter(registry, "tern_ps_pushes_accepted_total",
                        "Push-pull calls answered with the step's sum",
                        labels)),
      wait_(prometheus::BuildHistogram()
                .Name("tern_ps_barrier_wait_seconds")
                .Help("Seconds from a push's arrival to its answer")
                .Labels(labels)
                .Register(registry)
                .Add({}, WaitBuckets())),
      bytes_in_(Counter(registry, "tern_ps_message_bytes_total",
                        "Serialized ShareScalers and PushPull messages", labels,
                        {{"direction", "in"}})),
      bytes_out_(Counter(registry, "tern_ps_message_bytes_total",
                         "Serialized ShareScalers and PushPull messages",
                         labels, {{"direction", "out"}})),
      step_(Gauge(registry, "tern_ps_step", "The open step", labels)),
      joined_(Gauge(registry, "tern_ps_workers_joined",
                    "Workers that have joined", labels)) {
  // Every reason from the start, at 0, so that a first refusal is a rise.
  for (size_t r = 0; r < kReasons; ++r) {
    rejected_[r] = &Counter(
        registry, "tern_ps_pushes_rejected_total", "Pushes refused, by reason",
        labels,
        {{"reason", core::PushRefusalName(static_cast<core::PushRefusal>(r))}});
  }
}

void ShardMetrics::Rejected(const absl::Status& status) {
  rejected_[static_cast<size_t>(core::ClassifyPushRefusal(status))]
      ->Increment();
}

void ShardMetrics::Answered(absl::Duration wait, uint64_t bytes) {
  accepted_.Increment();
  wait_.Observe(absl::ToDoubleSeconds(wait));
  bytes_out_.Increment(static_cast<double>(bytes));
}

}  // namespace tern::server
