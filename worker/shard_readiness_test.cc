#include "worker/shard_readiness.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(ShardReadinessTest, AShardIsReadyOnceEveryTensorItCutsIs) {
  // Tensors of 10, 30 and 10 elements in chunks of at most 10: keys 0 (t0),
  // 1..3 (t1), 4 (t2). Backward order over 2 shards: keys 4 and 3 on shard
  // 0, keys 2, 1 and 0 (midpoints from 25 of 50 elements on) on shard 1;
  // tensor 1 is cut by both.
  auto partition =
      Partition::Create({10, 30, 10}, 40, 2, ShardAssignment::kBackwardOrder);
  ASSERT_TRUE(partition.ok()) << partition.status();
  ASSERT_EQ(partition->ChunksOfShard(0), (std::vector<uint32_t>{3, 4}));
  ShardReadiness readiness(*partition, 3);
  EXPECT_THAT(readiness.Reset(), IsEmpty());
  EXPECT_THAT(readiness.TensorReady(2), IsEmpty());
  // Tensor 1 completes shard 0; shard 1 still waits for tensor 0.
  EXPECT_THAT(readiness.TensorReady(1), ElementsAre(0u));
  EXPECT_THAT(readiness.TensorReady(1), IsEmpty()) << "reported twice";
  EXPECT_THAT(readiness.TensorReady(7), IsEmpty()) << "out of range";
  EXPECT_THAT(readiness.TensorReady(0), ElementsAre(1u));
  EXPECT_TRUE(readiness.tensor_ready(0));

  // The next step starts from nothing again.
  EXPECT_THAT(readiness.Reset(), IsEmpty());
  EXPECT_FALSE(readiness.tensor_ready(0));
  EXPECT_THAT(readiness.TensorReady(0), IsEmpty());
  EXPECT_THAT(readiness.TensorReady(2), IsEmpty());
  EXPECT_THAT(readiness.TensorReady(1), ElementsAre(0u, 1u));
}

TEST(ShardReadinessTest, ShardsWithoutChunksAreReadyAtOnce) {
  auto partition =
      Partition::Create({10, 10}, 40, 4, ShardAssignment::kBackwardOrder);
  ASSERT_TRUE(partition.ok());
  ShardReadiness readiness(*partition, 2);
  EXPECT_THAT(readiness.Reset(), ElementsAre(0u, 2u));
  EXPECT_THAT(readiness.TensorReady(1), ElementsAre(1u));
  EXPECT_THAT(readiness.TensorReady(0), ElementsAre(3u));
}

}  // namespace
}  // namespace tern::worker
