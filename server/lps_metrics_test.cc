#include "server/lps_metrics.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"
#include "server/shard_metrics.h"

namespace tern::server {
namespace {

using ::testing::HasSubstr;

TEST(LpsMetricsTest, NamesLabelsAndValues) {
  prometheus::Registry registry;
  LpsMetrics metrics(registry, ShardMetrics::LpsLabels(1));
  SyncRound round;
  round.g_thresh = 0.25;
  round.decisions = {{0, 0.5, true}, {1, 0.1, false}, {2, 0.0, false}};
  metrics.RoundBuilt(round);
  metrics.RoundBuilt(round);
  metrics.HoldBegan();
  const std::string text =
      prometheus::TextSerializer().Serialize(registry.Collect());
  const std::string labels = "datacenter=\"1\",role=\"lps\"";
  EXPECT_THAT(text, HasSubstr("tern_lps_rounds_total{" + labels + "} 2"));
  EXPECT_THAT(text, HasSubstr("tern_lps_chunks_total{" + labels +
                              ",decision=\"sent\"} 2"));
  EXPECT_THAT(text, HasSubstr("tern_lps_chunks_total{" + labels +
                              ",decision=\"skipped\"} 4"));
  EXPECT_THAT(text, HasSubstr("tern_lps_threshold{" + labels + "} 0.25"));
  EXPECT_THAT(text, HasSubstr("tern_lps_holds_total{" + labels + "} 1"));
}

}  // namespace
}  // namespace tern::server
