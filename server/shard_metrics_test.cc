#include "server/shard_metrics.h"

#include <string>

#include "core/admission.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace tern::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Exposition(prometheus::Registry& registry) {
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

TEST(ShardMetricsTest, NamesLabelsAndValues) {
  prometheus::Registry registry;
  ShardMetrics metrics(registry, ShardMetrics::ShardLabels(1));
  metrics.Received(100);
  metrics.Answered(absl::Milliseconds(3), 40);
  metrics.Sent(2);
  metrics.Rejected(core::StaleError({"step", "shard 1"}, 1, 3));
  metrics.Rejected(absl::InvalidArgumentError("value 0 is nan (NaN/Inf ...)"));
  metrics.SetStep(7);
  metrics.SetWorkersJoined(4);
  const std::string text = Exposition(registry);
  const std::string labels = "role=\"ps\",shard=\"1\"";
  EXPECT_THAT(text, HasSubstr("# TYPE tern_ps_pushes_accepted_total counter"));
  EXPECT_THAT(text,
              HasSubstr("tern_ps_pushes_accepted_total{" + labels + "} 1"));
  EXPECT_THAT(text, HasSubstr("tern_ps_message_bytes_total{" + labels +
                              ",direction=\"in\"} 100"));
  EXPECT_THAT(text, HasSubstr("tern_ps_message_bytes_total{" + labels +
                              ",direction=\"out\"} 42"));
  EXPECT_THAT(text, HasSubstr("tern_ps_pushes_rejected_total{" + labels +
                              ",reason=\"stale\"} 1"));
  EXPECT_THAT(text, HasSubstr("tern_ps_pushes_rejected_total{" + labels +
                              ",reason=\"nan\"} 1"));
  EXPECT_THAT(text, HasSubstr("tern_ps_pushes_rejected_total{" + labels +
                              ",reason=\"future\"} 0"));
  EXPECT_THAT(text, HasSubstr("# TYPE tern_ps_barrier_wait_seconds histogram"));
  EXPECT_THAT(
      text, HasSubstr("tern_ps_barrier_wait_seconds_count{" + labels + "} 1"));
  EXPECT_THAT(text, HasSubstr("tern_ps_step{" + labels + "} 7"));
  EXPECT_THAT(text, HasSubstr("tern_ps_workers_joined{" + labels + "} 4"));
}

TEST(ShardMetricsTest, AnLpsIsLabelledByItsDataCenter) {
  prometheus::Registry registry;
  ShardMetrics metrics(registry, ShardMetrics::LpsLabels(2));
  const std::string text = Exposition(registry);
  EXPECT_THAT(text, HasSubstr("tern_ps_step{datacenter=\"2\",role=\"lps\"} 0"));
  EXPECT_THAT(text, Not(HasSubstr("shard=")));
}

}  // namespace
}  // namespace tern::server
