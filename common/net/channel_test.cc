#include "common/net/channel.h"

#include <atomic>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/net/server.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"

namespace tern::net {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// Answers UNAVAILABLE to the first `failures` calls, then SERVING.
class Flaky final : public Health::Service {
 public:
  explicit Flaky(int failures) : failures_(failures) {}
  grpc::Status Check(grpc::ServerContext*, const HealthCheckRequest*,
                     HealthCheckResponse* response) override {
    if (calls++ < failures_) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "restarting");
    }
    response->set_status(HealthCheckResponse::SERVING);
    return grpc::Status::OK;
  }
  std::atomic<int> calls{0};

 private:
  const int failures_;
};

// Serves `service` as the only Health service on an ephemeral port.
std::unique_ptr<grpc::Server> Serve(Flaky* service, int* port) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           port);
  builder.RegisterService(service);
  return builder.BuildAndStart();
}

grpc::Status Call(int port, const ChannelOptions& options,
                  const std::string& service = "") {
  auto health_client =
      Health::NewStub(CreateChannel(absl::StrCat("127.0.0.1:", port), options));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  HealthCheckRequest request;
  request.set_service(service);
  HealthCheckResponse response;
  return health_client->Check(&context, request, &response);
}

class RetryTest : public ::testing::TestWithParam<int> {};

TEST_P(RetryTest, UnavailableIsRetriedWithinOneCall) {
  const int failures = GetParam();
  Flaky flaky(failures);
  int port = 0;
  auto server = Serve(&flaky, &port);
  ASSERT_NE(server, nullptr);
  const grpc::Status status = Call(port, ChannelOptions());
  // gRPC makes at most max_attempts (5) attempts.
  if (failures < 5) {
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(flaky.calls.load(), failures + 1);
  } else {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_EQ(flaky.calls.load(), 5);
  }
  server->Shutdown();
}

INSTANTIATE_TEST_SUITE_P(Failures, RetryTest, ::testing::Values(0, 1, 4, 7));

TEST(ChannelTest, WithoutTheRetryPolicyUnavailableComesBack) {
  Flaky flaky(1);
  int port = 0;
  auto server = Serve(&flaky, &port);
  ChannelOptions options;
  options.retry.enabled = false;
  EXPECT_EQ(Call(port, options).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(flaky.calls.load(), 1);
  server->Shutdown();
}

TEST(ChannelTest, OtherErrorsAreNotRetried) {
  // A net::Server's health service answers NOT_FOUND for unknown names.
  ServerOptions server_options;
  server_options.listen = "127.0.0.1:0";
  auto server = Server::Start(server_options, {});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(Call((*server)->port(), ChannelOptions(), "unknown").error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST(ChannelTest, AMessageOverTheLimitIsRefused) {
  ServerOptions server_options;
  server_options.listen = "127.0.0.1:0";
  server_options.max_message_bytes = 1 << 20;
  auto server = Server::Start(server_options, {});
  ASSERT_TRUE(server.ok()) << server.status();
  ChannelOptions options;
  options.max_message_bytes = 1 << 20;
  const std::string big(2 << 20, 'x');
  // Refused by the client before it is sent.
  EXPECT_EQ(Call((*server)->port(), options, big).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  // Sent, and refused by the server.
  options.max_message_bytes = 4 << 20;
  EXPECT_EQ(Call((*server)->port(), options, big).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
}

TEST(RetryServiceConfigTest, NamesEveryMethodAndOnlyUnavailable) {
  RetryPolicy policy;
  policy.max_attempts = 9;  // gRPC's cap is 5
  const std::string config = RetryServiceConfig(policy);
  EXPECT_NE(config.find(R"("name": [{}])"), std::string::npos) << config;
  EXPECT_NE(config.find(R"("maxAttempts": 5)"), std::string::npos) << config;
  EXPECT_NE(config.find(R"("initialBackoff": "0.050s")"), std::string::npos)
      << config;
  EXPECT_NE(config.find(R"("retryableStatusCodes": ["UNAVAILABLE"])"),
            std::string::npos)
      << config;
}

}  // namespace
}  // namespace tern::net
