#include "worker/chunk_plan.h"

#include "gtest/gtest.h"

namespace tern::worker {
namespace {

const std::vector<std::string> kNames = {"conv1.weight", "conv1.bias",
                                         "fc1.weight",   "fc1.bias",
                                         "fc2.weight",   "fc2.bias"};
const std::vector<uint64_t> kElements = {150, 6, 4000, 100, 1000, 10};

TEST(SelectFp32TensorsTest, NothingByDefault) {
  const auto fp32 = SelectFp32Tensors(kNames, kElements, {}, 0);
  ASSERT_TRUE(fp32.ok());
  EXPECT_EQ(*fp32, std::vector<bool>(6, false));
}

TEST(SelectFp32TensorsTest, LastMeansTheLastWeightAndItsBias) {
  const auto fp32 = SelectFp32Tensors(kNames, kElements, {"last"}, 0);
  ASSERT_TRUE(fp32.ok());
  EXPECT_EQ(*fp32, (std::vector<bool>{false, false, false, false, true, true}));
}

TEST(SelectFp32TensorsTest, ExactNamesAndSmallTensors) {
  const auto fp32 = SelectFp32Tensors(kNames, kElements, {"conv1.weight"}, 101);
  ASSERT_TRUE(fp32.ok());
  // conv1.weight by name; conv1.bias (6), fc1.bias (100), fc2.bias (10) by
  // size; 101 itself would not count (fewer than).
  EXPECT_EQ(*fp32, (std::vector<bool>{true, true, false, true, false, true}));
}

TEST(SelectFp32TensorsTest, UnknownNameIsAConfigurationError) {
  const auto fp32 = SelectFp32Tensors(kNames, kElements, {"fc3.weight"}, 0);
  ASSERT_FALSE(fp32.ok());
  EXPECT_EQ(fp32.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(fp32.status().message().find("fc3.weight"),
            absl::string_view::npos);
  EXPECT_NE(fp32.status().message().find("fc2.bias"), absl::string_view::npos);
  // A prefix is not a name.
  EXPECT_FALSE(SelectFp32Tensors(kNames, kElements, {"fc2"}, 0).ok());
}

TEST(MakeChunkPlanTest, Fp32ChunksSkipScalerSharing) {
  // 1000 floats per chunk: fc1.weight (4000) is cut into 4 chunks.
  const auto plan = MakeChunkPlan(kNames, kElements, 4000, 2, {"last"}, 0,
                                  /*share_scalers=*/true);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const auto& chunks = plan->partition.chunks();
  ASSERT_EQ(chunks.size(), 9u);
  // fc2.weight and fc2.bias are the last two tensors, hence the last keys.
  EXPECT_EQ(plan->fp32_chunk_keys, (std::vector<uint32_t>{7, 8}));
  size_t owned = 0, shared = 0;
  for (uint32_t shard = 0; shard < 2; ++shard) {
    EXPECT_EQ(plan->shard_chunks[shard], plan->partition.ChunksOfShard(shard));
    owned += plan->shard_chunks[shard].size();
    for (const uint32_t key : plan->shard_scaler_chunks[shard]) {
      EXPECT_FALSE(plan->fp32_chunk[key]) << key;
      EXPECT_EQ(chunks[key].shard, shard);
      ++shared;
    }
  }
  EXPECT_EQ(owned, 9u);
  EXPECT_EQ(shared, 7u);
}

TEST(MakeChunkPlanTest, NoScalerSharingOutsideTernGrad) {
  const auto plan = MakeChunkPlan(kNames, kElements, 4000, 3, {}, 0,
                                  /*share_scalers=*/false);
  ASSERT_TRUE(plan.ok());
  for (const auto& keys : plan->shard_scaler_chunks) EXPECT_TRUE(keys.empty());
  EXPECT_TRUE(plan->fp32_chunk_keys.empty());
}

TEST(ParseShardAssignmentTest, NamesTheThreeRulesAndRefusesOthers) {
  EXPECT_EQ(*ParseShardAssignment("even"), ShardAssignment::kEven);
  EXPECT_EQ(*ParseShardAssignment("balanced"), ShardAssignment::kBalanced);
  EXPECT_EQ(*ParseShardAssignment("backward"),
            ShardAssignment::kBackwardOrder);
  const absl::StatusOr<ShardAssignment> bad = ParseShardAssignment("lpt");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "--shard_assignment: 'lpt' is not even, balanced or backward");
}

TEST(MakeChunkPlanTest, TheRuleReachesThePartition) {
  const auto plan = MakeChunkPlan(kNames, kElements, 4000, 3, {}, 0, true,
                                  ShardAssignment::kEven);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->partition.assignment(), ShardAssignment::kEven);
}

TEST(MakeChunkPlanTest, PartitionErrorsComeThrough) {
  EXPECT_FALSE(MakeChunkPlan(kNames, kElements, 4000, 0, {}, 0, true).ok());
  EXPECT_FALSE(MakeChunkPlan(kNames, kElements, 2, 1, {}, 0, true).ok());
}

}  // namespace
}  // namespace tern::worker
