#include "global/gs_metrics.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"

namespace tern::global {
namespace {

using ::testing::HasSubstr;

TEST(GsMetricsTest, NamesLabelsAndValues) {
  prometheus::Registry registry;
  GsMetrics metrics(registry, 3);
  RoundStats stats;
  stats.rounds_closed = 4;
  stats.holds = 1;
  stats.bytes_in = 100;
  stats.bytes_out = 50;
  metrics.Update(stats, 4, {0, 1, 3}, 2);
  stats.rounds_closed = 6;
  metrics.Update(stats, 6, {0, 0, 4}, 2);
  metrics.RoundClosed(absl::Milliseconds(1500));
  const std::string text =
      prometheus::TextSerializer().Serialize(registry.Collect());
  EXPECT_THAT(text, HasSubstr("tern_gs_rounds_total{role=\"global\"} 6"));
  EXPECT_THAT(text, HasSubstr("tern_gs_round{role=\"global\"} 6"));
  EXPECT_THAT(text, HasSubstr("tern_gs_holds_total{role=\"global\"} 1"));
  EXPECT_THAT(text, HasSubstr("tern_gs_held_datacenters{role=\"global\"} 1"));
  EXPECT_THAT(text, HasSubstr("tern_gs_datacenter_lag_rounds{role=\"global\","
                              "datacenter=\"2\"} 4"));
  EXPECT_THAT(text, HasSubstr("tern_gs_payload_bytes_total{role=\"global\","
                              "direction=\"in\"} 100"));
  EXPECT_THAT(text, HasSubstr("tern_gs_round_seconds_sum{role=\"global\"} "
                              "1.5"));
}

}  // namespace
}  // namespace tern::global
