#include "worker/codec_config.h"

#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/codec_registry.h"

namespace tern::worker {
namespace {

using kernels::CodecId;
using kernels::Layout;
using ::testing::HasSubstr;

TEST(ParseGradientCodecTest, TakesEveryGradientCodecAndNothingElse) {
  const struct {
    const char* name;
    CodecId id;
  } cases[] = {
      {"terngrad", CodecId::kTernGrad},   {"fp32", CodecId::kFp32},
      {"fp16", CodecId::kFp16},           {"onebit", CodecId::kOneBit},
      {"threshold", CodecId::kThreshold}, {"adaptive", CodecId::kAdaptive},
      {"dropping", CodecId::kDropping},   {"qsgd", CodecId::kQsgd},
  };
  for (const auto& c : cases) {
    const absl::StatusOr<CodecId> id = ParseGradientCodec(c.name);
    ASSERT_TRUE(id.ok()) << c.name << ": " << id.status();
    EXPECT_EQ(*id, c.id) << c.name;
    EXPECT_THAT(GradientCodecNames(), HasSubstr(c.name));
  }
  // int8 is WeightGrad's weight codec: the kernels know it, --codec not.
  ASSERT_TRUE(kernels::ParseCodecName("int8").ok());
  for (const char* bad : {"int8", "gzip", "", "TernGrad", "unspecified"}) {
    const absl::StatusOr<CodecId> id = ParseGradientCodec(bad);
    EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(id.status().message(), HasSubstr("--codec"));
    EXPECT_THAT(id.status().message(), HasSubstr("qsgd"));
  }
  EXPECT_THAT(GradientCodecNames(), ::testing::Not(HasSubstr("int8")));
}

TEST(MakeRunCodecOptionsTest, DefaultsAreTheKernelsDefaultsButTernGradLayouts) {
  const WorkerOptions flags;
  const absl::StatusOr<kernels::CodecOptions> options =
      MakeRunCodecOptions(flags);
  ASSERT_TRUE(options.ok()) << options.status();
  const kernels::CodecOptions defaults;
  EXPECT_EQ(options->id, CodecId::kTernGrad);
  EXPECT_EQ(options->clip, 2.5f);
  // A run's TernGrad layouts default to the fewest bytes, not to the
  // kernels' defaults (which the WeightGrad servers rely on).
  EXPECT_EQ(options->push_layout, Layout::kTernaryBase3);
  EXPECT_EQ(options->pull_layout, Layout::kSumHuffman);
  EXPECT_EQ(options->sample_size, defaults.sample_size);
  EXPECT_EQ(options->sampled_means, defaults.sampled_means);
  EXPECT_EQ(options->tau, defaults.tau);
  EXPECT_EQ(options->proportion, defaults.proportion);
  EXPECT_EQ(options->drop_ratio, defaults.drop_ratio);
  EXPECT_EQ(options->drop_scope, defaults.drop_scope);
  EXPECT_EQ(options->drop_survivors, defaults.drop_survivors);
  EXPECT_EQ(options->drop_survivors, kernels::DropSurvivors::kValues);
  EXPECT_EQ(options->clip_rule, kernels::ClipRule::kWorker);
  EXPECT_EQ(options->clip_rule, defaults.clip_rule);
  EXPECT_EQ(options->qsgd_levels, defaults.qsgd_levels);
  EXPECT_EQ(options->qsgd_bucket, defaults.qsgd_bucket);
}

TEST(MakeRunCodecOptionsTest, CarriesEveryFlag) {
  WorkerOptions flags;
  flags.codec = CodecId::kDropping;
  flags.clip = 0;
  flags.clip_rule = "shared";
  flags.tau = 0.5f;
  flags.proportion = 0.25f;
  flags.drop_ratio = 0.9f;
  flags.drop_scope = "tensor";
  flags.drop_survivors = "2bit";
  flags.qsgd_levels = 7;
  flags.qsgd_bucket = 64;
  flags.sample_size = 100;
  flags.sampled_means = true;
  const absl::StatusOr<kernels::CodecOptions> options =
      MakeRunCodecOptions(flags);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->id, CodecId::kDropping);
  EXPECT_EQ(options->clip, 0.0f);
  EXPECT_EQ(options->clip_rule, kernels::ClipRule::kShared);
  // A compressor writes its own layout: left to it.
  EXPECT_EQ(options->push_layout, Layout::kUnspecified);
  EXPECT_EQ(options->pull_layout, Layout::kUnspecified);
  EXPECT_EQ(options->tau, 0.5f);
  EXPECT_EQ(options->proportion, 0.25f);
  EXPECT_EQ(options->drop_ratio, 0.9f);
  EXPECT_EQ(options->drop_scope, kernels::DropScope::kPerTensor);
  EXPECT_EQ(options->drop_survivors, kernels::DropSurvivors::k2Bit);
  EXPECT_EQ(options->qsgd_levels, 7u);
  EXPECT_EQ(options->qsgd_bucket, 64u);
  EXPECT_EQ(options->sample_size, 100u);
  EXPECT_TRUE(options->sampled_means);

