#include "server/wire.h"

#include <functional>
#include <limits>
#include <ostream>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
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
  chunk->mutable_payload()->set_layout(static_cast<tern::v1::Layout>(12));
  request = PushFromWire(push);
  EXPECT_THAT(request.status().message(), HasSubstr("unknown layout 12"));

  // The compressors' layouts (SIGN_BITS .. INDEX_2BIT) are known.
  for (const tern::v1::Layout layout :
       {tern::v1::LAYOUT_SIGN_BITS, tern::v1::LAYOUT_INDEX_SIGN,
        tern::v1::LAYOUT_INDEX_VALUE, tern::v1::LAYOUT_QSGD_LEVELS,
        tern::v1::LAYOUT_INDEX_2BIT}) {
    chunk->mutable_payload()->set_layout(layout);
    request = PushFromWire(push);
    ASSERT_TRUE(request.ok()) << request.status();
    EXPECT_EQ(static_cast<int>(request->chunks[0].payload.layout),
              static_cast<int>(layout));
  }

  chunk->mutable_payload()->set_layout(tern::v1::LAYOUT_RAW);
  request = PushFromWire(push);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->worker_id, 2u);
  EXPECT_EQ(request->step, 9u);
  ASSERT_EQ(request->chunks.size(), 1u);
  EXPECT_EQ(request->chunks[0].chunk_key, 4u);
}

// The services' conversion: the bytes move (the very buffer), nothing of
// the chunks stays in the request, and the result is PushFromWire's.
TEST(WireTest, TakePushFromWireMovesTheBytesAndEmptiesTheRequest) {
  tern::v1::PushPullRequest push;
  push.set_worker_id(2);
  push.set_step(9);
  push.set_fp32_weights(true);
  for (uint32_t key : {4u, 7u}) {
    tern::v1::ChunkPayload* chunk = push.add_chunks();
    chunk->set_chunk_key(key);
    *chunk->mutable_payload() = WirePayload();
    chunk->mutable_payload()->set_data(
        std::string(4096, static_cast<char>(key)));
  }
  const absl::StatusOr<PushRequest> copied = PushFromWire(push);
  ASSERT_TRUE(copied.ok()) << copied.status();
  const char* buffer = push.chunks(1).payload().data().data();

  absl::StatusOr<PushRequest> taken = TakePushFromWire(&push);
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(push.chunks_size(), 0) << "the request holds no chunk";
  EXPECT_EQ(push.worker_id(), 2u);
  EXPECT_EQ(push.step(), 9u);
  EXPECT_EQ(taken->worker_id, 2u);
  EXPECT_EQ(taken->step, 9u);
  EXPECT_TRUE(taken->fp32_weights);
  ASSERT_EQ(taken->chunks.size(), 2u);
  EXPECT_EQ(taken->chunks[1].payload.data.data(), buffer)
      << "moved, not copied";
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(taken->chunks[i].chunk_key, copied->chunks[i].chunk_key);
    const kernels::Payload& a = taken->chunks[i].payload;
    const kernels::Payload& b = copied->chunks[i].payload;
    EXPECT_EQ(a.codec, b.codec);
    EXPECT_EQ(a.layout, b.layout);
    EXPECT_EQ(a.format_version, b.format_version);
    EXPECT_EQ(a.num_elements, b.num_elements);
    EXPECT_EQ(a.num_summands, b.num_summands);
    EXPECT_EQ(a.scalers, b.scalers);
    EXPECT_EQ(a.data, b.data);
  }
}

