#include "tern/health.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"
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
}

}  // namespace
}  // namespace tern
