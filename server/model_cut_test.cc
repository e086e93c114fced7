#include "server/model_cut.h"

#include <cstdint>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern::server {
namespace {

using ::testing::HasSubstr;

JoinRequest MakeJoin(uint64_t partition_bytes) {
  JoinRequest join;
  join.config.partition_bytes = partition_bytes;
  join.tensors = {TensorSpec{"w", {3, 5}}, TensorSpec{"b", {7}}};
  return join;
}

constexpr ModelLimits kOneShard{1, 64ull << 20, "remedy"};

TEST(ModelCutTest, CutsAModelThatFits) {
  // 15 and 7 elements in chunks of at most 8: 2 + 1.
  const absl::StatusOr<Partition> partition = CutModel(MakeJoin(32), kOneShard);
  ASSERT_TRUE(partition.ok()) << partition.status();
  EXPECT_EQ(partition->chunks().size(), 3u);
  EXPECT_EQ(partition->total_elements(), 22u);
}

TEST(ModelCutTest, AnEmptyTensorBesideOthersIsCut) {
  JoinRequest join = MakeJoin(32);
  join.tensors.push_back(TensorSpec{"unused", {0}});
  const absl::StatusOr<Partition> partition = CutModel(join, kOneShard);
  ASSERT_TRUE(partition.ok()) << partition.status();
  EXPECT_EQ(partition->total_elements(), 22u);
}

TEST(ModelCutTest, NamesWhatIsWrongBeforeCutting) {
  JoinRequest negative = MakeJoin(32);
  negative.tensors[1].shape = {-7};
  EXPECT_THAT(CutModel(negative, kOneShard).status().message(),
              HasSubstr("param spec: tensor 'b' has a negative dimension"));
  const absl::Status small = CutModel(MakeJoin(3), kOneShard).status();
  EXPECT_EQ(small.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(small.message(),
            "partition: partition_bytes must be at least 4 (one float), got 3");
  JoinRequest empty = MakeJoin(32);
  empty.tensors = {TensorSpec{"w", {0, 5}}};
  EXPECT_EQ(CutModel(empty, kOneShard).status(),
            absl::InvalidArgumentError("param spec: the model has no "
                                       "parameters to train (1 tensor of 0 "
                                       "elements)"));
  empty.tensors.clear();
  EXPECT_EQ(CutModel(empty, kOneShard).status(),
            absl::InvalidArgumentError("param spec: the model has no "
                                       "parameters to train (no tensors)"));
  JoinRequest attack = MakeJoin(4);
  attack.tensors = {TensorSpec{"w", {int64_t{1} << 31}}};
  const absl::Status refused = CutModel(attack, kOneShard).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.message(), HasSubstr("in 2147483648 chunks"));
  EXPECT_THAT(refused.message(), HasSubstr("; remedy"));
}

}  // namespace
}  // namespace tern::server
