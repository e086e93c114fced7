#include "worker/worker_flags.h"

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace tern::worker {
namespace {

// Parses `args` (without the program name) into fresh options.
struct Parsed {
  WorkerOptions options;
  CLI::App app{"tern worker"};
  Parsed() { AddWorkerFlags(&app, &options); }
  void Parse(const std::string& args) { app.parse(args, false); }
};

// Sets an environment variable for the lifetime of the object.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    setenv(name, value, 1);
  }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

TEST(WorkerFlagsTest, DefaultsStayWhenNothingIsGiven) {
  Parsed parsed;
  parsed.Parse("");
  const WorkerOptions defaults;
  EXPECT_EQ(parsed.options.codec, defaults.codec);
  EXPECT_EQ(parsed.options.steps, defaults.steps);
  EXPECT_EQ(parsed.options.partition_bytes, defaults.partition_bytes);
  EXPECT_TRUE(parsed.options.ps.empty());
}

TEST(WorkerFlagsTest, EveryFieldIsAFlagWithItsEnvVarAndDefaultInTheHelp) {
  Parsed parsed;
  const std::string help = parsed.app.help();
  for (const char* name : {"worker_id",
                           "num_workers",
                           "ps",
                           "run_id",
                           "seed",
                           "rpc_timeout_s",
                           "join_timeout_s",
                           "model",
                           "dataset",
                           "data_dir",
                           "batch_size",
                           "steps",
                           "threads",
                           "optimizer",
                           "lr",
                           "momentum",
                           "weight_decay",
                           "lr_schedule",
                           "lr_step_every",
                           "lr_gamma",
                           "codec",
                           "packing",
                           "sum_packing",
                           "clip",
                           "fp32_tensors",
                           "min_compress_elems",
                           "partition_bytes",
                           "check_every",
                           "eval_every",
                           "metrics_out",
                           "log_level"}) {
    const std::string flag = std::string("--") + name;
    EXPECT_NE(parsed.app.get_option_no_throw(flag), nullptr) << flag;
    std::string env = std::string("TERN_") + name;
    for (char& c : env) c = static_cast<char>(std::toupper(c));
    EXPECT_NE(help.find(env), std::string::npos) << env;
  }
  EXPECT_NE(help.find("terngrad"), std::string::npos);
  EXPECT_NE(help.find("4194304"), std::string::npos);  // partition_bytes
}

TEST(WorkerFlagsTest, ParsesScalarsAndCommaSeparatedLists) {
  Parsed parsed;
  parsed.Parse(
      "--worker_id=1 --num_workers=4 --ps=h0:5000,h1:5001 --steps 20 "
      "--lr=0.05 --codec fp16 --fp32_tensors=fc.weight,fc.bias "
      "--partition_bytes 1024 --seed 18446744073709551615");
  const WorkerOptions& o = parsed.options;
  EXPECT_EQ(o.worker_id, 1u);
  EXPECT_EQ(o.num_workers, 4u);
  EXPECT_EQ(o.ps, (std::vector<std::string>{"h0:5000", "h1:5001"}));
  EXPECT_EQ(o.steps, 20u);
  EXPECT_EQ(o.lr, 0.05);
  EXPECT_EQ(o.codec, "fp16");
  EXPECT_EQ(o.fp32_tensors, (std::vector<std::string>{"fc.weight", "fc.bias"}));
  EXPECT_EQ(o.partition_bytes, 1024u);
  EXPECT_EQ(o.seed, 18446744073709551615ull);
}

TEST(WorkerFlagsTest, EnvironmentOverridesDefaultsAndFlagsOverrideIt) {
  ScopedEnv codec("TERN_CODEC", "fp32");
  ScopedEnv ps("TERN_PS", "a:1,b:2,c:3");
  ScopedEnv steps("TERN_STEPS", "77");
  {
    Parsed parsed;
    parsed.Parse("");
    EXPECT_EQ(parsed.options.codec, "fp32");
    EXPECT_EQ(parsed.options.ps,
              (std::vector<std::string>{"a:1", "b:2", "c:3"}));
    EXPECT_EQ(parsed.options.steps, 77u);
  }
  {
    Parsed parsed;
    parsed.Parse("--codec=fp16 --steps=5");
    EXPECT_EQ(parsed.options.codec, "fp16");
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

TEST(WorkerFlagsTest, BadValuesAreRejectedNamingTheFlag) {
  const struct {
    const char* args;
    const char* flag;
  } cases[] = {
      {"--codec=zip", "--codec"},
      {"--model resnet", "--model"},
      {"--dataset imagenet", "--dataset"},
      {"--optimizer=rmsprop", "--optimizer"},
      {"--lr_schedule=cosine", "--lr_schedule"},
      {"--packing=3bit", "--packing"},
      {"--sum_packing=huffman", "--sum_packing"},
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
  };
  for (const auto& c : cases) {
    const std::string error = ParseError(c.args);
    EXPECT_NE(error, "") << c.args << " was accepted";
    EXPECT_NE(error.find(c.flag), std::string::npos)
        << c.args << " gave: " << error;
  }
  EXPECT_NE(ParseError("--codec=zip").find("zip"), std::string::npos);
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
  o.codec = "zip";
  EXPECT_FALSE(ValidateWorkerOptions(o).ok());
}

}  // namespace
}  // namespace tern::worker
