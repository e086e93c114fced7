#include "global/gs_metrics.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace tern::global {
namespace {

const prometheus::Labels kLabels = {{"role", "global"}};

prometheus::Family<prometheus::Counter>& Counters(
    prometheus::Registry& registry, const std::string& name,
    const std::string& help) {
  return prometheus::BuildCounter()
      .Name(name)
      .Help(help)
      .Labels(kLabels)
      .Register(registry);
}

prometheus::Family<prometheus::Gauge>& Gauges(prometheus::Registry& registry,
                                              const std::string& name,
                                              const std::string& help) {
  return prometheus::BuildGauge()
      .Name(name)
      .Help(help)
      .Labels(kLabels)
      .Register(registry);
}

// 10 ms to about 10 minutes, doubling: T_global is seconds, a held round
// waits up to the hold timeout.
prometheus::Histogram::BucketBoundaries RoundBuckets() {
  prometheus::Histogram::BucketBoundaries buckets;
  for (double bound = 0.01; bound < 700; bound *= 2) buckets.push_back(bound);
  return buckets;
}

void Advance(prometheus::Counter& counter, uint64_t now, uint64_t before) {
  if (now > before) counter.Increment(static_cast<double>(now - before));
}

}  // namespace

GsMetrics::GsMetrics(prometheus::Registry& registry, uint32_t num_datacenters)
    : rounds_(
          Counters(registry, "tern_gs_rounds_total", "Rounds closed").Add({})),
      round_(Gauges(registry, "tern_gs_round", "The open round").Add({})),
      held_(Gauges(registry, "tern_gs_held_datacenters",
                   "Data centers beyond --max_lag, holding the open round")
                .Add({})),
      holds_(Counters(registry, "tern_gs_holds_total",
                      "Times the open round was held")
                 .Add({})),
      bytes_in_(Counters(registry, "tern_gs_payload_bytes_total",
                         "Update payloads in, answers out")
                    .Add({{"direction", "in"}})),
      bytes_out_(Counters(registry, "tern_gs_payload_bytes_total",
                          "Update payloads in, answers out")
                     .Add({{"direction", "out"}})),
      round_seconds_(prometheus::BuildHistogram()
                         .Name("tern_gs_round_seconds")
                         .Help("Seconds from a round's first update to its "
                               "close")
                         .Labels(kLabels)
                         .Register(registry)
                         .Add({}, RoundBuckets())) {
  auto& lag = Gauges(registry, "tern_gs_datacenter_lag_rounds",
                     "Rounds a data center is behind the open round");
  for (uint32_t d = 0; d < num_datacenters; ++d) {
    lag_.push_back(&lag.Add({{"datacenter", absl::StrCat(d)}}));
  }
}

void GsMetrics::Update(const RoundStats& stats, uint64_t open_round,
                       const std::vector<uint64_t>& lags, uint32_t max_lag) {
  Advance(rounds_, stats.rounds_closed, last_.rounds_closed);
  Advance(holds_, stats.holds, last_.holds);
  Advance(bytes_in_, stats.bytes_in, last_.bytes_in);
  Advance(bytes_out_, stats.bytes_out, last_.bytes_out);
  last_ = stats;
  round_.Set(static_cast<double>(open_round));
  uint32_t held = 0;
  for (size_t d = 0; d < lags.size() && d < lag_.size(); ++d) {
    lag_[d]->Set(static_cast<double>(lags[d]));
    held += lags[d] > max_lag;
  }
  held_.Set(held);
}

}  // namespace tern::global