TEST(WireTest, TakePushFromWireEmptiesTheRequestOnErrorToo) {
  tern::v1::PushPullRequest push;
  push.set_worker_id(2);
  push.set_step(9);
  tern::v1::ChunkPayload* chunk = push.add_chunks();
  chunk->set_chunk_key(4);
  *chunk->mutable_payload() = WirePayload();
  chunk->mutable_payload()->set_codec(static_cast<tern::v1::Codec>(42));
  const absl::StatusOr<PushRequest> taken = TakePushFromWire(&push);
  EXPECT_EQ(taken.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(taken.status().message(),
            "step 9: chunk 4 of worker 2: unknown codec 42");
  EXPECT_EQ(push.chunks_size(), 0);
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

TEST(WireTest, ShardAssignmentRoundTripsAndAnUnknownOneIsRefused) {
  const std::pair<ShardAssignment, tern::v1::ShardAssignment> rules[] = {
      {ShardAssignment::kBalanced, tern::v1::SHARD_ASSIGNMENT_BALANCED},
      {ShardAssignment::kBackwardOrder,
       tern::v1::SHARD_ASSIGNMENT_BACKWARD_ORDER},
      {ShardAssignment::kEven, tern::v1::SHARD_ASSIGNMENT_EVEN}};
  tern::v1::JoinRequest wire;
  for (const auto& [rule, on_wire] : rules) {
    JoinRequest join;
    join.config.shard_assignment = rule;
    JoinToWire(join, &wire);
    EXPECT_EQ(wire.config().shard_assignment(), on_wire);
    absl::StatusOr<JoinRequest> back = JoinFromWire(wire);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->config.shard_assignment, rule);
  }

  wire.mutable_config()->set_shard_assignment(
      static_cast<tern::v1::ShardAssignment>(3));
  absl::StatusOr<JoinRequest> back = JoinFromWire(wire);
  EXPECT_EQ(back.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(back.status().message(), HasSubstr("shard_assignment 3"));
}

// --- RunConfig.codec_params ---

TEST(CodecParamsWireTest, EveryFieldRoundTrips) {
  CodecParams params;
  params.sample_size = 77;
  params.sampled_means = true;
  params.tau = 0.25f;
  params.proportion = 0.125f;
  params.drop_ratio = 0.75f;
  params.drop_scope = kernels::DropScope::kPerTensor;
  params.drop_survivors = kernels::DropSurvivors::k2Bit;
  params.qsgd_levels = 127;
  params.qsgd_bucket = 3;
  tern::v1::CodecParams wire;
  CodecParamsToWire(params, &wire);
  EXPECT_EQ(wire.sample_size(), 77u);
  EXPECT_EQ(wire.drop_scope(), 1u);
  EXPECT_EQ(wire.drop_survivors(), 2u);
  const absl::StatusOr<CodecParams> back = CodecParamsFromWire(wire);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->sample_size, 77u);
  EXPECT_TRUE(back->sampled_means);
  EXPECT_EQ(back->tau, 0.25f);
  EXPECT_EQ(back->proportion, 0.125f);
  EXPECT_EQ(back->drop_ratio, 0.75f);
  EXPECT_EQ(back->drop_scope, kernels::DropScope::kPerTensor);
  EXPECT_EQ(back->drop_survivors, kernels::DropSurvivors::k2Bit);
  EXPECT_EQ(back->qsgd_levels, 127u);
  EXPECT_EQ(back->qsgd_bucket, 3u);

  // The defaults survive the trip too.
  CodecParamsToWire(CodecParams{}, &wire);
  const absl::StatusOr<CodecParams> defaults = CodecParamsFromWire(wire);
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->tau, kernels::CodecOptions{}.tau);
  EXPECT_EQ(defaults->drop_scope, kernels::CodecOptions{}.drop_scope);
  EXPECT_EQ(defaults->drop_survivors, kernels::DropSurvivors::kValues);
}

TEST(CodecParamsWireTest, DropSurvivorsRoundTripAndReadTheOldBool) {
  for (const kernels::DropSurvivors survivors :
       {kernels::DropSurvivors::kValues, kernels::DropSurvivors::k1Bit,
        kernels::DropSurvivors::k2Bit}) {
    CodecParams params;
    params.drop_survivors = survivors;
    tern::v1::CodecParams wire;
    CodecParamsToWire(params, &wire);
    std::string bytes;
    ASSERT_TRUE(wire.SerializeToString(&bytes));
    tern::v1::CodecParams parsed;
    ASSERT_TRUE(parsed.ParseFromString(bytes));
    const absl::StatusOr<CodecParams> back = CodecParamsFromWire(parsed);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->drop_survivors, survivors)
        << kernels::DropSurvivorsName(survivors);
  }
  // An older worker's `bool drop_quantize = 7` set to true: field 7, varint
  // 1. It meant the 1-bit sign-and-means survivors, and still does.
  tern::v1::CodecParams old;
  ASSERT_TRUE(old.ParseFromString(std::string("\x38\x01", 2)));
  const absl::StatusOr<CodecParams> params = CodecParamsFromWire(old);
  ASSERT_TRUE(params.ok()) << params.status();
  EXPECT_EQ(params->drop_survivors, kernels::DropSurvivors::k1Bit);
}

