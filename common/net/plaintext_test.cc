#include "common/net/plaintext.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern::net {
namespace {

using ::testing::HasSubstr;

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
