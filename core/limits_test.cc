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
