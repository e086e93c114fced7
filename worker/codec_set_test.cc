#include "worker/codec_set.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/codec_registry.h"
#include "worker/chunk_plan.h"

namespace tern::worker {
namespace {

using kernels::CodecId;

// A 2-layer model: "fc.weight" 8x16 (two chunks at 256 bytes), "fc.bias" 8.
struct TwoTensors {
  std::vector<std::string> names{"fc.weight", "fc.bias"};
  std::vector<uint64_t> elements{128, 8};
  tern::v1::ParamSpec spec;
  TwoTensors() {
    auto* weight = spec.add_tensors();
    weight->set_name(names[0]);
    weight->add_shape(8);
    weight->add_shape(16);
    auto* bias = spec.add_tensors();
    bias->set_name(names[1]);
    bias->add_shape(8);
  }
  ChunkPlan Plan(std::vector<std::string> fp32_tensors) const {
    absl::StatusOr<ChunkPlan> plan =
        MakeChunkPlan(names, elements, /*partition_bytes=*/256,
                      /*num_shards=*/2, fp32_tensors, 0,
                      /*share_scalers=*/false);
    EXPECT_TRUE(plan.ok()) << plan.status();
    return *std::move(plan);
  }
};

kernels::CodecOptions OptionsOf(CodecId codec,
                                TrainMode mode = TrainMode::kTernGrad) {
  WorkerOptions flags;
  flags.codec = codec;
  flags.mode = mode;
  absl::StatusOr<kernels::CodecOptions> options = CodecSet::PushOptions(flags);
  EXPECT_TRUE(options.ok()) << options.status();
  return *options;
}

TEST(CodecSetTest, GaiaPushesFp32WhateverTheFlagsSay) {
  EXPECT_EQ(OptionsOf(CodecId::kTernGrad, TrainMode::kGaia).id, CodecId::kFp32);
  EXPECT_EQ(OptionsOf(CodecId::kTernGrad, TrainMode::kWeightGrad).id,
            CodecId::kTernGrad);
  WorkerOptions bad;
  bad.mode = TrainMode::kGaia;
  bad.tau = -1;  // refused even though gaia does not use it
  EXPECT_FALSE(CodecSet::PushOptions(bad).ok());
}

TEST(CodecSetTest, Fp32ChunksTakeFp32AndKeepNoResidual) {
  const TwoTensors model;
  const ChunkPlan plan = model.Plan({"fc.bias"});
  absl::StatusOr<CodecSet> set =
      CodecSet::Create(OptionsOf(CodecId::kOneBit), plan, model.spec);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_NE(set->feedback(), nullptr);
  EXPECT_EQ(set->run().name(), "onebit");
  for (const Chunk& chunk : plan.partition.chunks()) {
    const bool fp32 = plan.fp32_chunk[chunk.key];
    EXPECT_EQ(set->For(chunk.key).name(), fp32 ? "fp32" : "onebit");
    EXPECT_EQ(set->feedback()->Residual(chunk.key).ok(), !fp32) << chunk.key;
    // Rows of 16 for the matrix, one group for the vector.
    EXPECT_EQ(set->group_size(chunk.key), chunk.tensor == 0 ? 16u : 0u);
  }
}

TEST(CodecSetTest, CodecsWithoutResidualsHaveNoFeedback) {
  const TwoTensors model;
  for (const CodecId codec :
       {CodecId::kTernGrad, CodecId::kFp32, CodecId::kFp16, CodecId::kQsgd}) {
    absl::StatusOr<CodecSet> set =
        CodecSet::Create(OptionsOf(codec), model.Plan({}), model.spec);
    ASSERT_TRUE(set.ok()) << set.status();
    EXPECT_EQ(set->feedback(), nullptr) << kernels::CodecName(codec);
  }
}

TEST(CodecSetTest, CompensateAddsResidualsAndOnlyGlobalDroppingSelects) {
  const TwoTensors model;
  const ChunkPlan plan = model.Plan({});
  for (const std::string scope : {"global", "tensor"}) {
    WorkerOptions flags;
    flags.codec = CodecId::kDropping;
    flags.drop_scope = scope;
    flags.drop_ratio = 0.5f;
    absl::StatusOr<CodecSet> set =
        CodecSet::Create(*CodecSet::PushOptions(flags), plan, model.spec);
    ASSERT_TRUE(set.ok()) << set.status();
    std::vector<float> gradients(136);
    for (size_t i = 0; i < gradients.size(); ++i) {
      gradients[i] = static_cast<float>(i % 7) - 3.0f;
    }
    const std::vector<float> before = gradients;
    const RandomStream stream{1, 0, kGlobalThresholdChunk, 0};
    // The first step: zero residuals change nothing.
    absl::StatusOr<float> threshold =
        set->Compensate(plan.partition.chunks(), absl::MakeSpan(gradients),
                        model.names, stream);
    ASSERT_TRUE(threshold.ok()) << threshold.status();
    EXPECT_EQ(gradients, before);
    EXPECT_EQ(*threshold > 0, scope == "global") << scope;
    // Encoding keeps what the payload drops; the next compensation adds it.
    const Chunk& first = plan.partition.chunks()[0];
    kernels::EncodeContext context;
    context.stream = RandomStream{1, 0, first.key, 0};
    context.threshold = *threshold;
    ASSERT_TRUE(set->Encode(first.key,
                            absl::MakeConstSpan(gradients).subspan(
                                first.flat_offset, first.num_elements),
                            context)
                    .ok());
    ASSERT_TRUE(set->Compensate(plan.partition.chunks(),
                                absl::MakeSpan(gradients), model.names, stream)
                    .ok());
    EXPECT_NE(gradients, before) << scope;
  }
}

}  // namespace
}  // namespace tern::worker
