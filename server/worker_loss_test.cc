#include "server/worker_loss.h"

#include "gtest/gtest.h"

namespace tern::server {
namespace {

TEST(WorkerLossPolicyTest, ParsesItsNamesAndRefusesOthers) {
  EXPECT_EQ(*ParseWorkerLossPolicy("stop"), WorkerLossPolicy::kStop);
  EXPECT_EQ(*ParseWorkerLossPolicy("shrink"), WorkerLossPolicy::kShrink);
  EXPECT_EQ(WorkerLossPolicyName(WorkerLossPolicy::kShrink), "shrink");
  const absl::StatusOr<WorkerLossPolicy> bad = ParseWorkerLossPolicy("wait");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "--on_worker_loss: 'wait' is not one of stop, shrink");
}

TEST(ActiveWorkersTest, DroppingAWorkerMovesTheLaterOnesDownOneSlot) {
  ActiveWorkers workers(4);
  EXPECT_EQ(workers.count(), 4u);
  EXPECT_EQ(workers.Slot(3), 3u);
  ASSERT_TRUE(workers.Drop(1, 7));
  EXPECT_FALSE(workers.active(1));
  EXPECT_EQ(workers.dropped_at(1), 7u);
  EXPECT_EQ(workers.dropped_at(2), std::nullopt);
  EXPECT_EQ(workers.count(), 3u);
  EXPECT_EQ(workers.Slot(0), 0u);
  EXPECT_EQ(workers.Slot(2), 1u);
  EXPECT_EQ(workers.Slot(3), 2u);
  EXPECT_FALSE(workers.Drop(1, 8));  // already dropped: no change
  EXPECT_EQ(workers.dropped_at(1), 7u);
  ASSERT_TRUE(workers.Drop(3, 9));
  EXPECT_EQ(workers.Slot(2), 1u);
}

TEST(ActiveWorkersTest, TheLastActiveWorkerIsNeverDropped) {
  ActiveWorkers workers(2);
  ASSERT_TRUE(workers.Drop(0, 1));
  EXPECT_FALSE(workers.Drop(1, 1));
  EXPECT_EQ(workers.count(), 1u);
  EXPECT_EQ(workers.Slot(1), 0u);
}

TEST(ActiveWorkersTest, AReturningWorkerIsLetInAtItsStepAndTakesItsSlot) {
  ActiveWorkers workers(3);
  ASSERT_TRUE(workers.Drop(1, 4));
  EXPECT_FALSE(workers.Return(0, 9));  // active: nothing to return from
  ASSERT_TRUE(workers.Return(1, 9));
  ASSERT_TRUE(workers.Return(1, 12));  // the first return's step stands
  EXPECT_EQ(workers.returns_at(1), 9u);
  EXPECT_FALSE(workers.active(1));
  EXPECT_TRUE(workers.Readmit(8).empty());
  EXPECT_EQ(workers.count(), 2u);
  EXPECT_EQ(workers.Slot(2), 1u);
  EXPECT_EQ(workers.Readmit(9), std::vector<uint32_t>{1});
  EXPECT_TRUE(workers.active(1));
  EXPECT_EQ(workers.returns_at(1), std::nullopt);
  EXPECT_EQ(workers.dropped_at(1), std::nullopt);
  EXPECT_EQ(workers.count(), 3u);
  EXPECT_EQ(workers.Slot(1), 1u);
  EXPECT_EQ(workers.Slot(2), 2u);
}

TEST(ActiveWorkersTest, DroppedWorkersCountAsArrived) {
  ActiveWorkers workers(3);
  ASSERT_TRUE(workers.Drop(2, 0));
  core::ArrivalSet arrivals(3);
  workers.MarkDropped(&arrivals);
  EXPECT_TRUE(arrivals.arrived(2));
  EXPECT_EQ(arrivals.count(), 1u);
  arrivals.Arrive(0);
  arrivals.Arrive(1);
  EXPECT_TRUE(arrivals.complete());
}

}  // namespace
}  // namespace tern::server
