#include "tern/progress.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

MetricsRecord Record(uint64_t step, double wall_s, double loss) {
  MetricsRecord record;
  record.step = step;
  record.wall_s = wall_s;
  record.loss = loss;
  return record;
}

TEST(FormatDurationTest, MinutesAndHours) {
  EXPECT_EQ(FormatDuration(0.0), "0:00");
  EXPECT_EQ(FormatDuration(65.4), "1:05");
  EXPECT_EQ(FormatDuration(3723), "1:02:03");
  EXPECT_EQ(FormatDuration(std::nullopt), "--:--");
  EXPECT_EQ(FormatDuration(-1.0), "--:--");
  EXPECT_EQ(FormatDuration(1e30), "--:--");
}

TEST(ProgressTrackerTest, RateLossAndEtaOverTheWindow) {
  ProgressTracker tracker(/*total_steps=*/100, /*window=*/4);
  EXPECT_TRUE(tracker.empty());
  // Steps 0..9, one every half second; the first step is slow (warm-up)
  // and must drop out of the window.
  tracker.Add(Record(0, 5.0, 100));
  for (uint64_t step = 1; step < 10; ++step) {
    tracker.Add(Record(step, 5.0 + 0.5 * step, static_cast<double>(step)));
  }
  const ProgressSnapshot s = tracker.Snapshot();
  EXPECT_EQ(s.steps_done, 10u);
  EXPECT_EQ(s.total_steps, 100u);
  EXPECT_DOUBLE_EQ(s.steps_per_s, 2.0);  // steps 6..9 over 1.5 s
  ASSERT_TRUE(s.loss.has_value());
  EXPECT_DOUBLE_EQ(*s.loss, (6 + 7 + 8 + 9) / 4.0);
  ASSERT_TRUE(s.eta_s.has_value());
  EXPECT_DOUBLE_EQ(*s.eta_s, 90 / 2.0);
  EXPECT_FALSE(s.test_accuracy.has_value());
}

TEST(ProgressTrackerTest, KeepsTheLatestAccuracyAndSkipsNanLosses) {
  ProgressTracker tracker(10);
  MetricsRecord evaluated = Record(0, 1, 2.0);
  evaluated.test_accuracy = 0.5;
  tracker.Add(evaluated);
  tracker.Add(Record(1, 2, std::nan("")));
  const ProgressSnapshot s = tracker.Snapshot();
  EXPECT_EQ(s.test_accuracy, 0.5);
  EXPECT_EQ(s.loss, 2.0);
  EXPECT_DOUBLE_EQ(s.steps_per_s, 1.0);
}

TEST(ProgressTrackerTest, NoRateFromOneRecord) {
  ProgressTracker tracker(10);
  tracker.Add(Record(0, 1, 2.0));
  const ProgressSnapshot s = tracker.Snapshot();
  EXPECT_EQ(s.steps_per_s, 0);
  EXPECT_FALSE(s.eta_s.has_value());
  EXPECT_THAT(FormatProgressLine(s), HasSubstr("ETA --:--"));
}

ProgressSnapshot Half() {
  ProgressSnapshot s;
  s.steps_done = 20;
  s.total_steps = 40;
  s.steps_per_s = 3.1;
  s.loss = 1.23456;
  s.test_accuracy = 0.912;
  s.eta_s = 6.4;
  return s;
}

TEST(FormatProgressTest, PlainLine) {
  EXPECT_EQ(FormatProgressLine(Half()),
            "step 20/40 (50%), 3.10 steps/s, loss 1.2346, test accuracy "
            "91.2%, ETA 0:06");
}

TEST(FormatProgressTest, BarFillsTheWidthInProportion) {
  const std::string bar = FormatProgressBar(Half(), 100);
  EXPECT_EQ(bar.size(), 100u);
  EXPECT_THAT(bar, StartsWith("[#"));
  EXPECT_THAT(bar, HasSubstr("  20/40  3.10 steps/s  loss 1.2346  acc 91.2%"
                             "  ETA 0:06"));
  const size_t inner = bar.find(']') - 1;
  const size_t filled = std::count(bar.begin(), bar.end(), '#');
  EXPECT_EQ(filled, inner / 2);
}

TEST(FormatProgressTest, NarrowTerminalDropsTheBar) {
  const std::string bar = FormatProgressBar(Half(), 30);
  EXPECT_LE(bar.size(), 30u);
  EXPECT_EQ(bar.find('['), std::string::npos);
}

}  // namespace
}  // namespace tern
