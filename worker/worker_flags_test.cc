#include "worker/worker_flags.h"

#include <cstdlib>
#include <string>

#include "common/flags/flags_testing.h"
#include "gtest/gtest.h"

namespace tern::worker {
namespace {

using ::tern::flags::ScopedEnv;
// Parses `args` (without the program name) into fresh options.
struct Parsed {
  WorkerOptions options;
  CLI::App app{"tern worker"};
  Parsed() { AddWorkerFlags(&app, &options); }
  void Parse(const std::string& args) { app.parse(args, false); }
};

TEST(WorkerFlagsTest, DefaultsStayWhenNothingIsGiven) {
  Parsed parsed;
  parsed.Parse("");
  const WorkerOptions defaults;
  EXPECT_EQ(parsed.options.codec, defaults.codec);
  EXPECT_EQ(parsed.options.steps, defaults.steps);
  EXPECT_EQ(parsed.options.partition_bytes, defaults.partition_bytes);
  EXPECT_EQ(parsed.options.shard_assignment, "even");
  EXPECT_TRUE(parsed.options.ps.empty());
}

TEST(WorkerFlagsTest, EveryFieldIsAFlagWithItsEnvVarAndDefaultInTheHelp) {
  Parsed parsed;
  flags::ExpectFlagsWithEnvironment(
      parsed.app,
      {"mode", "worker_id", "num_workers", "ps", "run_id", "seed",
       "rpc_timeout_s", "join_timeout_s", "model", "dataset", "data_dir",
       "batch_size", "steps", "threads", "device", "optimizer", "lr",
       "momentum", "weight_decay", "lr_schedule", "lr_step_every", "lr_gamma",
       "codec", "packing", "sum_packing", "clip", "clip_rule", "fp32_tensors",
       "min_compress_elems", "partition_bytes", "tau", "proportion",
       "drop_ratio", "drop_scope", "drop_survivors", "qsgd_levels",
       "qsgd_bucket", "sample_size", "sampled_means", "check_every",
       "eval_every", "final_eval", "metrics_out", "log_level", "pace_mbit"});
  const std::string help = parsed.app.help();
  EXPECT_NE(help.find("terngrad"), std::string::npos);
  EXPECT_NE(help.find("4194304"), std::string::npos);  // partition_bytes
}

TEST(WorkerFlagsTest, ParsesScalarsAndCommaSeparatedLists) {
  Parsed parsed;
  parsed.Parse(
      "--worker_id=1 --num_workers=4 --ps=h0:5000,h1:5001 --steps 20 "
      "--lr=0.05 --codec fp16 --fp32_tensors=fc.weight,fc.bias "
      "--partition_bytes 1024 --seed 18446744073709551615 "
      "--pace_mbit=31.6");
  const WorkerOptions& o = parsed.options;
  EXPECT_EQ(o.worker_id, 1u);
  EXPECT_EQ(o.num_workers, 4u);
  EXPECT_EQ(o.ps, (std::vector<std::string>{"h0:5000", "h1:5001"}));
  EXPECT_EQ(o.steps, 20u);
  EXPECT_EQ(o.lr, 0.05);
  EXPECT_EQ(o.codec, kernels::CodecId::kFp16);
  EXPECT_EQ(o.fp32_tensors, (std::vector<std::string>{"fc.weight", "fc.bias"}));
  EXPECT_EQ(o.partition_bytes, 1024u);
  EXPECT_EQ(o.seed, 18446744073709551615ull);
  EXPECT_EQ(o.pace_mbit, 31.6);
}

TEST(WorkerFlagsTest, EnvironmentOverridesDefaultsAndFlagsOverrideIt) {
  ScopedEnv codec("TERN_CODEC", "fp32");
  ScopedEnv ps("TERN_PS", "a:1,b:2,c:3");
  ScopedEnv steps("TERN_STEPS", "77");
  {
    Parsed parsed;
    parsed.Parse("");
    EXPECT_EQ(parsed.options.codec, kernels::CodecId::kFp32);
    EXPECT_EQ(parsed.options.ps,
              (std::vector<std::string>{"a:1", "b:2", "c:3"}));
    EXPECT_EQ(parsed.options.steps, 77u);
  }
  {
    Parsed parsed;
    parsed.Parse("--codec=fp16 --steps=5");
    EXPECT_EQ(parsed.options.codec, kernels::CodecId::kFp16);
    EXPECT_EQ(parsed.options.steps, 5u);
  }
}

TEST(WorkerFlagsTest, EnvironmentValuesAreValidatedToo) {
  ScopedEnv codec("TERN_CODEC", "gzip");
  Parsed parsed;
  EXPECT_THROW(parsed.Parse(""), CLI::ValidationError);
}

// The message of the error a parse of `args` throws ("" when none).
std::string ParseError(const std::string& args) {
  Parsed parsed;
  try {
    parsed.Parse(args);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

TEST(WorkerFlagsTest, WeightGradModesCheckWhatTheLpsCanRun) {
  WorkerOptions options;
  options.mode = TrainMode::kWeightGrad;
  options.ps = {"lps:50051"};
  EXPECT_TRUE(ValidateWorkerOptions(options).ok());
  options.ps = {"a:1", "b:2"};
  EXPECT_NE(ValidateWorkerOptions(options).message().find("one --ps"),
            std::string::npos);
  options.ps = {"lps:50051"};
  options.optimizer = "adam";
  EXPECT_NE(ValidateWorkerOptions(options).message().find("--optimizer=adam"),
            std::string::npos);
  options.optimizer = "adagrad";
  EXPECT_NE(
      ValidateWorkerOptions(options).message().find("--optimizer=adagrad"),
      std::string::npos);
  options.optimizer = "momentum";
  options.overlap = true;
  EXPECT_NE(ValidateWorkerOptions(options).message().find("--overlap"),
            std::string::npos);
  options.overlap = false;
  options.codec = kernels::CodecId::kQsgd;
  EXPECT_NE(ValidateWorkerOptions(options).message().find("--codec=qsgd"),
            std::string::npos);
  options.mode = TrainMode::kGaia;
  options.codec = kernels::CodecId::kFp32;
  EXPECT_TRUE(ValidateWorkerOptions(options).ok());
  options.checkpoint_dir = "/ckpt";
  EXPECT_NE(ValidateWorkerOptions(options).message().find(
                "--checkpoint_dir with --mode=gaia"),
            std::string::npos);
}

TEST(WorkerFlagsTest, DataSliceFlags) {
  Parsed parsed;
  parsed.Parse("--worker_id=1 --num_workers=2 --data_slice=5 "
               "--num_data_slices=6");
  EXPECT_EQ(parsed.options.DataSlice(), 5u);
  EXPECT_EQ(parsed.options.NumDataSlices(), 6u);
  Parsed defaults;
  defaults.Parse("--worker_id=1 --num_workers=2");
  EXPECT_EQ(defaults.options.DataSlice(), 1u);
  EXPECT_EQ(defaults.options.NumDataSlices(), 2u);
}

TEST(WorkerFlagsTest, CheckpointFlags) {
  Parsed parsed;
  parsed.Parse("--checkpoint_dir=/ckpt --checkpoint_every=25");
  EXPECT_EQ(parsed.options.checkpoint_dir, "/ckpt");
  EXPECT_EQ(parsed.options.checkpoint_every, 25u);
  Parsed defaults;
  EXPECT_EQ(defaults.options.checkpoint_dir, "");
  EXPECT_EQ(defaults.options.checkpoint_every, 100u);
}

TEST(WorkerFlagsTest, BadValuesAreRejectedNamingTheFlag) {
  const struct {
    const char* args;
    const char* flag;
  } cases[] = {
      {"--codec=zip", "--codec"},
      {"--mode=async", "--mode"},
      {"--model resnet", "--model"},
      {"--dataset imagenet", "--dataset"},
      {"--optimizer=rmsprop", "--optimizer"},
      {"--lr_schedule=cosine", "--lr_schedule"},
      {"--packing=3bit", "--packing"},
      {"--sum_packing=zip", "--sum_packing"},
      {"--log_level=loud", "--log_level"},
      {"--batch_size=0", "--batch_size"},
      {"--batch_size=-1", "--batch_size"},
      {"--num_workers=0", "--num_workers"},
      {"--steps=0", "--steps"},
      {"--lr=-0.1", "--lr"},
      {"--lr=nan", "--lr"},
      {"--momentum=1.5", "--momentum"},
      {"--clip=-1", "--clip"},
      {"--rpc_timeout_s=0", "--rpc_timeout_s"},
      {"--partition_bytes=2", "--partition_bytes"},
      {"--ps=a:1,nohost", "--ps"},
      {"--ps=a:", "--ps"},
      {"--threads=0", "--threads"},
      {"--device=gpu", "--device"},
      {"--device=cuda:", "--device"},
      {"--device=cuda:-1", "--device"},
      {"--device=cuda:01", "--device"},
      {"--codec=int8", "--codec"},
      {"--tau=0", "--tau"},
      {"--tau=-0.5", "--tau"},
      {"--tau=nan", "--tau"},
      {"--tau=inf", "--tau"},
      {"--proportion=0", "--proportion"},
      {"--proportion=1", "--proportion"},
      {"--proportion=-0.1", "--proportion"},
      {"--drop_ratio=1", "--drop_ratio"},
      {"--drop_ratio=1.5", "--drop_ratio"},
      {"--drop_ratio=nan", "--drop_ratio"},
      {"--drop_scope=layer", "--drop_scope"},
      {"--drop_survivors=true", "--drop_survivors"},
      {"--drop_survivors=3bit", "--drop_survivors"},
      {"--qsgd_levels=0", "--qsgd_levels"},
      {"--qsgd_levels=128", "--qsgd_levels"},
      {"--qsgd_bucket=0", "--qsgd_bucket"},
      {"--sample_size=0", "--sample_size"},
      {"--sample_size=-4", "--sample_size"},
      {"--pace_mbit=-1", "--pace_mbit"},
      {"--pace_mbit=nan", "--pace_mbit"},
      {"--pace_mbit=40000", "--pace_mbit"},
      {"--shard_assignment=lpt", "--shard_assignment"},
  };
  for (const auto& c : cases) {
    const std::string error = ParseError(c.args);
    EXPECT_NE(error, "") << c.args << " was accepted";
    EXPECT_NE(error.find(c.flag), std::string::npos)
        << c.args << " gave: " << error;
  }
  EXPECT_NE(ParseError("--codec=zip").find("zip"), std::string::npos);
}

TEST(WorkerFlagsTest, EveryGradientCodecIsAccepted) {
  for (const char* codec : {"terngrad", "fp32", "fp16", "onebit", "threshold",
                            "adaptive", "dropping", "qsgd"}) {
    Parsed parsed;
    parsed.Parse(std::string("--codec=") + codec);
    EXPECT_STREQ(kernels::CodecName(parsed.options.codec), codec);
  }
}

TEST(WorkerFlagsTest, TheCompressorsFlagsParseAndDefaultToTheKernels) {
  {
    Parsed parsed;
    parsed.Parse("");
    const kernels::CodecOptions defaults;
    EXPECT_EQ(parsed.options.tau, defaults.tau);
    EXPECT_EQ(parsed.options.proportion, defaults.proportion);
    EXPECT_EQ(parsed.options.drop_ratio, defaults.drop_ratio);
    EXPECT_EQ(parsed.options.drop_scope, "global");
    EXPECT_EQ(parsed.options.drop_survivors, "values");
    EXPECT_EQ(parsed.options.qsgd_levels, defaults.qsgd_levels);
    EXPECT_EQ(parsed.options.qsgd_bucket, defaults.qsgd_bucket);
    EXPECT_EQ(parsed.options.sample_size, defaults.sample_size);
    EXPECT_EQ(parsed.options.sampled_means, defaults.sampled_means);
  }
  Parsed parsed;
  parsed.Parse(
      "--codec=dropping --tau=0.25 --proportion 0.125 --drop_ratio=0.9 "
      "--drop_scope=tensor --drop_survivors=2bit --qsgd_levels=127 "
      "--qsgd_bucket=1 --sample_size=1 --sampled_means");
  const WorkerOptions& o = parsed.options;
  EXPECT_EQ(o.tau, 0.25f);
  EXPECT_EQ(o.proportion, 0.125f);
  EXPECT_EQ(o.drop_ratio, 0.9f);
  EXPECT_EQ(o.drop_scope, "tensor");
  EXPECT_EQ(o.drop_survivors, "2bit");
  EXPECT_EQ(o.qsgd_levels, 127u);
  EXPECT_EQ(o.qsgd_bucket, 1u);
  EXPECT_EQ(o.sample_size, 1u);
  EXPECT_TRUE(o.sampled_means);
  EXPECT_TRUE(ValidateWorkerOptions([&] {
                WorkerOptions copy = o;
                copy.ps = {"h:1"};
                return copy;
              }())
                  .ok());
}

TEST(WorkerFlagsTest, SwitchesTakeExplicitValuesAndTheEnvironment) {
  {
    // tern launch passes a given switch on as --name=<value>.
    Parsed parsed;
    parsed.Parse("--sampled_means=true");
    EXPECT_TRUE(parsed.options.sampled_means);
    const auto given =
        parsed.app.get_option("--sampled_means")->reduced_results();
    ASSERT_EQ(given.size(), 1u);
    Parsed again;
    again.Parse("--sampled_means=" + given[0]);
    EXPECT_TRUE(again.options.sampled_means);
  }
  {
    Parsed parsed;
    parsed.Parse("--sampled_means");
    const auto given =
        parsed.app.get_option("--sampled_means")->reduced_results();
    ASSERT_EQ(given.size(), 1u);
    Parsed again;
    again.Parse("--sampled_means=" + given[0]);
    EXPECT_TRUE(again.options.sampled_means) << given[0];
  }
  {
    Parsed parsed;
    parsed.Parse("--sampled_means=false");
    EXPECT_FALSE(parsed.options.sampled_means);
  }
  ScopedEnv survivors("TERN_DROP_SURVIVORS", "1bit");
  ScopedEnv means("TERN_SAMPLED_MEANS", "1");
  ScopedEnv tau("TERN_TAU", "0.5");
  ScopedEnv scope("TERN_DROP_SCOPE", "tensor");
  ScopedEnv levels("TERN_QSGD_LEVELS", "3");
  Parsed parsed;
  parsed.Parse("");
  EXPECT_EQ(parsed.options.drop_survivors, "1bit");
  EXPECT_TRUE(parsed.options.sampled_means);
  EXPECT_EQ(parsed.options.tau, 0.5f);
  EXPECT_EQ(parsed.options.drop_scope, "tensor");
  EXPECT_EQ(parsed.options.qsgd_levels, 3u);
  Parsed overridden;
  overridden.Parse("--drop_survivors=values --sampled_means=false --tau=0.125");
  EXPECT_EQ(overridden.options.drop_survivors, "values");
  EXPECT_FALSE(overridden.options.sampled_means);
  EXPECT_EQ(overridden.options.tau, 0.125f);
}

TEST(WorkerFlagsTest, TheHelpNamesThePapersAndThatResidualsAreCheckpointed) {
  Parsed parsed;
  const std::string help = parsed.app.help();
  for (const char* text :
       {"Strom 2015", "Dryden et al. 2016", "Aji & Heafield 2017",
        "Alistarh et al. 2017", "Seide et al. 2014",
        "residuals are part of the worker's checkpoint",
        "onebit", "qsgd", "threshold", "adaptive", "dropping"}) {
    EXPECT_NE(help.find(text), std::string::npos) << text;
  }
}

TEST(ValidateWorkerOptionsTest, AcceptsAGoodConfiguration) {
  WorkerOptions o;
  o.ps = {"127.0.0.1:5000"};
  EXPECT_TRUE(ValidateWorkerOptions(o).ok());
}

TEST(ValidateWorkerOptionsTest, RejectsWhatOneFlagCannotSee) {
  WorkerOptions o;
  o.ps = {"127.0.0.1:5000"};
  o.num_workers = 2;
  o.worker_id = 2;
  absl::Status status = ValidateWorkerOptions(o);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--worker_id"), absl::string_view::npos);
  EXPECT_NE(status.message().find("--num_workers"), absl::string_view::npos);

  o.worker_id = 0;
  o.ps.clear();
  status = ValidateWorkerOptions(o);
  EXPECT_NE(status.message().find("--ps"), absl::string_view::npos);

  o.ps = {"no-port"};
  status = ValidateWorkerOptions(o);
  EXPECT_NE(status.message().find("no-port"), absl::string_view::npos);

  o.ps = {"h:1"};
  o.codec = kernels::CodecId::kInt8;
  status = ValidateWorkerOptions(o);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--codec"), absl::string_view::npos);
  o.codec = kernels::CodecId::kUnspecified;
  EXPECT_FALSE(ValidateWorkerOptions(o).ok());
  o.codec = kernels::CodecId::kTernGrad;
  o.mode = static_cast<TrainMode>(7);  // no flag can give this
  status = ValidateWorkerOptions(o);
  EXPECT_NE(status.message().find("--mode"), absl::string_view::npos);
  EXPECT_NE(status.message().find("terngrad, weightgrad, gaia"),
            absl::string_view::npos);
}

TEST(ValidateWorkerOptionsTest, TlsNeedsTheCaToVerifyTheShards) {
  Parsed parsed;
  parsed.Parse(
      "--ps=127.0.0.1:5000 --tls_cert=/w.pem --tls_key=/w.key "
      "--tls_ca=/ca.pem");
  EXPECT_EQ(parsed.options.tls.cert, "/w.pem");
  EXPECT_EQ(parsed.options.tls.key, "/w.key");
  EXPECT_EQ(parsed.options.tls.ca, "/ca.pem");
  EXPECT_TRUE(ValidateWorkerOptions(parsed.options).ok());

  WorkerOptions o = parsed.options;
  o.tls.ca.clear();
  absl::Status status = ValidateWorkerOptions(o);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--tls_ca"), absl::string_view::npos);
  o.tls.ca = "/ca.pem";
  o.tls.key.clear();
  status = ValidateWorkerOptions(o);
  EXPECT_NE(status.message().find("--tls_key"), absl::string_view::npos);
  // Only the CA: the worker verifies its shards and shows no certificate.
  o.tls.cert.clear();
  EXPECT_TRUE(ValidateWorkerOptions(o).ok());
}

TEST(ValidateWorkerOptionsTest, RejectsCompressorValuesOutOfRange) {
  const struct {
    const char* flag;
    void (*set)(WorkerOptions*);
  } cases[] = {
      {"--tau", [](WorkerOptions* o) { o->tau = 0; }},
      {"--proportion", [](WorkerOptions* o) { o->proportion = 1; }},
      {"--drop_ratio", [](WorkerOptions* o) { o->drop_ratio = 0; }},
      {"--drop_scope", [](WorkerOptions* o) { o->drop_scope = "row"; }},
      {"--qsgd_levels", [](WorkerOptions* o) { o->qsgd_levels = 200; }},
      {"--qsgd_bucket", [](WorkerOptions* o) { o->qsgd_bucket = 0; }},
      {"--sample_size", [](WorkerOptions* o) { o->sample_size = 0; }},
      {"--clip", [](WorkerOptions* o) { o->clip = -2; }},
  };
  for (const auto& c : cases) {
    WorkerOptions o;
    o.ps = {"h:1"};
    ASSERT_TRUE(ValidateWorkerOptions(o).ok());
    c.set(&o);
    const absl::Status status = ValidateWorkerOptions(o);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.flag;
    EXPECT_NE(status.message().find(c.flag), absl::string_view::npos)
        << c.flag << ": " << status;
  }
}

TEST(WorkerFlagsTest, ModesAndCodecsAreEnumsParsedFromTheirNames) {
  const struct {
    const char* name;
    TrainMode mode;
  } modes[] = {{"terngrad", TrainMode::kTernGrad},
               {"weightgrad", TrainMode::kWeightGrad},
               {"gaia", TrainMode::kGaia}};
  for (const auto& m : modes) {
    Parsed parsed;
    parsed.Parse(std::string("--mode=") + m.name);
    EXPECT_EQ(parsed.options.mode, m.mode) << m.name;
    EXPECT_EQ(TrainModeName(m.mode), m.name);
    EXPECT_EQ(UsesLocalParameterServer(m.mode),
              m.mode != TrainMode::kTernGrad);
  }
  ScopedEnv mode("TERN_MODE", "gaia");
  Parsed from_env;
  from_env.Parse("--codec=fp32");
  EXPECT_EQ(from_env.options.mode, TrainMode::kGaia);
  EXPECT_EQ(from_env.options.codec, kernels::CodecId::kFp32);
}

TEST(WorkerFlagsTest, BadModesAndCodecsAreRefusedListingTheValidNames) {
  // A number is not a name, though the enum is stored as one.
  for (const char* args : {"--mode=async", "--mode=1", "--mode=TernGrad",
                           "--mode="}) {
    const std::string error = ParseError(args);
    EXPECT_NE(error.find("--mode"), std::string::npos) << args << ": " << error;
    EXPECT_NE(error.find("terngrad, weightgrad, gaia"), std::string::npos)
        << args << ": " << error;
  }
  for (const char* args : {"--codec=zip", "--codec=3", "--codec=int8"}) {
    const std::string error = ParseError(args);
    EXPECT_NE(error.find("--codec"), std::string::npos) << args << ": " << error;
    for (const char* name : {"terngrad", "fp16", "onebit", "dropping", "qsgd"}) {
      EXPECT_NE(error.find(name), std::string::npos) << args << ": " << error;
    }
  }
  const absl::StatusOr<TrainMode> parsed = ParseTrainMode("async");
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("terngrad, weightgrad, gaia"),
            absl::string_view::npos);
}

TEST(WorkerFlagsTest, TheHelpShowsTheDefaultModeAndCodecByName) {
  Parsed parsed;
  const std::string help = parsed.app.help();
  const CLI::Option* mode = parsed.app.get_option("--mode");
  const CLI::Option* codec = parsed.app.get_option("--codec");
  EXPECT_EQ(mode->get_default_str(), "terngrad");
  EXPECT_EQ(codec->get_default_str(), "terngrad");
  EXPECT_NE(help.find("{terngrad, weightgrad, gaia}"), std::string::npos)
      << help;
}

TEST(WorkerFlagsTest, ABadLogLevelIsRefusedNamingTheLevels) {
  // The same check as tern ps and tern global (common/flags).
  const std::string error = ParseError("--log_level=loud");
  EXPECT_NE(error.find("--log_level"), std::string::npos) << error;
  EXPECT_NE(error.find("unknown log level 'loud' (expected trace, debug, "
                       "info, warn, error, critical or off)"),
            std::string::npos)
      << error;
}

}  // namespace
}  // namespace tern::worker
