#include "server/shard_run.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
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

// Issue 14: a join of a few bytes declared one tensor of 2^31 elements cut
// at 4 bytes, 2^31 chunks, and the shard made a Chunk for each (gigabytes)
// before it found that no message could carry them. The model is counted
// and refused before anything is made for it.
TEST(ShardRunTest, AJoinDeclaringTwoToThe31ChunksIsRefusedBeforeCutting) {
  JoinRequest join = MakeJoin();
  join.config.num_shards = 2;
  join.config.partition_bytes = 4;
  join.tensors = {TensorSpec{"w", {int64_t{1} << 31}}};
  const absl::Time start = absl::Now();
  auto run = ShardRun::Build(join, Limits(0, 2));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << "counted, not cut";
  EXPECT_EQ(run.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(run.status().message(),
            "the model's 2147483648 elements in 2147483648 chunks take "
            "283467841536 bytes in fp32, more than 2 shards with a limit of "
            "64 MiB (--max_message_mb) can carry; raise --max_message_mb of "
            "the shards, use more shards or a larger --partition_bytes");
}

// Many tensors at the element limit: 2^12 * 2^40 elements, summed without
// wrapping, refused as quickly: in 16 MiB chunks (2^30 of them) for their
// bytes, in 4-byte chunks for more chunks than keys.
TEST(ShardRunTest, ManyHugeTensorsAreRefusedBeforeCutting) {
  JoinRequest join = MakeJoin();
  join.config.partition_bytes = 16 << 20;
  join.tensors.assign(4096, TensorSpec{"w", {1 << 20, 1 << 20}});
  auto run = ShardRun::Build(join, Limits(0, 1));
  EXPECT_EQ(run.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(run.status().message(),
              HasSubstr("the model's 4503599627370496 elements in "
                        "1073741824 chunks"));
  join.config.partition_bytes = 4;
  run = ShardRun::Build(join, Limits(0, 1));
  EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(run.status().message(),
            "the model has 4503599627370496 chunks, more than 2^32 - 1; "
            "raise partition_bytes");
}

// The bound is the shards' together: a model larger than one shard's
// message but within two shards' is built, and each shard owns a share
// that fits. One element more than the two carry is refused.
TEST(ShardRunTest, AModelThatTheShardsTogetherCarryIsBuilt) {
  constexpr uint64_t kLimit = 2ull << 20;  // 1 MiB of room after the slack
  JoinRequest join = MakeJoin();
  join.config.num_shards = 2;
  join.config.codec = kernels::CodecId::kFp32;
  join.config.push_layout = kernels::Layout::kRaw;
  join.config.pull_layout = kernels::Layout::kRaw;
  join.config.partition_bytes = 1 << 20;
  // Two tensors of 1 MiB in fp32 less their framing (one chunk each).
  const int64_t fits = ((1 << 20) - 128) / 4;
  join.tensors = {TensorSpec{"a", {fits}}, TensorSpec{"b", {fits}}};
  for (uint32_t shard = 0; shard < 2; ++shard) {
    ShardLimits limits = Limits(shard, 2);
    limits.max_message_bytes = kLimit;
    auto run = ShardRun::Build(join, limits);
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_EQ((*run)->shard_elements, static_cast<uint64_t>(fits));
  }
  join.tensors[1].shape = {fits + 1};
  ShardLimits limits = Limits(0, 2);
  limits.max_message_bytes = kLimit;
  EXPECT_EQ(ShardRun::Build(join, limits).status().code(),
            absl::StatusCode::kFailedPrecondition);
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
