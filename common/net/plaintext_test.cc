#include "common/net/plaintext.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern::net {
namespace {

using ::testing::HasSubstr;

TEST(IsLoopbackAddressTest, OnlyThisMachinesAddressesAreLoopback) {
  for (const char* address :
       {"127.0.0.1:50051", "127.9.8.7:1", "localhost:0", "[::1]:50051",
        "unix:/tmp/tern.sock", "dns:///localhost:5", "ipv4:127.0.0.1:5"}) {
    EXPECT_TRUE(IsLoopbackAddress(address)) << address;
  }
  for (const char* address :
       {"0.0.0.0:50051", "[::]:50051", "10.0.0.1:50051", "ps-0:50051",
        "128.0.0.1:5", "localhost.example.com:5", "[::2]:5", ":50051"}) {
    EXPECT_FALSE(IsLoopbackAddress(address)) << address;
  }
}

TEST(CheckPlaintextTest, PlaintextBeyondLoopbackNeedsInsecure) {
  TransportSecurity plaintext = TransportSecurity::Insecure();
  EXPECT_TRUE(CheckPlaintext(plaintext, "127.0.0.1:0", "listen on").ok());
  const absl::Status refused =
      CheckPlaintext(plaintext, "0.0.0.0:50051", "listen on");
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.message(),
              HasSubstr("refusing to listen on 0.0.0.0:50051 in plaintext"));
  EXPECT_THAT(refused.message(), HasSubstr("--insecure"));

  plaintext.plaintext_allowed = true;
  EXPECT_TRUE(CheckPlaintext(plaintext, "0.0.0.0:50051", "listen on").ok());
  EXPECT_THAT(PlaintextWarning(plaintext, "0.0.0.0:50051", "listening on"),
              HasSubstr("--insecure: listening on 0.0.0.0:50051 in plaintext"));
}

TEST(CheckPlaintextTest, TlsIsAllowedAnywhereAndNeverWarned) {
  TlsFiles files;
  files.cert = "c.pem";
  files.key = "k.pem";
  files.ca = "ca.pem";
  const TransportSecurity tls = TransportSecurity::Tls(files);
  EXPECT_TRUE(
      CheckPlaintext(tls, "0.0.0.0:1", "connect to the global server at").ok());
  EXPECT_EQ(PlaintextWarning(tls, "0.0.0.0:1", "listening on"), "");
  EXPECT_EQ(PlaintextWarning(TransportSecurity::Insecure(), "127.0.0.1:1",
                             "listening on"),
            "");
}

}  // namespace
}  // namespace tern::net
