#include "tern/health.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "common/net/test_certs.h"
#include "common/net/tls_files.h"
#include "common/process/exit_codes.h"
#include "common/process/stop.h"
#include "gtest/gtest.h"
#include "server/ps_main.h"
#include "server/ps_options.h"

namespace tern {
namespace {

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

// The port in `path` once the server has written it; 0 after 30 s.
int WaitForPort(const std::string& path) {
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (absl::Now() < give_up) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    int port = 0;
    if (absl::SimpleAtoi(text.str(), &port) && port > 0) return port;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return 0;
}

// A port nobody listens on right now (bound and released).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

TEST(HealthTest, AShardInThisProcessIsServingUntilItStops) {
  server::PsOptions ps;
  ps.listen = "127.0.0.1:0";
  ps.port_file = TempDir() + "/health-test.port";
  ps.num_workers = 1;
  ps.join_timeout_s = 60;
  ps.log_level = "off";
  std::remove(ps.port_file.c_str());
  process::StopRequest stop;
  int exit_code = -1;
  std::thread shard([&] {
    exit_code = server::RunParameterServer(ps, MakeNullLogger(), stop);
  });
  const int port = WaitForPort(ps.port_file);
  ASSERT_GT(port, 0);

  HealthOptions options;
  options.address = absl::StrCat("127.0.0.1:", port);
  EXPECT_TRUE(CheckHealth(options).ok()) << CheckHealth(options);
  EXPECT_EQ(RunHealth(options), process::kExitOk);
  options.service = "tern.v1.ParameterServer";
  EXPECT_TRUE(CheckHealth(options).ok()) << CheckHealth(options);

  options.service = "tern.v1.NoSuchService";
  const absl::Status unknown = CheckHealth(options);
  EXPECT_EQ(unknown.code(), absl::StatusCode::kNotFound) << unknown;
  EXPECT_NE(unknown.message().find(options.address), absl::string_view::npos);
  EXPECT_EQ(RunHealth(options), process::kExitUnhealthy);

  stop.Request("the test is done");
  shard.join();
  EXPECT_EQ(exit_code, process::kExitOk);
  options.service.clear();
  options.timeout_s = 1;
  EXPECT_FALSE(CheckHealth(options).ok());
}

// A shard started with --tls_cert/--tls_key/--tls_ca (mTLS) answers a
// health check that shows the client certificate, and no other.
TEST(HealthTest, AnMtlsShardAnswersOnlyClientsWithACertificate) {
  if (!net::TestCerts::OpensslAvailable()) {
    GTEST_SKIP() << "the openssl command-line tool is not installed";
  }
  net::TestCerts certs(TempDir() + "/health-test-certs");
  ASSERT_TRUE(certs.MakeCa("ca").ok());
  ASSERT_TRUE(certs.MakeLeaf("ca", "ps").ok());
  ASSERT_TRUE(certs.MakeLeaf("ca", "probe").ok());

  server::PsOptions ps;
  ps.listen = "127.0.0.1:0";
  ps.port_file = TempDir() + "/health-test-tls.port";
  ps.num_workers = 1;
  ps.join_timeout_s = 60;
  ps.log_level = "off";
  ps.tls = certs.Files("ps", "ca");
  std::remove(ps.port_file.c_str());
  process::StopRequest stop;
  int exit_code = -1;
  std::thread shard([&] {
    exit_code = server::RunParameterServer(ps, MakeNullLogger(), stop);
  });
  const int port = WaitForPort(ps.port_file);
  ASSERT_GT(port, 0);

  HealthOptions options;
  options.address = absl::StrCat("127.0.0.1:", port);
  options.tls = certs.Files("probe", "ca");
  EXPECT_TRUE(CheckHealth(options).ok()) << CheckHealth(options);

  options.timeout_s = 2;
  options.tls.cert.clear();
  options.tls.key.clear();
  const absl::Status anonymous = CheckHealth(options);
  EXPECT_EQ(anonymous.code(), absl::StatusCode::kUnavailable) << anonymous;
  EXPECT_EQ(RunHealth(options), process::kExitUnhealthy);
  options.tls = net::TlsFiles();
  EXPECT_FALSE(CheckHealth(options).ok());  // plaintext

  options.tls = certs.Files("probe", "ca");
  options.tls.ca = TempDir() + "/no-such-ca.pem";
  const absl::Status missing = CheckHealth(options);
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
  EXPECT_NE(missing.message().find(options.tls.ca), absl::string_view::npos);

  stop.Request("the test is done");
  shard.join();
  EXPECT_EQ(exit_code, process::kExitOk);
}

// A shard whose --tls_key is missing does not start: a configuration error
// (exit 1) naming the file.
TEST(HealthTest, AShardWithAMissingTlsFileExitsPermanent) {
  if (!net::TestCerts::OpensslAvailable()) {
    GTEST_SKIP() << "the openssl command-line tool is not installed";
  }
  net::TestCerts certs(TempDir() + "/health-test-certs-missing");
  ASSERT_TRUE(certs.MakeCa("ca").ok());
  ASSERT_TRUE(certs.MakeLeaf("ca", "ps").ok());
  server::PsOptions ps;
  ps.listen = "127.0.0.1:0";
  ps.log_level = "off";
  ps.tls = certs.Files("ps", "ca");
  ps.tls.key = TempDir() + "/no-such.key";
  process::StopRequest stop;
  EXPECT_EQ(server::RunParameterServer(ps, MakeNullLogger(), stop),
            process::kExitPermanent);
}

TEST(HealthTest, ADeadAddressFailsWithinTheDeadline) {
  HealthOptions options;
  options.address = absl::StrCat("127.0.0.1:", FreePort());
  options.timeout_s = 0.5;
  const absl::Time start = absl::Now();
  const absl::Status status = CheckHealth(options);
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  ASSERT_FALSE(status.ok());
  EXPECT_TRUE(absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status))
      << status;
  EXPECT_NE(status.message().find(options.address), absl::string_view::npos);
  EXPECT_EQ(status.message().find('\n'), absl::string_view::npos);
  EXPECT_EQ(RunHealth(options), process::kExitUnhealthy);
}

TEST(HealthFlagsTest, NeedsAnAddressAndAPositiveTimeout) {
  const auto parse = [](std::vector<std::string> args) {
    CLI::App app;
    HealthOptions options;
    AddHealthFlags(&app, &options);
    std::vector<const char*> argv = {"health"};
    for (const std::string& arg : args) argv.push_back(arg.c_str());
    try {
      app.parse(static_cast<int>(argv.size()), argv.data());
    } catch (const CLI::ParseError& error) {
      return std::string(error.what());
    }
    return std::string();
  };
  EXPECT_EQ(parse({"localhost:50051", "--timeout=2", "--service=x"}), "");
  EXPECT_NE(parse({}), "");
  EXPECT_NE(parse({"localhost"}), "");
  EXPECT_NE(parse({"localhost:1", "--timeout=0"}), "");
  EXPECT_NE(parse({"localhost:1", "--timeout=inf"}), "");
  EXPECT_EQ(parse({"localhost:1", "--tls_cert=/a.pem", "--tls_key=/a.key",
                   "--tls_ca=/ca.pem"}),
            "");
}

TEST(HealthFlagsTest, TlsFlagsAreCheckedTogether) {
  HealthOptions options;
  options.address = "127.0.0.1:1";
  options.tls.cert = "/a.pem";  // no key, no CA
  const absl::Status status = CheckHealth(options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("--tls_key"), absl::string_view::npos);
}

}  // namespace
}  // namespace tern