TEST(CodecParamsWireTest, AbsentFieldsAreTheKernelDefaults) {
  // What an older worker sends: no codec_params at all.
  const absl::StatusOr<CodecParams> params =
      CodecParamsFromWire(tern::v1::CodecParams());
  ASSERT_TRUE(params.ok()) << params.status();
  const kernels::CodecOptions defaults;
  EXPECT_EQ(params->sample_size, defaults.sample_size);
  EXPECT_EQ(params->sampled_means, defaults.sampled_means);
  EXPECT_EQ(params->tau, defaults.tau);
  EXPECT_EQ(params->proportion, defaults.proportion);
  EXPECT_EQ(params->drop_ratio, defaults.drop_ratio);
  EXPECT_EQ(params->drop_scope, defaults.drop_scope);
  EXPECT_EQ(params->drop_survivors, defaults.drop_survivors);
  EXPECT_EQ(params->qsgd_levels, defaults.qsgd_levels);
  EXPECT_EQ(params->qsgd_bucket, defaults.qsgd_bucket);
  EXPECT_GT(params->sample_size, 0u);
  EXPECT_GT(params->qsgd_bucket, 0u);
}

TEST(CodecParamsWireTest, TheEdgesOfEveryRangeAreAccepted) {
  tern::v1::CodecParams wire;
  wire.set_sample_size(1);
  wire.set_tau(1e-30f);
  wire.set_proportion(1e-6f);
  wire.set_drop_ratio(0.999999f);
  wire.set_drop_scope(1);
  wire.set_qsgd_levels(1);
  wire.set_qsgd_bucket(1);
  const absl::StatusOr<CodecParams> params = CodecParamsFromWire(wire);
  ASSERT_TRUE(params.ok()) << params.status();
  EXPECT_EQ(params->sample_size, 1u);
  EXPECT_EQ(params->tau, 1e-30f);
  EXPECT_EQ(params->qsgd_levels, 1u);
  EXPECT_EQ(params->qsgd_bucket, 1u);
  wire.set_qsgd_levels(kMaxQsgdLevels);
  wire.set_tau(1e30f);
  EXPECT_TRUE(CodecParamsFromWire(wire).ok());
}

struct BadParam {
  std::string name;
  std::function<void(tern::v1::CodecParams*)> set;
  std::string message;  // the whole message, after "run config: "
};

void PrintTo(const BadParam& bad, std::ostream* os) { *os << bad.name; }

class BadCodecParamTest : public ::testing::TestWithParam<BadParam> {};

