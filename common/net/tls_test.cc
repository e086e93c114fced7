// TLS and mTLS over loopback: a real net::Server and health Check calls
// from clients with the right, missing or foreign certificates, and a
// certificate rotated on disk while the server runs.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/net/channel.h"
#include "common/net/credentials.h"
#include "common/net/peer_identity.h"
#include "common/net/server.h"
#include "common/net/test_certs.h"
#include "grpc/grpc.h"
#include "grpc/grpc_security_constants.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"

namespace tern::net {
namespace {

// One test dials "localhost" by name. gRPC's default c-ares resolver then
// leaks 10 bytes inside Debian's libcares, which fails the LeakSanitizer
// run (./dev.sh test sanitize); the system resolver does the same job here
// and leaks nothing. Set before the first channel initializes gRPC.
[[maybe_unused]] const bool kNativeResolver = [] {
  return setenv("GRPC_DNS_RESOLVER", "native", /*overwrite=*/1) == 0;
}();

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// What one Check saw: the call's status and the CN of the server's
// certificate (empty over plaintext or when the handshake failed).
struct Answer {
  grpc::Status status;
  std::string server_cn;
};

// One Check call over `channel`.
Answer CheckOver(const std::shared_ptr<grpc::Channel>& channel) {
  auto health_client = Health::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  HealthCheckResponse response;
  Answer answer;
  answer.status =
      health_client->Check(&context, HealthCheckRequest(), &response);
  if (answer.status.ok() &&
      response.status() != HealthCheckResponse::SERVING) {
    answer.status = grpc::Status(grpc::StatusCode::UNKNOWN, "not SERVING");
  }
  if (std::shared_ptr<const grpc::AuthContext> auth = context.auth_context()) {
    for (const grpc::string_ref& cn :
         auth->FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME)) {
      answer.server_cn.assign(cn.data(), cn.size());
    }
  }
  return answer;
}

// A channel as CreateChannel makes it, but with a connection of its own
// (a local subchannel pool): each call of a test handshakes afresh.
std::shared_ptr<grpc::Channel> FreshChannel(
    const std::string& address, const TransportSecurity& security) {
  ChannelOptions options;
  options.security = security;
  grpc::ChannelArguments args = ChannelArgumentsFor(options);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, ChannelCredentials(security), args);
}

Answer Check(int port, const TransportSecurity& security,
             const std::string& host = "127.0.0.1") {
  return CheckOver(FreshChannel(absl::StrCat(host, ":", port), security));
}

TransportSecurity Tls(TlsFiles files) {
  TransportSecurity security = TransportSecurity::Tls(std::move(files));
  security.refresh_interval = absl::Seconds(1);
  return security;
}

// Replaces `to` with a copy of `from` in one rename.
void ReplaceFile(const std::string& from, const std::string& to) {
  const std::string staged = to + ".new";
  std::filesystem::copy_file(
      from, staged, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::rename(staged, to);
}

// Certificates for every test: the CA, a server and a client signed by it,
// a second server certificate for the rotation, and an unrelated CA with a
// client of its own.
class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!TestCerts::OpensslAvailable()) {
      GTEST_SKIP() << "the openssl command-line tool is not installed";
    }
    const char* tmp = std::getenv("TEST_TMPDIR");
    certs_ = std::make_unique<TestCerts>(absl::StrCat(
        tmp != nullptr ? tmp : "/tmp", "/tls_test_",
        ::testing::UnitTest::GetInstance()->current_test_info()->name()));
    for (const char* ca : {"ca", "other-ca"}) {
      const absl::Status status = certs_->MakeCa(ca);
      ASSERT_TRUE(status.ok()) << status;
    }
    for (const auto& [ca, leaf] :
         {std::pair<const char*, const char*>{"ca", "server-a"},
          {"ca", "server-b"},
          {"ca", "client"},
          {"other-ca", "stranger"}}) {
      const absl::Status status = certs_->MakeLeaf(ca, leaf);
      ASSERT_TRUE(status.ok()) << status;
    }
  }

  // A server with `files` (TLS, files re-read every second).
  std::unique_ptr<Server> StartServer(const TlsFiles& files) {
    ServerOptions options;
    options.listen = "127.0.0.1:0";
    options.security = Tls(files);
    absl::StatusOr<std::unique_ptr<Server>> server =
        Server::Start(options, {});
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? std::move(*server) : nullptr;
  }

  // The client's own certificate and key, trusting `ca`.
  TransportSecurity Client(const std::string& name, const std::string& ca) {
    return Tls(certs_->Files(name, ca));
  }
  // No certificate of its own, trusting `ca`.
  TransportSecurity Anonymous(const std::string& ca) {
    TlsFiles files;
    files.ca = certs_->Cert(ca);
    return Tls(files);
  }

  std::unique_ptr<TestCerts> certs_;
};

