#include "common/metrics/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "common/metrics/metrics_flags.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/counter.h"

namespace tern::metrics {
namespace {

using ::testing::HasSubstr;

// The whole answer to GET /metrics on 127.0.0.1:`port`.
std::string Scrape(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string answer;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) ==
      0) {
    const std::string request =
        "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (write(fd, request.data(), request.size()) ==
        static_cast<ssize_t>(request.size())) {
      char buffer[4096];
      for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) > 0;) {
        answer.append(buffer, static_cast<size_t>(n));
      }
    }
  }
  close(fd);
  return answer;
}

TEST(MetricsFlagsTest, AcceptsIpAndPort) {
  for (const char* listen :
       {"", "127.0.0.1:9400", "0.0.0.0:0", "[::1]:9400", "10.1.2.3:65535"}) {
    EXPECT_TRUE(ValidateMetricsOptions({listen, 0}).ok()) << listen;
  }
}

TEST(MetricsFlagsTest, RefusesWhatIsNotIpAndPort) {
  for (const char* listen :
       {"9400", "localhost:9400", "127.0.0.1", "127.0.0.1:", "127.0.0.1:x",
        "127.0.0.1:65536", "127.0.0.1:94s", "::1:9400", "127.0.0.1:-1"}) {
    const absl::Status status = ValidateMetricsOptions({listen, 0});
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << listen;
    EXPECT_THAT(std::string(status.message()),
                HasSubstr(absl::StrCat("--metrics_listen: '", listen, "'")));
  }
}

TEST(MetricsFlagsTest, RefusesABadLinger) {
  for (double linger : {-1.0, 601.0, std::nan("")}) {
    EXPECT_EQ(ValidateMetricsOptions({"", linger}).code(),
              absl::StatusCode::kInvalidArgument)
        << linger;
  }
}

TEST(MetricsTest, WithoutAnAddressCountsButServesNothing) {
  absl::StatusOr<std::unique_ptr<Metrics>> metrics = Metrics::Start({});
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ((*metrics)->port(), 0);
  prometheus::BuildCounter()
      .Name("tern_test_total")
      .Help("a test")
      .Register((*metrics)->registry())
      .Add({})
      .Increment();
}

TEST(MetricsTest, ServesTheRegistryInPrometheusTextFormat) {
  absl::StatusOr<std::unique_ptr<Metrics>> metrics =
      Metrics::Start({"127.0.0.1:0", 0});
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  ASSERT_GT((*metrics)->port(), 0);
  prometheus::BuildCounter()
      .Name("tern_test_things_total")
      .Help("things counted by the test")
      .Register((*metrics)->registry())
      .Add({{"role", "test"}})
      .Increment(3);
  const std::string answer = Scrape((*metrics)->port());
  EXPECT_THAT(answer, HasSubstr("200 OK"));
  EXPECT_THAT(answer, HasSubstr("# TYPE tern_test_things_total counter"));
  EXPECT_THAT(answer, HasSubstr("tern_test_things_total{role=\"test\"} 3"));
}

TEST(MetricsTest, APortInUseIsUnavailableNamingTheAddress) {
  absl::StatusOr<std::unique_ptr<Metrics>> first =
      Metrics::Start({"127.0.0.1:0", 0});
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string taken = absl::StrCat("127.0.0.1:", (*first)->port());
  absl::StatusOr<std::unique_ptr<Metrics>> second = Metrics::Start({taken, 0});
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(second.status().message()), HasSubstr(taken));
}

TEST(MetricsTest, ABadAddressIsRefusedBeforeBinding) {
  EXPECT_EQ(Metrics::Start({"localhost:0", 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tern::metrics
