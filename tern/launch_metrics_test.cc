#include "tern/launch_metrics.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(LaunchMetricsTest, EachChildGetsTheNextPortAndAScrapeTarget) {
  LaunchMetrics plan({"0.0.0.0:9400", 2.5}, "/nonexistent/prometheus.yml");
  ASSERT_TRUE(plan.enabled());
  EXPECT_THAT(plan.ArgsFor("ps/0"), ElementsAre("--metrics_listen=0.0.0.0:9400",
                                                "--metrics_linger_s=2.5"));
  EXPECT_THAT(
      plan.ArgsFor("worker/0"),
      ElementsAre("--metrics_listen=0.0.0.0:9401", "--metrics_linger_s=2.5"));
  const std::string config = plan.ScrapeConfig();
  EXPECT_THAT(config, HasSubstr("job_name: tern"));
  EXPECT_THAT(config, HasSubstr("- targets: [\"127.0.0.1:9400\"]\n"
                                "        labels: {process: \"ps/0\"}"));
  EXPECT_THAT(config, HasSubstr("- targets: [\"127.0.0.1:9401\"]\n"
                                "        labels: {process: \"worker/0\"}"));
  EXPECT_FALSE(plan.WriteScrapeConfig().ok());
}

TEST(LaunchMetricsTest, OffGivesNothing) {
  LaunchMetrics plan({}, "unused");
  EXPECT_FALSE(plan.enabled());
  EXPECT_TRUE(plan.ArgsFor("ps/0").empty());
  EXPECT_TRUE(plan.WriteScrapeConfig().ok());
}

TEST(LaunchMetricsTest, ValidatesTheBasePort) {
  EXPECT_TRUE(ValidateLaunchMetrics({}, 6).ok());
  EXPECT_TRUE(ValidateLaunchMetrics({"127.0.0.1:9400", 0}, 6).ok());
  EXPECT_EQ(ValidateLaunchMetrics({"127.0.0.1:0", 0}, 6).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateLaunchMetrics({"127.0.0.1:65533", 0}, 6).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateLaunchMetrics({"localhost:9400", 0}, 6).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tern
