#include "common/net/server.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/captured_log.h"
#include "common/net/channel.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "tern/v1/global_server.grpc.pb.h"

namespace tern::net {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// A service to serve next to health (its methods are never called).
class Other final : public tern::v1::GlobalServer::Service {};

// Check(service) over the wire: the status, or -1 with the error in *error.
int Check(int port, const std::string& service, grpc::Status* error) {
  auto health_client = Health::NewStub(
      CreateChannel(absl::StrCat("127.0.0.1:", port), ChannelOptions()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  HealthCheckRequest request;
  request.set_service(service);
  HealthCheckResponse response;
  *error = health_client->Check(&context, request, &response);
  return error->ok() ? response.status() : -1;
}

TEST(ServerTest, ServesHealthForTheServerAndEachNamedService) {
  Other other;
  ServerOptions options;
  options.listen = "127.0.0.1:0";
  auto server = Server::Start(
      options, {{&other, tern::v1::GlobalServer::service_full_name()}});
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->port(), 0);
  grpc::Status error;
  EXPECT_EQ(Check((*server)->port(), "", &error), HealthCheckResponse::SERVING);
  EXPECT_EQ(Check((*server)->port(), "tern.v1.GlobalServer", &error),
            HealthCheckResponse::SERVING);
  EXPECT_EQ(Check((*server)->port(), "tern.v1.Nothing", &error), -1);
  EXPECT_EQ(error.error_code(), grpc::StatusCode::NOT_FOUND);

  (*server)->health().SetServing("tern.v1.GlobalServer", false);
  EXPECT_EQ(Check((*server)->port(), "tern.v1.GlobalServer", &error),
            HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(Check((*server)->port(), "", &error), HealthCheckResponse::SERVING);

  (*server)->health().Shutdown();
  EXPECT_EQ(Check((*server)->port(), "", &error),
            HealthCheckResponse::NOT_SERVING);
  (*server)->health().SetServing("", true);  // ignored once shut down
  EXPECT_EQ(Check((*server)->port(), "", &error),
            HealthCheckResponse::NOT_SERVING);
  (*server)->Shutdown(absl::ZeroDuration());
  (*server)->Shutdown(absl::ZeroDuration());  // idempotent
}

// Watch over the wire: the first status, each change, and the end of the
// stream when the server's health shuts down.
TEST(ServerTest, WatchStreamsEachChangeAndEndsAtShutdown) {
  Other other;
  ServerOptions options;
  options.listen = "127.0.0.1:0";
  auto server = Server::Start(
      options, {{&other, tern::v1::GlobalServer::service_full_name()}});
  ASSERT_TRUE(server.ok()) << server.status();
  auto health_client = Health::NewStub(CreateChannel(
      absl::StrCat("127.0.0.1:", (*server)->port()), ChannelOptions()));

  grpc::ClientContext known_context;
  known_context.set_deadline(
      absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  HealthCheckRequest known;
  known.set_service("tern.v1.GlobalServer");
  auto watch = health_client->Watch(&known_context, known);
  HealthCheckResponse response;
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);

  grpc::ClientContext unknown_context;
  unknown_context.set_deadline(
      absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  HealthCheckRequest unknown;
  unknown.set_service("tern.v1.Later");
  auto later = health_client->Watch(&unknown_context, unknown);
  ASSERT_TRUE(later->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVICE_UNKNOWN);
  (*server)->health().SetServing("tern.v1.Later", true);
  ASSERT_TRUE(later->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);

  (*server)->health().SetServing("tern.v1.GlobalServer", false);
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  (*server)->health().SetServing("tern.v1.GlobalServer", true);
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);

  (*server)->health().Shutdown();
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(watch->Read(&response));
  EXPECT_TRUE(watch->Finish().ok());
  ASSERT_TRUE(later->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(later->Read(&response));
  EXPECT_TRUE(later->Finish().ok());
  (*server)->Shutdown(absl::ZeroDuration());
}

TEST(ServerTest, APortInUseIsRefusedAsTransient) {
  ServerOptions options;
  options.listen = "127.0.0.1:0";
  auto first = Server::Start(options, {});
  ASSERT_TRUE(first.ok()) << first.status();
  options.listen = absl::StrCat("127.0.0.1:", (*first)->port());
  auto second = Server::Start(options, {});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find(options.listen),
            absl::string_view::npos);
}

TEST(ServerTest, AnUnparsableAddressIsRefused) {
  ServerOptions options;
  options.listen = "no-such-host.invalid:x";
  options.security.plaintext_allowed = true;
  EXPECT_FALSE(Server::Start(options, {}).ok());
}

// Plaintext beyond loopback is refused before anything is bound.
TEST(ServerTest, PlaintextBeyondLoopbackNeedsInsecure) {
  ServerOptions options;
  options.listen = "0.0.0.0:0";
  const absl::StatusOr<std::unique_ptr<Server>> refused =
      Server::Start(options, {});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  options.security.plaintext_allowed = true;
  EXPECT_TRUE(Server::Start(options, {}).ok());
}

// A role's command logs why its server did not start, and warns when it
// listens in the clear beyond loopback; quiet for plaintext on loopback.
TEST(ServerTest, StartLoggedSaysWhyAndWarnsOfPlaintext) {
  CapturedLog log;
  ServerOptions options;
  options.logger = log.logger();
  options.listen = "127.0.0.1:0";
  auto quiet = StartLogged(options, {});
  ASSERT_TRUE(quiet.ok()) << quiet.status();
  EXPECT_TRUE(log.Lines(spdlog::level::warn).empty());

  options.listen = absl::StrCat("127.0.0.1:", (*quiet)->port());
  ASSERT_FALSE(StartLogged(options, {}).ok());
  std::vector<std::string> lines = log.Lines(spdlog::level::err);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find(options.listen), std::string::npos) << lines[0];

  options.listen = "0.0.0.0:0";
  options.security.plaintext_allowed = true;
  ASSERT_TRUE(StartLogged(options, {}).ok());
  lines = log.Lines(spdlog::level::warn);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[1].find("0.0.0.0:0"), std::string::npos) << lines[1];
}

// Room for every sender's largest message, two more, and 64 MiB.
TEST(ServerTest, TransportMemoryGrowsWithTheSenders) {
  ServerOptions options;
  options.max_message_bytes = 16 << 20;
  options.senders = 4;
  EXPECT_EQ(TransportBytes(options), int64_t{(6 * 16 + 64)} << 20);
  options.senders = 0;  // at least one
  EXPECT_EQ(TransportBytes(options), int64_t{(3 * 16 + 64)} << 20);
  options.max_message_bytes = 2047 << 20;
  options.senders = 1000;
  EXPECT_EQ(TransportBytes(options), 1002 * (int64_t{2047} << 20) + (64 << 20));
}

// The flags of a serving role, mapped once for the shard, the LPS and the
// global server.
TEST(ServerTest, ServerOptionsFromFlagsMapsEachFlag) {
  ServerOptions plain = ServerOptionsFromFlags("0.0.0.0:7000", TlsFiles(),
                                               /*insecure=*/true,
                                               /*max_message_mb=*/96,
                                               /*senders=*/5, nullptr);
  EXPECT_EQ(plain.listen, "0.0.0.0:7000");
  EXPECT_EQ(plain.security.kind, TransportSecurity::Kind::kInsecure);
  EXPECT_TRUE(plain.security.plaintext_allowed);
  EXPECT_EQ(plain.max_message_bytes, 96 << 20);
  EXPECT_EQ(plain.senders, 5);

  TlsFiles files;
  files.cert = "server.pem";
  files.key = "server.key";
  files.ca = "ca.pem";
  ServerOptions tls = ServerOptionsFromFlags("127.0.0.1:0", files,
                                             /*insecure=*/false, 4,
                                             /*senders=*/1, nullptr);
  EXPECT_EQ(tls.security.kind, TransportSecurity::Kind::kTls);
  EXPECT_EQ(tls.security.files.ca, "ca.pem");
  EXPECT_EQ(tls.max_message_bytes, 4 << 20);
}

}  // namespace
}  // namespace tern::net
