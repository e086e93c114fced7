#include "common/process/server_role.h"

#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "common/captured_log.h"
#include "common/flags/flags_testing.h"
#include "common/process/exit_codes.h"
#include "common/process/server_role_flags.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern::process {
namespace {

using ::testing::HasSubstr;

const ServerRoleHelp kHelp{"the report", "what must fit", "the state",
                           "flush it", "the levels"};

TEST(ServerRoleFlagsTest, EveryOptionIsAFlagWithItsEnvironmentVariable) {
  ServerRoleOptions options;
  CLI::App app{"a role"};
  AddServerRoleFlags(&app, &options, kHelp);
  flags::ExpectFlagsWithEnvironment(
      app,
      {"listen", "port_file", "report_file", "max_message_mb", "pace_mbit",
       "state_dir", "state_sync", "log_level", "tls_cert", "tls_key", "tls_ca",
       "insecure", "run_id", "metrics_listen", "metrics_linger_s"});
  const std::string help = app.help();
  for (const char* text :
       {"the report", "what must fit", "the state", "flush it", "the levels"}) {
    EXPECT_THAT(help, HasSubstr(text));
  }
}

TEST(ServerRoleFlagsTest, EachFlagLandsInItsField) {
  ServerRoleOptions options;
  CLI::App app{"a role"};
  AddServerRoleFlags(&app, &options, kHelp);
  app.parse(
      "--listen=0.0.0.0:7 --port_file=/p --report_file=/r "
      "--max_message_mb=9 --pace_mbit=30 --state_dir=/s --state_sync=true "
      "--log_level=warn --insecure=true --run_id=run-1 "
      "--metrics_listen=127.0.0.1:0",
      false);
  EXPECT_EQ(options.listen, "0.0.0.0:7");
  EXPECT_EQ(options.port_file, "/p");
  EXPECT_EQ(options.report_file, "/r");
  EXPECT_EQ(options.max_message_mb, 9u);
  EXPECT_EQ(options.pace_mbit, 30);
  EXPECT_EQ(options.state_dir, "/s");
  EXPECT_TRUE(options.state_sync);
  EXPECT_EQ(options.log_level, "warn");
  EXPECT_TRUE(options.insecure);
  EXPECT_EQ(options.run_id, "run-1");
  EXPECT_EQ(options.metrics.listen, "127.0.0.1:0");
  EXPECT_TRUE(ValidateServerRoleOptions(options, net::TlsUse::kServe).ok());
}

ServerRoleOptions Loopback() {
  ServerRoleOptions options;
  options.listen = "127.0.0.1:0";
  return options;
}

// Why ValidateServerRoleOptions refuses `options` as a serving-only role.
std::string Refusal(const ServerRoleOptions& options) {
  return std::string(
      ValidateServerRoleOptions(options, net::TlsUse::kServe).message());
}

TEST(ServerRoleFlagsTest, ChecksNameTheFlag) {
  EXPECT_TRUE(ValidateServerRoleOptions(Loopback(), net::TlsUse::kServe).ok());
  ServerRoleOptions options = Loopback();
  options.listen = "nowhere";
  EXPECT_THAT(Refusal(options), HasSubstr("--listen: 'nowhere'"));
  options = Loopback();
  options.log_level = "loud";
  EXPECT_THAT(Refusal(options), HasSubstr("--log_level"));
  options = Loopback();
  options.max_message_mb = 0;
  EXPECT_THAT(Refusal(options), HasSubstr("--max_message_mb"));
  options = Loopback();
  options.run_id = "no spaces please";
  EXPECT_THAT(Refusal(options), HasSubstr("--run_id"));
  options = Loopback();
  options.tls.ca = "/ca.pem";
  EXPECT_THAT(Refusal(options), HasSubstr("--tls_ca without --tls_cert"));
  options = Loopback();
  options.listen = "0.0.0.0:0";
  EXPECT_EQ(ValidateServerRoleOptions(options, net::TlsUse::kServe).code(),
            absl::StatusCode::kFailedPrecondition);
  options.insecure = true;
  EXPECT_TRUE(ValidateServerRoleOptions(options, net::TlsUse::kServe).ok());
}

TEST(ServerRoleTest, AFailedCheckIsPermanentAndServesNothing) {
  CapturedLog log;
  bool served = false;
  const int code =
      RunServerRole(Loopback(), absl::InvalidArgumentError("--seed is odd"),
                    log.logger(), [&](metrics::Metrics&) {
                      served = true;
                      return 0;
                    });
  EXPECT_EQ(code, kExitPermanent);
  EXPECT_FALSE(served);
  EXPECT_THAT(absl::StrJoin(log.Lines(), "\n"), HasSubstr("--seed is odd"));
}

TEST(ServerRoleTest, ServesWithItsMetricsAndReturnsWhatServingReturned) {
  CapturedLog log;
  ServerRoleOptions options = Loopback();
  options.log_level = "warn";
  options.metrics.listen = "127.0.0.1:0";
  metrics::Metrics* seen = nullptr;
  const int code = RunServerRole(options, absl::OkStatus(), log.logger(),
                                 [&](metrics::Metrics& metrics) {
                                   seen = &metrics;
                                   return 7;
                                 });
  EXPECT_EQ(code, 7);
  EXPECT_NE(seen, nullptr);
  EXPECT_EQ(log.logger()->level(), spdlog::level::warn);
}

TEST(ServerRoleTest, AMetricsEndpointThatCannotStartServesNothing) {
  CapturedLog log;
  ServerRoleOptions options = Loopback();
  options.metrics.listen = "192.0.2.1:0";  // not an address of this host
  bool served = false;
  const int code = RunServerRole(options, absl::OkStatus(), log.logger(),
                                 [&](metrics::Metrics&) {
                                   served = true;
                                   return 0;
                                 });
  EXPECT_NE(code, kExitOk);
  EXPECT_FALSE(served);
}

TEST(ServerRoleTest, ServingOptionsAndCallersFollowTheFlags) {
  CapturedLog log;
  ServerRoleOptions options = Loopback();
  options.max_message_mb = 3;
  options.run_id = "run-1";
  const net::ServerOptions serving = ServingOptions(options, 5, log.logger());
  EXPECT_EQ(serving.listen, "127.0.0.1:0");
  EXPECT_EQ(serving.max_message_bytes, 3 << 20);
  EXPECT_EQ(serving.senders, 5);
  const net::PeerPolicy plaintext = CallerPolicy(options);
  EXPECT_FALSE(plaintext.identity_required);
  EXPECT_EQ(plaintext.run_id, "run-1");
  options.tls.cert = "/role.pem";
  options.tls.key = "/role.key";
  options.tls.ca = "/ca.pem";
  EXPECT_TRUE(CallerPolicy(options).identity_required);
}

}  // namespace
}  // namespace tern::process