TEST_P(BadCodecParamTest, IsRefusedNamingTheFieldAndValue) {
  tern::v1::JoinRequest join;
  join.mutable_config()->set_codec(tern::v1::CODEC_DROPPING);
  GetParam().set(join.mutable_config()->mutable_codec_params());
  const absl::StatusOr<JoinRequest> request = JoinFromWire(join);
  EXPECT_EQ(request.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(request.status().message(),
            absl::StrCat("run config: ", GetParam().message));
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

INSTANTIATE_TEST_SUITE_P(
    Ranges, BadCodecParamTest,
    ::testing::Values(
        BadParam{"NegativeTau", [](auto* p) { p->set_tau(-0.5f); },
                 "codec_params.tau -0.5 is not a finite number > 0"},
        BadParam{"NaNTau", [](auto* p) { p->set_tau(kNaN); },
                 "codec_params.tau nan is not a finite number > 0"},
        BadParam{"InfTau", [](auto* p) { p->set_tau(kInf); },
                 "codec_params.tau inf is not a finite number > 0"},
        BadParam{"ProportionOne", [](auto* p) { p->set_proportion(1.0f); },
                 "codec_params.proportion 1 is not in (0, 1)"},
        BadParam{"NegativeProportion",
                 [](auto* p) { p->set_proportion(-0.25f); },
                 "codec_params.proportion -0.25 is not in (0, 1)"},
        BadParam{"DropRatioOne", [](auto* p) { p->set_drop_ratio(1.0f); },
                 "codec_params.drop_ratio 1 is not in (0, 1)"},
        BadParam{"DropRatioAbove", [](auto* p) { p->set_drop_ratio(1.5f); },
                 "codec_params.drop_ratio 1.5 is not in (0, 1)"},
        BadParam{"NaNDropRatio", [](auto* p) { p->set_drop_ratio(kNaN); },
                 "codec_params.drop_ratio nan is not in (0, 1)"},
        BadParam{"DropScopeTwo", [](auto* p) { p->set_drop_scope(2); },
                 "codec_params.drop_scope 2 is not 0 (global) or 1 (per "
                 "tensor)"},
        BadParam{"DropSurvivorsThree",
                 [](auto* p) { p->set_drop_survivors(3); },
                 "codec_params.drop_survivors 3 is not 0 (values), 1 (1bit) "
                 "or 2 (2bit)"},
        BadParam{"QsgdLevels128", [](auto* p) { p->set_qsgd_levels(128); },
                 "codec_params.qsgd_levels 128 is not in [1, 127]"},
        BadParam{"QsgdLevelsHuge",
                 [](auto* p) { p->set_qsgd_levels(4000000000u); },
                 "codec_params.qsgd_levels 4000000000 is not in [1, 127]"}),
    [](const ::testing::TestParamInfo<BadParam>& info) {
      return info.param.name;
    });

TEST(CodecParamsWireTest, JoinCarriesTheCodecParams) {
  tern::v1::JoinRequest wire;
  wire.mutable_config()->set_codec(tern::v1::CODEC_QSGD);
  wire.mutable_config()->mutable_codec_params()->set_qsgd_levels(4);
  wire.mutable_config()->mutable_codec_params()->set_drop_survivors(2);
  const absl::StatusOr<JoinRequest> join = JoinFromWire(wire);
  ASSERT_TRUE(join.ok()) << join.status();
  EXPECT_EQ(join->config.codec, kernels::CodecId::kQsgd);
  EXPECT_EQ(join->config.codec_params.qsgd_levels, 4u);
  EXPECT_EQ(join->config.codec_params.drop_survivors,
            kernels::DropSurvivors::k2Bit);
  EXPECT_EQ(join->config.codec_params.qsgd_bucket,
            kernels::CodecOptions{}.qsgd_bucket);
}

TEST(RunCodecOptionsTest, CarriesCodecLayoutsClipAndParams) {
  RunConfig config;
  config.codec = kernels::CodecId::kTernGrad;
  config.clip = 2.0f;
  config.push_layout = kernels::Layout::kTernaryBase3;
  config.pull_layout = kernels::Layout::kSumRadix;
  config.codec_params.sample_size = 33;
  config.codec_params.sampled_means = true;
  config.codec_params.tau = 0.5f;
  config.codec_params.proportion = 0.25f;
  config.codec_params.drop_ratio = 0.5f;
  config.codec_params.drop_scope = kernels::DropScope::kPerTensor;
  config.codec_params.drop_survivors = kernels::DropSurvivors::k2Bit;
  config.codec_params.qsgd_levels = 5;
  config.codec_params.qsgd_bucket = 9;
  const kernels::CodecOptions options = RunCodecOptions(config);
  EXPECT_EQ(options.id, kernels::CodecId::kTernGrad);
  EXPECT_EQ(options.clip, 2.0f);
  EXPECT_EQ(options.push_layout, kernels::Layout::kTernaryBase3);
  EXPECT_EQ(options.pull_layout, kernels::Layout::kSumRadix);
  EXPECT_EQ(options.sample_size, 33u);
  EXPECT_TRUE(options.sampled_means);
  EXPECT_EQ(options.tau, 0.5f);
  EXPECT_EQ(options.proportion, 0.25f);
  EXPECT_EQ(options.drop_ratio, 0.5f);
  EXPECT_EQ(options.drop_scope, kernels::DropScope::kPerTensor);
  EXPECT_EQ(options.drop_survivors, kernels::DropSurvivors::k2Bit);
  EXPECT_EQ(options.qsgd_levels, 5u);
  EXPECT_EQ(options.qsgd_bucket, 9u);
}

TEST(WireTest, RepliesBecomeResponses) {
  tern::v1::JoinResponse join;
  JoinToWire(JoinReply{2, 17, {1, 5}}, &join);
  EXPECT_EQ(join.shard_index(), 2u);
  EXPECT_EQ(join.next_step(), 17u);
  EXPECT_THAT(join.chunk_keys(), ElementsAre(1, 5));
  EXPECT_FALSE(join.has_oldest_kept_step());  // an LPS's answer
  EXPECT_FALSE(join.has_live_from_step());
  JoinReply shard{2, 17, {1, 5}};
  shard.oldest_kept_step = 9;
  shard.live_from_step = 18;
  JoinToWire(shard, &join);
  EXPECT_EQ(join.oldest_kept_step(), 9u);
  EXPECT_EQ(join.live_from_step(), 18u);

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
