#include "server/ps_flags.h"

#include <cstdlib>
#include <string>

#include "common/flags/flags_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern::server {
namespace {

using ::tern::flags::ScopedEnv;
using ::testing::HasSubstr;

// Fresh options with the flags registered on a fresh app.
struct Parsed {
  PsOptions options;
  CLI::App app{"tern ps"};
  Parsed() { AddPsFlags(&app, &options); }
  void Parse(const std::string& args) { app.parse(args, false); }
};

TEST(PsFlagsTest, EveryOptionIsAFlagWithItsEnvironmentVariable) {
  Parsed parsed;
  flags::ExpectFlagsWithEnvironment(
      parsed.app,
      {"listen", "port_file", "shard_index", "num_shards", "num_workers",
       "barrier_timeout_s", "join_timeout_s", "max_message_mb", "log_level",
       "mode", "global", "datacenter", "num_datacenters", "sync_every",
       "sync_timeout_s", "g_thresh", "steps_per_epoch", "weight_codec",
       "pace_mbit"});
  const std::string help = parsed.app.help();
  EXPECT_THAT(help, HasSubstr("127.0.0.1:50051"));  // defaults are shown
}

TEST(PsFlagsTest, WeightGradFlagsParseAndAreChecked) {
  Parsed parsed;
  parsed.Parse(
      "--mode=weightgrad --global=gs:50061 --datacenter=1 "
      "--num_datacenters=2 --sync_every=5 --g_thresh=0.3 --weight_codec=int8 "
      "--steps_per_epoch=117 --insecure");
  EXPECT_EQ(parsed.options.mode, RunMode::kWeightGrad);
  EXPECT_EQ(parsed.options.global, "gs:50061");
  EXPECT_EQ(parsed.options.datacenter, 1u);
  EXPECT_EQ(parsed.options.sync_every, 5u);
  EXPECT_EQ(parsed.options.steps_per_epoch, 117u);
  EXPECT_EQ(parsed.options.weight_codec, WeightCodec::kInt8);
  EXPECT_TRUE(ValidatePsOptions(parsed.options).ok());

  PsOptions sharded = parsed.options;
  sharded.num_shards = 2;
  EXPECT_THAT(std::string(ValidatePsOptions(sharded).message()),
              HasSubstr("--num_shards=2 with --mode=weightgrad"));
  PsOptions no_global = parsed.options;
  no_global.global.clear();
  EXPECT_THAT(std::string(ValidatePsOptions(no_global).message()),
              HasSubstr("needs --global"));
  PsOptions outside = parsed.options;
  outside.datacenter = 2;
  EXPECT_THAT(std::string(ValidatePsOptions(outside).message()),
              HasSubstr("--datacenter=2 is not below --num_datacenters=2"));
  // An LPS resumes from --state_dir, writing it every --checkpoint_every
  // steps; the step count means nothing without a directory, or to a
  // TernGrad shard (which writes at every step).
  PsOptions kept = parsed.options;
  kept.state_dir = "/tmp/lps";
  kept.checkpoint_every = 20;
  EXPECT_TRUE(ValidatePsOptions(kept).ok());
  kept.state_dir.clear();
  EXPECT_THAT(std::string(ValidatePsOptions(kept).message()),
              HasSubstr("--checkpoint_every=20 without --state_dir"));
  kept.state_dir = "/tmp/shard";
  kept.mode = RunMode::kTernGrad;
  EXPECT_THAT(std::string(ValidatePsOptions(kept).message()),
              HasSubstr("--checkpoint_every=20 with --mode=terngrad"));
  EXPECT_THROW(Parsed().Parse("--mode=weightgrads"), CLI::ParseError);
  EXPECT_THROW(Parsed().Parse("--weight_codec=fp16"), CLI::ParseError);
}

// --mode and --weight_codec are parsed into enums once, from the command
// line or the environment; a bad name fails naming the choices.
TEST(PsFlagsTest, ModeAndWeightCodecAreEnumsParsedOnce) {
  {
    ScopedEnv mode("TERN_MODE", "gaia");
    Parsed parsed;
    parsed.Parse("");
    EXPECT_EQ(parsed.options.mode, RunMode::kGaia);
    EXPECT_EQ(parsed.options.weight_codec, WeightCodec::kModeDefault);
    EXPECT_EQ(EffectiveWeightCodec(parsed.options), WeightCodec::kFp32);
  }
  Parsed weightgrad;
  weightgrad.Parse("--mode=weightgrad");
  EXPECT_EQ(EffectiveWeightCodec(weightgrad.options), WeightCodec::kTernary);
  Parsed chosen;
  chosen.Parse("--mode=gaia --weight_codec=int8");
  EXPECT_EQ(EffectiveWeightCodec(chosen.options), WeightCodec::kInt8);
  try {
    Parsed().Parse("--mode=TernGrad");
    ADD_FAILURE() << "--mode=TernGrad parsed";
  } catch (const CLI::ParseError& error) {
    EXPECT_THAT(error.what(), HasSubstr("'TernGrad' is not one of terngrad, "
                                        "weightgrad, gaia"));
  }
  PsOptions bad;
  bad.mode = static_cast<RunMode>(7);
  EXPECT_THAT(std::string(ValidatePsOptions(bad).message()),
              HasSubstr("--mode: 7 is not one of"));
}

TEST(PsFlagsTest, DefaultsStayWhenNothingIsGiven) {
  Parsed parsed;
  parsed.Parse("");
  const PsOptions defaults;
  EXPECT_EQ(parsed.options.listen, defaults.listen);
  EXPECT_EQ(parsed.options.barrier_timeout_s, defaults.barrier_timeout_s);
  EXPECT_EQ(parsed.options.max_message_mb, 64u);
  EXPECT_TRUE(ValidatePsOptions(parsed.options).ok());
}

TEST(PsFlagsTest, ParsesEveryFlag) {
  Parsed parsed;
  parsed.Parse(
      "--listen=0.0.0.0:0 --port_file /tmp/p --shard_index 1 --num_shards=3 "
      "--num_workers=8 --barrier_timeout_s=2.5 --join_timeout_s 30 "
      "--max_message_mb=256 --log_level=debug --insecure "
      "--pace_mbit=31.6");
  const PsOptions& o = parsed.options;
  EXPECT_EQ(o.listen, "0.0.0.0:0");
  EXPECT_EQ(o.port_file, "/tmp/p");
  EXPECT_EQ(o.shard_index, 1u);
  EXPECT_EQ(o.num_shards, 3u);
  EXPECT_EQ(o.num_workers, 8u);
  EXPECT_EQ(o.barrier_timeout_s, 2.5);
  EXPECT_EQ(o.join_timeout_s, 30);
  EXPECT_EQ(o.max_message_mb, 256u);
  EXPECT_EQ(o.log_level, "debug");
  EXPECT_TRUE(o.insecure);
  EXPECT_EQ(o.pace_mbit, 31.6);
  EXPECT_TRUE(ValidatePsOptions(o).ok());
}

// Plaintext is explicit: beyond loopback it needs --insecure, on the
// listening address and on the LPS's link to the global server.
TEST(PsFlagsTest, PlaintextBeyondLoopbackNeedsInsecure) {
  Parsed parsed;
  parsed.Parse("--listen=0.0.0.0:50051");
  EXPECT_THAT(std::string(ValidatePsOptions(parsed.options).message()),
              HasSubstr("refusing to listen on 0.0.0.0:50051 in plaintext"));
  parsed.options.insecure = true;
  EXPECT_TRUE(ValidatePsOptions(parsed.options).ok());
  parsed.options.tls = {"/ps.pem", "/ps.key", "/ca.pem"};
  EXPECT_THAT(std::string(ValidatePsOptions(parsed.options).message()),
              HasSubstr("--insecure with --tls_* files"));

  Parsed lps;
  lps.Parse(
      "--mode=weightgrad --num_datacenters=2 --datacenter=1 "
      "--global=10.77.0.1:50060");
  EXPECT_THAT(std::string(ValidatePsOptions(lps.options).message()),
              HasSubstr("refusing to connect to the global server at "
                        "10.77.0.1:50060 in plaintext"));
  lps.options.insecure = true;
  EXPECT_TRUE(ValidatePsOptions(lps.options).ok());
}

TEST(PsFlagsTest, TheEnvironmentFillsInAndTheCommandLineWins) {
  ScopedEnv workers("TERN_NUM_WORKERS", "6");
  ScopedEnv timeout("TERN_BARRIER_TIMEOUT_S", "7");
  Parsed parsed;
  parsed.Parse("--barrier_timeout_s=9");
  EXPECT_EQ(parsed.options.num_workers, 6u);
  EXPECT_EQ(parsed.options.barrier_timeout_s, 9);
}

TEST(PsFlagsTest, OutOfRangeValuesAreRefusedNamingTheFlag) {
  for (const char* args :
       {"--num_workers=0", "--num_shards=0", "--barrier_timeout_s=0",
        "--barrier_timeout_s=-1", "--barrier_timeout_s=nan",
        "--join_timeout_s=inf", "--max_message_mb=0", "--max_message_mb=4096",
        "--log_level=loud", "--listen=localhost", "--listen=:5",
        "--shard_index=-1", "--pace_mbit=-1", "--pace_mbit=inf",
        "--pace_mbit=1e6"}) {
    Parsed parsed;
    try {
      parsed.Parse(args);
      ADD_FAILURE() << args << " was accepted";
    } catch (const CLI::ParseError& error) {
      const std::string flag =
          std::string(args).substr(0, std::string(args).find('='));
      EXPECT_THAT(error.what(), HasSubstr(flag)) << args;
    }
  }
}

TEST(PsFlagsTest, ValidateChecksWhatOneFlagCannot) {
  PsOptions options;
  options.num_shards = 2;
  options.shard_index = 2;
  absl::Status status = ValidatePsOptions(options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "--shard_index=2 is not below --num_shards=2");

  options = PsOptions();
  options.barrier_timeout_s = -1;
  EXPECT_THAT(ValidatePsOptions(options).message(),
              HasSubstr("--barrier_timeout_s"));
  options = PsOptions();
  options.num_workers = 0;
  EXPECT_THAT(ValidatePsOptions(options).message(), HasSubstr("--num_workers"));
  options = PsOptions();
  options.max_message_mb = 5000;
  EXPECT_THAT(ValidatePsOptions(options).message(),
              HasSubstr("--max_message_mb"));
  options = PsOptions();
  options.log_level = "chatty";
  EXPECT_THAT(ValidatePsOptions(options).message(), HasSubstr("--log_level"));
  options = PsOptions();
  options.listen = "nohost";
  EXPECT_THAT(ValidatePsOptions(options).message(), HasSubstr("--listen"));
}

TEST(PsFlagsTest, TlsFlagsParseAndAreCheckedForAServerAndAnLps) {
  Parsed parsed;
  parsed.Parse("--tls_cert=/ps.pem --tls_key=/ps.key --tls_ca=/ca.pem");
  EXPECT_EQ(parsed.options.tls.cert, "/ps.pem");
  EXPECT_EQ(parsed.options.tls.key, "/ps.key");
  EXPECT_EQ(parsed.options.tls.ca, "/ca.pem");
  EXPECT_TRUE(ValidatePsOptions(parsed.options).ok());
  EXPECT_THAT(parsed.app.help(), HasSubstr("TERN_TLS_CERT"));

  PsOptions options;
  options.tls.ca = "/ca.pem";  // a server needs its own certificate
  EXPECT_THAT(ValidatePsOptions(options).message(),
              HasSubstr("--tls_ca without --tls_cert"));
  // Server-side TLS without client certificates: fine for a shard, not
  // for an LPS that must verify its global server.
  options.tls.ca.clear();
  options.tls.cert = "/ps.pem";
  options.tls.key = "/ps.key";
  EXPECT_TRUE(ValidatePsOptions(options).ok());
  options.mode = RunMode::kWeightGrad;
  EXPECT_TRUE(ValidatePsOptions(options).ok());
  options.global = "gs:50061";
  EXPECT_THAT(ValidatePsOptions(options).message(), HasSubstr("--tls_ca"));
}

TEST(PsFlagsTest, RunIdComesFromTheFlagOrTernRunIdAndIsChecked) {
  {
    Parsed parsed;
    parsed.Parse("--run_id=exp-3.a_b");
    EXPECT_EQ(parsed.options.run_id, "exp-3.a_b");
    EXPECT_TRUE(ValidatePsOptions(parsed.options).ok());
    EXPECT_THAT(parsed.app.help(), HasSubstr("TERN_RUN_ID"));
  }
  {
    ScopedEnv run("TERN_RUN_ID", "from-env");
    Parsed parsed;
    parsed.Parse("");
    EXPECT_EQ(parsed.options.run_id, "from-env");
  }
  PsOptions options;
  EXPECT_TRUE(ValidatePsOptions(options).ok());  // optional
  options.run_id = "a/b";
  EXPECT_THAT(ValidatePsOptions(options).message(), HasSubstr("--run_id"));
  options.run_id = std::string(65, 'r');
  EXPECT_THAT(ValidatePsOptions(options).message(), HasSubstr("--run_id"));
}

TEST(PsFlagsTest, WorkerLossFlagsParseAndAreChecked) {
  Parsed parsed;
  parsed.Parse("--on_worker_loss=shrink --worker_loss_timeout_s=20");
  EXPECT_EQ(parsed.options.on_worker_loss, "shrink");
  EXPECT_EQ(parsed.options.worker_loss_timeout_s, 20);
  EXPECT_TRUE(ValidatePsOptions(parsed.options).ok());
  Parsed wrong;
  EXPECT_THROW(wrong.Parse("--on_worker_loss=wait"), CLI::ParseError);

  PsOptions options;
  options.worker_loss_timeout_s = 60;  // above --barrier_timeout_s=50
  EXPECT_THAT(ValidatePsOptions(options).message(),
              HasSubstr("--worker_loss_timeout_s=60 is above "
                        "--barrier_timeout_s=50"));
  options = PsOptions();
  options.on_worker_loss = "wait";
  EXPECT_THAT(ValidatePsOptions(options).message(),
              HasSubstr("--on_worker_loss: 'wait'"));
  options = PsOptions();
  options.mode = RunMode::kWeightGrad;
  options.global = "gs:50061";
  options.insecure = true;
  options.on_worker_loss = "shrink";
  EXPECT_THAT(ValidatePsOptions(options).message(),
              HasSubstr("only a TernGrad shard drops lost workers"));
}

}  // namespace
}  // namespace tern::server
