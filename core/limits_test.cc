#include "core/limits.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "core/join_check.h"
#include "gtest/gtest.h"

namespace tern::core {
namespace {

TEST(TensorElementsTest, CountsUpToTheLimitAndNoFurther) {
  EXPECT_EQ(*TensorElements("w", {}), 1u) << "a scalar";
  EXPECT_EQ(*TensorElements("w", {3, 0, 5}), 0u);
  EXPECT_EQ(*TensorElements("w", {1 << 20, 1 << 20}), kMaxTensorElements);
  const auto over = TensorElements("w", {1 << 20, (1 << 20) + 1});
  EXPECT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(over.status().message(),
            "tensor 'w' of shape [1048576, 1048577] is too large (more than "
            "2^40 elements)");
  // 2^62 elements: accepted by the shard's old limit, and 4 bytes each
  // wrap a 64-bit byte count to 0.
  EXPECT_FALSE(TensorElements("w", {int64_t{1} << 31, int64_t{1} << 31}).ok());
  EXPECT_EQ(TensorElements("b", {2, -1}).status().message(),
            "tensor 'b' has a negative dimension [2, -1]");
}

TEST(Fp32MessageBytesTest, BoundsAndSaturates) {
  EXPECT_EQ(Fp32MessageBytes(0, 0), kMessageSlackBytes);
  EXPECT_EQ(Fp32MessageBytes(10, 2), 40 + 2 * kChunkFramingBytes +
                                         kMessageSlackBytes);
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(Fp32MessageBytes(uint64_t{1} << 62, 1), kMax);
  EXPECT_EQ(Fp32MessageBytes(1, kMax / 2), kMax);
}

TEST(SizeModelTest, CountsAsThePartitionerCutsWithoutCutting) {
  // 15 and 7 elements in chunks of at most 8: 2 + 1.
  const ModelSize small = *SizeModel({15, 7}, 32);
  EXPECT_EQ(small.elements, 22u);
  EXPECT_EQ(small.chunks, 3u);
  EXPECT_EQ(SizeModel({}, 32)->chunks, 0u);
  EXPECT_EQ(SizeModel({0}, 32)->chunks, 1u) << "an empty tensor is a chunk";
  // The attack of issue 14: one tensor of 2^31 elements, one per chunk.
  const ModelSize attack = *SizeModel({uint64_t{1} << 31}, 4);
  EXPECT_EQ(attack.chunks, uint64_t{1} << 31);
  // At the element limit with the smallest partition: 2^40 chunks, and
  // 2^40 + 1 elements (not a tensor TensorElements allows) one more.
  EXPECT_EQ(SizeModel({kMaxTensorElements}, 4)->chunks, kMaxTensorElements);
  EXPECT_EQ(SizeModel({kMaxTensorElements + 1}, 8)->chunks,
            kMaxTensorElements / 2 + 1);
  EXPECT_EQ(SizeModel({1}, 3).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SizeModelTest, ManyTensorsSaturateInsteadOfWrapping) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  // 2^24 tensors of 2^40 elements would be 2^64 elements; a few beyond
  // the limit show the same without 2^24 entries.
  const std::vector<uint64_t> tensors(5, kMax / 4);
  const ModelSize model = *SizeModel(tensors, 4);
  EXPECT_EQ(model.elements, kMax);
  EXPECT_EQ(model.chunks, kMax);
  EXPECT_EQ(CheckModelFits(model, 1, 64ull << 20, "r").code(),
            absl::StatusCode::kInvalidArgument)
      << "more chunks than keys";
}

TEST(CheckModelFitsTest, TheAttackOfIssue14IsRefusedNamingTheNumbers) {
  const ModelSize attack = *SizeModel({uint64_t{1} << 31}, 4);
  const absl::Status status =
      CheckModelFits(attack, 2, 64ull << 20, "raise --max_message_mb");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  // 2^31 * 4 + 2^31 * 128 bytes, against 2 * (64 - 1) MiB.
  EXPECT_EQ(status.message(),
            "the model's 2147483648 elements in 2147483648 chunks take "
            "283467841536 bytes in fp32, more than 2 shards with a limit of "
            "64 MiB (--max_message_mb) can carry; raise --max_message_mb");
}

TEST(CheckModelFitsTest, MoreChunksThanKeysAreInvalid) {
  ModelSize model;
  model.chunks = uint64_t{1} << 32;
  const absl::Status status =
      CheckModelFits(model, 1u << 31, 2047ull << 20, "");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "the model has 4294967296 chunks, more than 2^32 - 1; raise "
            "partition_bytes");
  model.chunks -= 1;
  EXPECT_TRUE(CheckModelFits(model, 1u << 31, 2047ull << 20, "").ok())
      << "2^32 - 1 chunks fit keys, and enough shards carry them";
}

// The bound to the byte: S shards of limit M carry 4 * e + 128 * c up to
// S * (M - slack), for 1, 2, 3 and 64 shards.
TEST(CheckModelFitsTest, FitsUpToTheLastByteOfEveryShard) {
  for (const uint32_t shards : {1u, 2u, 3u, 64u}) {
    const uint64_t limit = kMessageSlackBytes + 4096;
    const uint64_t room = shards * uint64_t{4096};
    // One chunk and as many elements as the rest of the room holds.
    ModelSize model{(room - kChunkFramingBytes) / 4, 1};
    EXPECT_TRUE(CheckModelFits(model, shards, limit, "").ok()) << shards;
    ++model.elements;
    EXPECT_EQ(CheckModelFits(model, shards, limit, "").code(),
              absl::StatusCode::kFailedPrecondition)
        << shards;
    // The framing alone: room / 128 empty chunks fit, one more does not.
    model = ModelSize{0, room / kChunkFramingBytes};
    EXPECT_TRUE(CheckModelFits(model, shards, limit, "").ok()) << shards;
    ++model.chunks;
    EXPECT_FALSE(CheckModelFits(model, shards, limit, "").ok()) << shards;
  }
  // A limit at or below the slack carries nothing but an empty model.
  EXPECT_TRUE(CheckModelFits({}, 1, kMessageSlackBytes, "").ok());
  EXPECT_FALSE(CheckModelFits({0, 1}, 4, kMessageSlackBytes, "").ok());
}

// With one shard the model bound is the message bound of the whole model.
TEST(CheckModelFitsTest, OneShardIsTheMessageBound) {
  const uint64_t limit = 64ull << 20;
  for (const ModelSize& model :
       {ModelSize{1, 1}, ModelSize{(limit - kMessageSlackBytes) / 4 - 32, 1},
        ModelSize{(limit - kMessageSlackBytes) / 4 - 31, 1},
        ModelSize{kMaxTensorElements, 1}, ModelSize{0, 1u << 19},
        ModelSize{0, (1u << 19) - 8192 + 1}}) {
    EXPECT_EQ(CheckModelFits(model, 1, limit, "").ok(),
              Fp32MessageBytes(model.elements, model.chunks) <= limit)
        << model.elements << " elements in " << model.chunks << " chunks";
  }
}

TEST(JoinComparisonTest, KeepsTheFirstDifferenceInOneSentence) {
  JoinComparison same("worker 2", "worker 0");
  same.Field("seed", uint64_t{3}, uint64_t{3}).Field("flag", true, true);
  EXPECT_TRUE(same.ok());

  JoinComparison differs("worker 2", "worker 0");
  differs.Field("seed", uint64_t{99}, uint64_t{3})
      .Field("clip", 1.0f, 2.0f)  // not reached
      .Texts(false, "never", "a", "b");
  EXPECT_EQ(differs.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(differs.status().message(),
            "seed 99 of worker 2 differs from 3 of worker 0: every worker "
            "must run with the same flags");

  JoinComparison flags("data center 1", "data center 0");
  flags.Field("sampled_means", false, true, "why");
  EXPECT_EQ(flags.status().message(),
            "sampled_means false of data center 1 differs from true of data "
            "center 0: why");

  const float nan = std::numeric_limits<float>::quiet_NaN();
  JoinComparison nans("worker 1", "worker 0");
  nans.Field("tau", nan, nan);
  EXPECT_FALSE(nans.ok()) << "a NaN never matches";
}

}  // namespace
}  // namespace tern::core