  flags.codec = CodecId::kTernGrad;
  flags.packing = "base3";
  flags.sum_packing = "radix";
  ASSERT_TRUE(MakeRunCodecOptions(flags).ok());
  EXPECT_EQ(MakeRunCodecOptions(flags)->push_layout, Layout::kTernaryBase3);
  EXPECT_EQ(MakeRunCodecOptions(flags)->pull_layout, Layout::kSumRadix);
  flags.sum_packing = "huffman";
  EXPECT_EQ(MakeRunCodecOptions(flags)->pull_layout, Layout::kSumHuffman);
  flags.codec = CodecId::kFp16;
  EXPECT_EQ(MakeRunCodecOptions(flags)->push_layout, Layout::kRaw);
  EXPECT_EQ(MakeRunCodecOptions(flags)->pull_layout, Layout::kRaw);
}

TEST(MakeRunCodecOptionsTest, RefusesValuesOutOfRangeNamingTheFlag) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const struct {
    const char* flag;
    void (*set)(WorkerOptions*, float nan, float inf);
  } cases[] = {
      {"--codec",
       [](WorkerOptions* o, float, float) { o->codec = CodecId::kInt8; }},
      {"--clip", [](WorkerOptions* o, float, float) { o->clip = -1; }},
      {"--clip_rule",
       [](WorkerOptions* o, float, float) { o->clip_rule = "mean"; }},
      {"--tau", [](WorkerOptions* o, float, float) { o->tau = 0; }},
      {"--tau", [](WorkerOptions* o, float, float) { o->tau = -0.1f; }},
      {"--tau", [](WorkerOptions* o, float nan, float) { o->tau = nan; }},
      {"--tau", [](WorkerOptions* o, float, float inf) { o->tau = inf; }},
      {"--proportion",
       [](WorkerOptions* o, float, float) { o->proportion = 0; }},
      {"--proportion",
       [](WorkerOptions* o, float, float) { o->proportion = 1; }},
      {"--proportion",
       [](WorkerOptions* o, float nan, float) { o->proportion = nan; }},
      {"--drop_ratio",
       [](WorkerOptions* o, float, float) { o->drop_ratio = 1; }},
      {"--drop_ratio",
       [](WorkerOptions* o, float, float) { o->drop_ratio = -0.5f; }},
      {"--drop_scope",
       [](WorkerOptions* o, float, float) { o->drop_scope = "layer"; }},
      {"--drop_survivors",
       [](WorkerOptions* o, float, float) { o->drop_survivors = "true"; }},
      {"--qsgd_levels",
       [](WorkerOptions* o, float, float) { o->qsgd_levels = 0; }},
      {"--qsgd_levels",
       [](WorkerOptions* o, float, float) { o->qsgd_levels = 128; }},
      {"--qsgd_bucket",
       [](WorkerOptions* o, float, float) { o->qsgd_bucket = 0; }},
      {"--sample_size",
       [](WorkerOptions* o, float, float) { o->sample_size = 0; }},
      {"--packing",
       [](WorkerOptions* o, float, float) { o->packing = "3bit"; }},
      {"--sum_packing",
       [](WorkerOptions* o, float, float) { o->sum_packing = "zip"; }},
  };
  for (const auto& c : cases) {
    WorkerOptions flags;
    c.set(&flags, nan, inf);
    const absl::Status status = MakeRunCodecOptions(flags).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.flag;
    EXPECT_THAT(status.message(), HasSubstr(c.flag));
  }
  // The edges of the ranges are fine.
  WorkerOptions edges;
  edges.qsgd_levels = kMaxQsgdLevels;
  edges.qsgd_bucket = 1;
  edges.sample_size = 1;
  edges.proportion = 1e-6f;
  edges.drop_ratio = 0.999f;
  edges.tau = 1e-20f;
  EXPECT_TRUE(MakeRunCodecOptions(edges).ok());
}