TEST_F(TlsTest, MutualTlsWithTheRightCertificatesServes) {
  std::unique_ptr<Server> server =
      StartServer(certs_->Files("server-a", "ca"));
  ASSERT_NE(server, nullptr);
  const Answer answer = Check(server->port(), Client("client", "ca"));
  EXPECT_TRUE(answer.status.ok()) << answer.status.error_message();
  EXPECT_EQ(answer.server_cn, "server-a");
  // By name too (the certificate carries DNS localhost), and through
  // CreateChannel itself.
  EXPECT_TRUE(Check(server->port(), Client("client", "ca"), "localhost")
                  .status.ok());
  ChannelOptions options;
  options.security = Client("client", "ca");
  EXPECT_TRUE(CheckOver(CreateChannel(
                            absl::StrCat("127.0.0.1:", server->port()),
                            options))
                  .status.ok());
}

TEST_F(TlsTest, AClientWithoutACertificateIsRefusedByAServerWithACa) {
  std::unique_ptr<Server> server =
      StartServer(certs_->Files("server-a", "ca"));
  ASSERT_NE(server, nullptr);
  const Answer answer = Check(server->port(), Anonymous("ca"));
  EXPECT_EQ(answer.status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << answer.status.error_message();
}

TEST_F(TlsTest, AClientCertificateFromAnotherCaIsRefused) {
  std::unique_ptr<Server> server =
      StartServer(certs_->Files("server-a", "ca"));
  ASSERT_NE(server, nullptr);
  // The stranger trusts the right CA, but its own certificate does not
  // chain to it.
  TlsFiles files = certs_->Files("stranger", "ca");
  const Answer answer = Check(server->port(), Tls(files));
  EXPECT_EQ(answer.status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << answer.status.error_message();
}

TEST_F(TlsTest, AClientTrustingAnotherCaRefusesTheServer) {
  std::unique_ptr<Server> server =
      StartServer(certs_->Files("server-a", "ca"));
  ASSERT_NE(server, nullptr);
  const Answer answer = Check(server->port(), Client("client", "other-ca"));
  EXPECT_EQ(answer.status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << answer.status.error_message();
  EXPECT_TRUE(answer.server_cn.empty());
}

TEST_F(TlsTest, APlaintextClientGetsNoAnswerFromATlsServer) {
  std::unique_ptr<Server> server =
      StartServer(certs_->Files("server-a", "ca"));
  ASSERT_NE(server, nullptr);
  const Answer answer = Check(server->port(), TransportSecurity::Insecure());
  EXPECT_EQ(answer.status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << answer.status.error_message();
}

TEST_F(TlsTest, TheServerNameIsCheckedAndCanBeSetForTheAddress) {
  std::unique_ptr<Server> server =
      StartServer(certs_->Files("server-a", "ca"));
  ASSERT_NE(server, nullptr);
  TransportSecurity client = Client("client", "ca");
  client.server_name = "localhost";  // on the certificate
  EXPECT_TRUE(Check(server->port(), client).status.ok());
  client.server_name = "elsewhere.example";  // not on it
  EXPECT_EQ(Check(server->port(), client).status.error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

// A client that expects a shard of run r1 (as workers do) refuses a
// server presenting another certificate of the same CA: a worker's,
// another run's shard's, or one without a tern identity; and it still
// checks the host name.
TEST_F(TlsTest, AClientRefusesAServerWithoutTheExpectedIdentity) {
  const std::map<std::string, std::vector<std::string>> leaves = {
      {"shard", {"tern://r1/ps/0"}},
      {"worker", {"tern://r1/worker/1"}},
      {"other-run", {"tern://r2/ps/0"}}};
  for (const auto& [name, uris] : leaves) {
    const absl::Status status = certs_->MakeLeaf("ca", name, uris);
    ASSERT_TRUE(status.ok()) << status;
  }
  TransportSecurity client = Client("client", "ca");
  client.server_verifier = ServerIdentityVerifier({PeerRole::kPs}, "r1");
  for (const char* name : {"shard", "worker", "other-run", "server-a"}) {
    std::unique_ptr<Server> server = StartServer(certs_->Files(name, "ca"));
    ASSERT_NE(server, nullptr);
    const grpc::StatusCode expected = std::string(name) == "shard"
                                          ? grpc::StatusCode::OK
                                          : grpc::StatusCode::UNAVAILABLE;
    EXPECT_EQ(Check(server->port(), client).status.error_code(), expected)
        << name;
    if (std::string(name) != "shard") continue;
    TransportSecurity misnamed = client;
    misnamed.server_name = "elsewhere.example";
    EXPECT_EQ(Check(server->port(), misnamed).status.error_code(),
              grpc::StatusCode::UNAVAILABLE);
  }
}

TEST_F(TlsTest, WithoutACaTheServerIsTlsOnlyAndAsksNoClientCertificate) {
  TlsFiles files = certs_->Files("server-a", "ca");
  files.ca.clear();
  std::unique_ptr<Server> server = StartServer(files);
  ASSERT_NE(server, nullptr);
  const Answer anonymous = Check(server->port(), Anonymous("ca"));
  EXPECT_TRUE(anonymous.status.ok()) << anonymous.status.error_message();
  EXPECT_EQ(anonymous.server_cn, "server-a");
  EXPECT_TRUE(Check(server->port(), Client("client", "ca")).status.ok());
  EXPECT_EQ(Check(server->port(), TransportSecurity::Insecure())
                .status.error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

// The server's certificate and key are replaced on disk while it serves:
// after the refresh interval new connections get the new certificate, and
// the server goes on answering over the old connection as well.
TEST_F(TlsTest, ARotatedCertificateIsServedWithoutARestart) {
  TlsFiles live;
  live.cert = certs_->dir() + "/live.crt";
  live.key = certs_->dir() + "/live.key";
  live.ca = certs_->Cert("ca");
  ReplaceFile(certs_->Key("server-a"), live.key);
  ReplaceFile(certs_->Cert("server-a"), live.cert);
  std::unique_ptr<Server> server = StartServer(live);
  ASSERT_NE(server, nullptr);
  const std::shared_ptr<grpc::Channel> kept = FreshChannel(
      absl::StrCat("127.0.0.1:", server->port()), Client("client", "ca"));
  const Answer before = CheckOver(kept);
  ASSERT_TRUE(before.status.ok()) << before.status.error_message();
  EXPECT_EQ(before.server_cn, "server-a");

  ReplaceFile(certs_->Key("server-b"), live.key);
  ReplaceFile(certs_->Cert("server-b"), live.cert);
  // Every second the files are read again; a read between the two renames
  // may pair key B with certificate A for one interval.
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  Answer after;
  while (absl::Now() < give_up) {
    after = Check(server->port(), Client("client", "ca"));
    if (after.status.ok() && after.server_cn == "server-b") break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(after.status.ok()) << after.status.error_message();
  EXPECT_EQ(after.server_cn, "server-b");
  const Answer kept_after = CheckOver(kept);
  EXPECT_TRUE(kept_after.status.ok()) << kept_after.status.error_message();
}

TEST_F(TlsTest, AMissingOrBadFileIsAnErrorNamingIt) {
  TlsFiles files = certs_->Files("server-a", "ca");
  files.key = certs_->dir() + "/no-such.key";
  ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.security = Tls(files);
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(options, {});
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(server.status().message().find(files.key), std::string::npos)
      << server.status();

  const std::string not_pem = certs_->dir() + "/not-pem.crt";
  {
    std::FILE* file = std::fopen(not_pem.c_str(), "w");
    ASSERT_NE(file, nullptr);
    std::fputs("hello\n", file);
    std::fclose(file);
  }
  TlsFiles client = certs_->Files("client", "ca");
  client.ca = not_pem;
  const absl::Status status = CheckSecurity(Tls(client), Side::kClient);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find(not_pem), std::string::npos) << status;

  client.ca = certs_->dir() + "/no-such-ca.crt";
  EXPECT_EQ(CheckSecurity(Tls(client), Side::kClient).code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(
      CheckSecurity(Client("client", "ca"), Side::kClient).ok());
}

TEST(CheckSecurityTest, EachSideNeedsItsFiles) {
  EXPECT_TRUE(
      CheckSecurity(TransportSecurity::Insecure(), Side::kServer).ok());
  TlsFiles ca_only;
  ca_only.ca = "/ca.crt";
  EXPECT_EQ(CheckSecurity(TransportSecurity::Tls(ca_only), Side::kServer)
                .code(),
            absl::StatusCode::kInvalidArgument);
  TlsFiles cert_only;
  cert_only.cert = "/a.crt";
  cert_only.ca = "/ca.crt";
  EXPECT_EQ(CheckSecurity(TransportSecurity::Tls(cert_only), Side::kClient)
                .code(),
            absl::StatusCode::kInvalidArgument);
  TlsFiles no_ca;
  no_ca.cert = "/a.crt";
  no_ca.key = "/a.key";
  EXPECT_EQ(
      CheckSecurity(TransportSecurity::Tls(no_ca), Side::kClient).code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tern::net
