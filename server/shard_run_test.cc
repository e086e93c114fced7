#include "server/shard_run.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/codec_registry.h"

namespace tern::server {
namespace {

using ::testing::HasSubstr;

ShardLimits Limits(uint32_t shard_index, uint32_t num_shards) {
  return ShardLimits{shard_index, num_shards, /*num_workers=*/2,
                     /*max_message_bytes=*/64ull << 20, kernels::MakeCodec};
}

// "w" of 3x5 and "b" of 7, in chunks of at most 8 elements: chunk 0 =
// w[0..8), chunk 1 = w[8..15), chunk 2 = b.
JoinRequest MakeJoin() {
  JoinRequest join;
  join.config.num_workers = 2;
  join.config.num_shards = 1;
  join.config.partition_bytes = 32;
  join.config.seed = 7;
  join.config.codec = kernels::CodecId::kTernGrad;
  join.config.push_layout = kernels::Layout::kTernary2Bit;
  join.config.pull_layout = kernels::Layout::kSumBits;
  join.tensors = {TensorSpec{"w", {3, 5}}, TensorSpec{"b", {7}}};
  return join;
}

TEST(ShardRunTest, BuildsTheShardsChunksWithTheirCodecsAndScalerSlots) {
  JoinRequest join = MakeJoin();
  join.config.fp32_chunk_keys = {1};
  auto run = ShardRun::Build(join, Limits(0, 1));
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ((*run)->keys, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ((*run)->shard_elements, 22u);
  ASSERT_EQ((*run)->scaler_chunks.size(), 2u) << "fp32 chunk 1 shares none";
  EXPECT_EQ((*run)->scaler_chunks[1]->key, 2u);
  EXPECT_EQ((*run)->scaler_chunks[1]->scaler_slot, 1u);
  const ShardChunk* fp32 = (*run)->Find(1);
  ASSERT_NE(fp32, nullptr);
  EXPECT_EQ(fp32->codec->id(), kernels::CodecId::kFp32);
  EXPECT_EQ(fp32->push_layout, kernels::Layout::kRaw);
  EXPECT_EQ(fp32->group_size, 5u) << "rows of w";
  EXPECT_EQ((*run)->Find(3), nullptr);
}

TEST(ShardRunTest, ASecondShardOwnsOnlyItsChunks) {
  JoinRequest join = MakeJoin();
  join.config.num_shards = 2;
  auto run = ShardRun::Build(join, Limits(1, 2));
  ASSERT_TRUE(run.ok()) << run.status();
  for (const uint32_t key : (*run)->keys) {
    EXPECT_NE((*run)->Find(key), nullptr);
  }
  EXPECT_LT((*run)->keys.size(), 3u);
}

// The bug the core's one limit fixes: a tensor of 2^62 elements passed the
// shard's old limit (2^62), and 4 bytes each wrapped the message-size bound
// to almost nothing, so the join fixed a run whose chunks no message could
// carry. Now it is refused, naming the tensor.
TEST(ShardRunTest, ATensorBeyondTwoToTheFortyIsRefused) {
  JoinRequest join = MakeJoin();
  join.tensors[1].shape = {int64_t{1} << 31, int64_t{1} << 31};
  auto run = ShardRun::Build(join, Limits(0, 1));
  EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(run.status().message(),
              HasSubstr("param spec: tensor 'b' of shape [2147483648, "
                        "2147483648] is too large"));
}

TEST(ShardRunTest, RefusesBadFp32KeysAndCodecs) {
  JoinRequest join = MakeJoin();
  join.config.fp32_chunk_keys = {0, 0};
  EXPECT_THAT(ShardRun::Build(join, Limits(0, 1)).status().message(),
              HasSubstr("fp32 chunk key 0 is listed twice"));
  join.config.fp32_chunk_keys = {9};
  EXPECT_THAT(ShardRun::Build(join, Limits(0, 1)).status().message(),
              HasSubstr("fp32 chunk key 9 is beyond the model's 3 chunks"));
  join = MakeJoin();
  join.config.push_layout = kernels::Layout::kRaw;
  EXPECT_THAT(ShardRun::Build(join, Limits(0, 1)).status().message(),
              HasSubstr("run config: "));
}

}  // namespace
}  // namespace tern::server
