#include "server/lps_metrics.h"

#include <cstdint>
#include <string>

namespace tern::server {
namespace {

prometheus::Family<prometheus::Counter>& Counters(
    prometheus::Registry& registry, const std::string& name,
    const std::string& help, const prometheus::Labels& labels) {
  return prometheus::BuildCounter()
      .Name(name)
      .Help(help)
      .Labels(labels)
      .Register(registry);
}

}  // namespace

LpsMetrics::LpsMetrics(prometheus::Registry& registry,
                       const prometheus::Labels& labels)
    : rounds_(Counters(registry, "tern_lps_rounds_total",
                       "Rounds sent to the global server", labels)
                  .Add({})),
      sent_(Counters(registry, "tern_lps_chunks_total",
                     "Chunks the significance filter sent or skipped", labels)
                .Add({{"decision", "sent"}})),
      skipped_(Counters(registry, "tern_lps_chunks_total",
                        "Chunks the significance filter sent or skipped",
                        labels)
                   .Add({{"decision", "skipped"}})),
      threshold_(prometheus::BuildGauge()
                     .Name("tern_lps_threshold")
                     .Help("The significance threshold of the last round")
                     .Labels(labels)
                     .Register(registry)
                     .Add({})),
      holds_(Counters(registry, "tern_lps_holds_total",
                      "Holds of the workers for a silent global server", labels)
                 .Add({})) {}

void LpsMetrics::RoundBuilt(const SyncRound& round) {
  rounds_.Increment();
  uint64_t sent = 0;
  for (const ChunkDecision& decision : round.decisions) sent += decision.sent;
  sent_.Increment(static_cast<double>(sent));
  skipped_.Increment(static_cast<double>(round.decisions.size() - sent));
  threshold_.Set(round.g_thresh);
}

}  // namespace tern::server
