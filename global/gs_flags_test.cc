#include "global/gs_flags.h"

#include <cstdlib>
#include <limits>
#include <string>

#include "common/flags/flags_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern::global {
namespace {

using ::tern::flags::ScopedEnv;
using ::testing::HasSubstr;

// Fresh options with the flags registered on a fresh app.
struct Parsed {
  GsOptions options;
  CLI::App app{"tern global"};
  Parsed() { AddGsFlags(&app, &options); }
  void Parse(const std::string& args) { app.parse(args, false); }
};

TEST(GsFlagsTest, EveryOptionIsAFlagWithItsEnvironmentVariable) {
  Parsed parsed;
  flags::ExpectFlagsWithEnvironment(
      parsed.app,
      {"listen", "port_file", "num_datacenters", "seed", "t_global_s",
       "max_lag", "hold_timeout_s", "max_message_mb", "log_level",
       "pace_mbit"});
  const std::string help = parsed.app.help();
  EXPECT_THAT(help, HasSubstr("127.0.0.1:50061"));  // defaults are shown
}

TEST(GsFlagsTest, TlsFlagsParseAndAreChecked) {
  Parsed parsed;
  parsed.Parse("--tls_cert=/gs.pem --tls_key=/gs.key --tls_ca=/ca.pem");
  EXPECT_EQ(parsed.options.tls.cert, "/gs.pem");
  EXPECT_EQ(parsed.options.tls.ca, "/ca.pem");
  EXPECT_TRUE(ValidateGsOptions(parsed.options).ok());
  GsOptions options;
  options.tls.ca = "/ca.pem";
  EXPECT_THAT(std::string(ValidateGsOptions(options).message()),
              HasSubstr("--tls_ca without --tls_cert"));
  options.tls.cert = "/gs.pem";
  EXPECT_THAT(std::string(ValidateGsOptions(options).message()),
              HasSubstr("--tls_key"));
}

TEST(GsFlagsTest, DefaultsStayWhenNothingIsGiven) {
  Parsed parsed;
  parsed.Parse("");
  const GsOptions defaults;
  EXPECT_EQ(parsed.options.listen, defaults.listen);
  EXPECT_EQ(parsed.options.t_global_s, 10);
  EXPECT_EQ(parsed.options.max_lag, 2u);
  EXPECT_EQ(parsed.options.hold_timeout_s, 30);
  EXPECT_EQ(parsed.options.max_message_mb, 64u);
  EXPECT_TRUE(ValidateGsOptions(parsed.options).ok());
}

TEST(GsFlagsTest, ParsesEveryFlag) {
  Parsed parsed;
  parsed.Parse(
      "--listen=0.0.0.0:0 --port_file /tmp/g --num_datacenters=3 --seed 9 "
      "--t_global_s=2.5 --max_lag 0 --hold_timeout_s=45 "
      "--max_message_mb=256 --log_level=debug --insecure --pace_mbit=47.5");
  const GsOptions& o = parsed.options;
  EXPECT_EQ(o.pace_mbit, 47.5);
  EXPECT_EQ(o.listen, "0.0.0.0:0");
  EXPECT_EQ(o.port_file, "/tmp/g");
  EXPECT_EQ(o.num_datacenters, 3u);
  EXPECT_EQ(o.seed, 9u);
  EXPECT_EQ(o.t_global_s, 2.5);
  EXPECT_EQ(o.max_lag, 0u);
  EXPECT_EQ(o.hold_timeout_s, 45);
  EXPECT_EQ(o.max_message_mb, 256u);
  EXPECT_EQ(o.log_level, "debug");
  EXPECT_TRUE(o.insecure);
  EXPECT_TRUE(ValidateGsOptions(o).ok());
}

TEST(GsFlagsTest, PlaintextBeyondLoopbackNeedsInsecure) {
  Parsed parsed;
  parsed.Parse("--listen=[::]:50060");
  EXPECT_THAT(std::string(ValidateGsOptions(parsed.options).message()),
              HasSubstr("refusing to listen on [::]:50060 in plaintext"));
  ScopedEnv insecure("TERN_INSECURE", "1");
  Parsed allowed;
  allowed.Parse("--listen=[::]:50060");
  EXPECT_TRUE(allowed.options.insecure);
  EXPECT_TRUE(ValidateGsOptions(allowed.options).ok());
}

TEST(GsFlagsTest, TheEnvironmentFillsInAndTheCommandLineWins) {
  ScopedEnv k("TERN_NUM_DATACENTERS", "4");
  ScopedEnv t("TERN_T_GLOBAL_S", "7");
  Parsed parsed;
  parsed.Parse("--t_global_s=9");
  EXPECT_EQ(parsed.options.num_datacenters, 4u);
  EXPECT_EQ(parsed.options.t_global_s, 9);
}

TEST(GsFlagsTest, OutOfRangeValuesAreRefusedNamingTheFlag) {
  for (const char* args :
       {"--num_datacenters=0", "--t_global_s=0", "--t_global_s=-1",
        "--t_global_s=nan", "--hold_timeout_s=inf", "--hold_timeout_s=0",
        "--max_lag=-1", "--max_lag=1001", "--max_message_mb=0",
        "--max_message_mb=4096", "--log_level=loud", "--listen=localhost",
        "--listen=:5"}) {
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

TEST(GsFlagsTest, ValidateChecksOptionsThatDidNotComeThroughTheFlags) {
  GsOptions options;
  options.num_datacenters = 0;
  absl::Status status = ValidateGsOptions(options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("--num_datacenters"));
  options = GsOptions();
  options.t_global_s = -1;
  EXPECT_THAT(ValidateGsOptions(options).message(), HasSubstr("--t_global_s"));
  options = GsOptions();
  options.hold_timeout_s = std::numeric_limits<double>::infinity();
  EXPECT_THAT(ValidateGsOptions(options).message(),
              HasSubstr("--hold_timeout_s"));
  options = GsOptions();
  options.max_lag = 5000;
  EXPECT_THAT(ValidateGsOptions(options).message(), HasSubstr("--max_lag"));
  options = GsOptions();
  options.max_message_mb = 5000;
  EXPECT_THAT(ValidateGsOptions(options).message(),
              HasSubstr("--max_message_mb"));
  options = GsOptions();
  options.log_level = "chatty";
  EXPECT_THAT(ValidateGsOptions(options).message(), HasSubstr("--log_level"));
  options = GsOptions();
  options.listen = "nohost";
  EXPECT_THAT(ValidateGsOptions(options).message(), HasSubstr("--listen"));
}

TEST(GsFlagsTest, RunIdComesFromTheFlagOrTernRunIdAndIsChecked) {
  {
    Parsed parsed;
    parsed.Parse("--run_id=exp-3.a_b");
    EXPECT_EQ(parsed.options.run_id, "exp-3.a_b");
    EXPECT_TRUE(ValidateGsOptions(parsed.options).ok());
    EXPECT_THAT(parsed.app.help(), HasSubstr("TERN_RUN_ID"));
  }
  {
    ScopedEnv run("TERN_RUN_ID", "from-env");
    Parsed parsed;
    parsed.Parse("");
    EXPECT_EQ(parsed.options.run_id, "from-env");
  }
  GsOptions options;
  EXPECT_TRUE(ValidateGsOptions(options).ok());  // optional
  options.run_id = "a b";
  EXPECT_THAT(std::string(ValidateGsOptions(options).message()),
              HasSubstr("--run_id"));
}

}  // namespace
}  // namespace tern::global
