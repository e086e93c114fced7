#include "server/wire.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

tern::v1::Payload WirePayload() {
  tern::v1::Payload wire;
  wire.set_codec(tern::v1::CODEC_TERNGRAD);
  wire.set_layout(tern::v1::LAYOUT_TERNARY_BASE3);
  wire.set_format_version(1);
  wire.set_num_elements(7);
  wire.set_num_summands(1);
  wire.add_scalers(0.25f);
  wire.set_data(std::string("\x01\x02\x00", 3));
  return wire;
}

TEST(WireTest, PayloadsKeepEveryFieldBothWays) {
  const absl::StatusOr<kernels::Payload> payload =
      PayloadFromWire(WirePayload());
  ASSERT_TRUE(payload.ok()) << payload.status();
  EXPECT_EQ(payload->codec, kernels::CodecId::kTernGrad);
  EXPECT_EQ(payload->layout, kernels::Layout::kTernaryBase3);
  EXPECT_EQ(payload->num_elements, 7u);
  EXPECT_THAT(payload->scalers, ElementsAre(0.25f));
  EXPECT_EQ(payload->data, std::string("\x01\x02\x00", 3));

  tern::v1::Payload back;
  PayloadToWire(*payload, &back);
  EXPECT_EQ(back.SerializeAsString(), WirePayload().SerializeAsString());
}

TEST(WireTest, UnknownEnumNumbersAreRefusedNamingTheChunk) {
  tern::v1::PushPullRequest push;
  push.set_worker_id(2);
  push.set_step(9);
  tern::v1::ChunkPayload* chunk = push.add_chunks();
  chunk->set_chunk_key(4);
  *chunk->mutable_payload() = WirePayload();
  chunk->mutable_payload()->set_codec(static_cast<tern::v1::Codec>(42));
  absl::StatusOr<PushRequest> request = PushFromWire(push);
  EXPECT_EQ(request.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(request.status().message(),
            "step 9: chunk 4 of worker 2: unknown codec 42");

  chunk->mutable_payload()->set_codec(tern::v1::CODEC_FP32);
  chunk->mutable_payload()->set_layout(static_cast<tern::v1::Layout>(6));
  request = PushFromWire(push);
  EXPECT_THAT(request.status().message(), HasSubstr("unknown layout 6"));

  chunk->mutable_payload()->set_layout(tern::v1::LAYOUT_RAW);
  request = PushFromWire(push);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->worker_id, 2u);
  EXPECT_EQ(request->step, 9u);
  ASSERT_EQ(request->chunks.size(), 1u);
  EXPECT_EQ(request->chunks[0].chunk_key, 4u);
}

TEST(WireTest, JoinCarriesConfigAndSpec) {
  tern::v1::JoinRequest wire;
  wire.set_worker_id(1);
  wire.set_shard_index(3);
  wire.set_param_spec_hash(11);
  wire.set_param_checksum(12);
  tern::v1::RunConfig* config = wire.mutable_config();
  config->set_run_id("r");
  config->set_num_workers(4);
  config->set_num_shards(5);
  config->set_partition_bytes(64);
  config->set_seed(9);
  config->set_codec(tern::v1::CODEC_TERNGRAD);
  config->set_push_layout(tern::v1::LAYOUT_TERNARY_2BIT);
  config->set_pull_layout(tern::v1::LAYOUT_SUM_RADIX);
  config->set_clip(2.5f);
  config->add_fp32_chunk_keys(3);
  config->add_fp32_chunk_keys(8);
  tern::v1::TensorSpec* tensor = wire.mutable_param_spec()->add_tensors();
  tensor->set_name("fc.weight");
  tensor->add_shape(10);
  tensor->add_shape(84);
  tensor->set_dtype(tern::v1::DTYPE_FLOAT32);

  absl::StatusOr<JoinRequest> join = JoinFromWire(wire);
  ASSERT_TRUE(join.ok()) << join.status();
  EXPECT_EQ(join->worker_id, 1u);
  EXPECT_EQ(join->shard_index, 3u);
  EXPECT_EQ(join->param_spec_hash, 11u);
  EXPECT_EQ(join->param_checksum, 12u);
  EXPECT_EQ(join->config.run_id, "r");
  EXPECT_EQ(join->config.num_workers, 4u);
  EXPECT_EQ(join->config.num_shards, 5u);
  EXPECT_EQ(join->config.partition_bytes, 64u);
  EXPECT_EQ(join->config.seed, 9u);
  EXPECT_EQ(join->config.codec, kernels::CodecId::kTernGrad);
  EXPECT_EQ(join->config.push_layout, kernels::Layout::kTernary2Bit);
  EXPECT_EQ(join->config.pull_layout, kernels::Layout::kSumRadix);
  EXPECT_EQ(join->config.clip, 2.5f);
  EXPECT_THAT(join->config.fp32_chunk_keys, ElementsAre(3, 8));
  ASSERT_EQ(join->tensors.size(), 1u);
  EXPECT_EQ(join->tensors[0].name, "fc.weight");
  EXPECT_THAT(join->tensors[0].shape, ElementsAre(10, 84));

  tensor->set_dtype(tern::v1::DTYPE_UNSPECIFIED);
  join = JoinFromWire(wire);
  EXPECT_EQ(join.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(join.status().message(), HasSubstr("tensor 'fc.weight'"));

  tensor->set_dtype(tern::v1::DTYPE_FLOAT32);
  config->set_pull_layout(static_cast<tern::v1::Layout>(-1));
  join = JoinFromWire(wire);
  EXPECT_EQ(join.status().message(), "run config: unknown layout -1");
}

TEST(WireTest, RepliesBecomeResponses) {
  tern::v1::JoinResponse join;
  JoinToWire(JoinReply{2, 17, {1, 5}}, &join);
  EXPECT_EQ(join.shard_index(), 2u);
  EXPECT_EQ(join.next_step(), 17u);
  EXPECT_THAT(join.chunk_keys(), ElementsAre(1, 5));

  tern::v1::ShareScalersResponse scalers;
  ScalersToWire(ScalerReply{3, {{1, 0.5f}, {5, 2.0f}}}, &scalers);
  EXPECT_EQ(scalers.step(), 3u);
  ASSERT_EQ(scalers.scalers_size(), 2);
  EXPECT_EQ(scalers.scalers(1).chunk_key(), 5u);
  EXPECT_EQ(scalers.scalers(1).scaler(), 2.0f);

  PushReply reply;
  reply.step = 4;
  reply.chunks.push_back(ChunkPayload{5, *PayloadFromWire(WirePayload())});
  tern::v1::PushPullResponse push;
  PushToWire(reply, &push);
  EXPECT_EQ(push.step(), 4u);
  ASSERT_EQ(push.chunks_size(), 1);
  EXPECT_EQ(push.chunks(0).chunk_key(), 5u);
  EXPECT_EQ(push.chunks(0).payload().SerializeAsString(),
            WirePayload().SerializeAsString());
}

}  // namespace
}  // namespace tern::server