TEST(LayoutsOfTest, NamesTheLayoutEachCodecWrites) {
  const struct {
    const char* codec;
    const char* drop_survivors;
    Layout push;
    Layout pull;
  } cases[] = {
      {"terngrad", "values", Layout::kTernaryBase3, Layout::kSumHuffman},
      {"fp32", "values", Layout::kRaw, Layout::kRaw},
      {"fp16", "values", Layout::kRaw, Layout::kRaw},
      {"onebit", "values", Layout::kSignBits, Layout::kSignBits},
      {"threshold", "values", Layout::kIndexSign, Layout::kIndexSign},
      {"adaptive", "values", Layout::kIndexSign, Layout::kIndexSign},
      {"dropping", "values", Layout::kIndexValue, Layout::kIndexValue},
      {"dropping", "1bit", Layout::kIndexSign, Layout::kIndexSign},
      {"dropping", "2bit", Layout::kIndex2Bit, Layout::kIndex2Bit},
      {"qsgd", "values", Layout::kQsgdLevels, Layout::kQsgdLevels},
  };
  for (const auto& c : cases) {
    WorkerOptions flags;
    flags.codec = *ParseGradientCodec(c.codec);
    flags.drop_survivors = c.drop_survivors;
    const absl::StatusOr<kernels::CodecOptions> options =
        MakeRunCodecOptions(flags);
    ASSERT_TRUE(options.ok()) << options.status();
    const RunLayouts layouts = LayoutsOf(*options);
    EXPECT_EQ(layouts.push, c.push) << c.codec;
    EXPECT_EQ(layouts.pull, c.pull) << c.codec;

    // The kernels' codec writes that layout, and accepts it named.
    absl::StatusOr<std::unique_ptr<kernels::Codec>> codec =
        kernels::MakeCodec(*options);
    ASSERT_TRUE(codec.ok()) << c.codec << ": " << codec.status();
    const std::vector<float> values = {0.5f, -0.25f, 0.0f, 2.0f, -1.0f};
    kernels::EncodeContext context;
    const absl::StatusOr<kernels::Payload> payload =
        (*codec)->Encode(values, context);
    ASSERT_TRUE(payload.ok()) << c.codec << ": " << payload.status();
    EXPECT_EQ(payload->layout, c.push) << c.codec;
    kernels::CodecOptions named = *options;
    named.push_layout = layouts.push;
    named.pull_layout = layouts.pull;
    EXPECT_TRUE(kernels::MakeCodec(named).ok()) << c.codec;
  }
}

TEST(CodecToRunConfigTest, FillsCodecLayoutsClipAndEveryParam) {
  WorkerOptions flags;
  flags.codec = CodecId::kQsgd;
  flags.clip = 1.5;
  flags.qsgd_levels = 3;
  flags.qsgd_bucket = 128;
  flags.drop_scope = "tensor";
  flags.sampled_means = true;
  const absl::StatusOr<kernels::CodecOptions> options =
      MakeRunCodecOptions(flags);
  ASSERT_TRUE(options.ok());
  tern::v1::RunConfig config;
  CodecToRunConfig(*options, &config);
  EXPECT_EQ(config.codec(), tern::v1::CODEC_QSGD);
  EXPECT_EQ(config.push_layout(), tern::v1::LAYOUT_QSGD_LEVELS);
  EXPECT_EQ(config.pull_layout(), tern::v1::LAYOUT_QSGD_LEVELS);
  EXPECT_EQ(config.clip(), 1.5f);
  const tern::v1::CodecParams& params = config.codec_params();
  EXPECT_EQ(params.qsgd_levels(), 3u);
  EXPECT_EQ(params.qsgd_bucket(), 128u);
  EXPECT_EQ(params.drop_scope(), 1u);
  EXPECT_TRUE(params.sampled_means());
  EXPECT_EQ(params.drop_survivors(), 0u);
  EXPECT_EQ(params.tau(), options->tau);
  EXPECT_EQ(params.proportion(), options->proportion);
  EXPECT_EQ(params.drop_ratio(), options->drop_ratio);
  EXPECT_EQ(params.sample_size(), options->sample_size);
  // Every field is sent, defaults too, so no shard guesses.
  EXPECT_GT(params.tau(), 0.0f);
  EXPECT_GT(params.sample_size(), 0u);
}

}  // namespace
}  // namespace tern::worker
