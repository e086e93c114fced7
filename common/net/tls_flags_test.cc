#include "common/net/tls_flags.h"

#include <string>

#include "common/flags/flags_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern::net {
namespace {

using ::testing::HasSubstr;

struct Parsed {
  TlsFiles files;
  CLI::App app{"test"};
  Parsed() { AddTlsFlags(&app, &files); }
  void Parse(const std::string& args) { app.parse(args, false); }
};

TlsFiles Given(const char* cert, const char* key, const char* ca) {
  TlsFiles files;
  files.cert = cert;
  files.key = key;
  files.ca = ca;
  return files;
}

TEST(TlsFlagsTest, NoFlagsIsPlaintext) {
  Parsed parsed;
  parsed.Parse("");
  EXPECT_FALSE(parsed.files.any());
  EXPECT_EQ(SecurityFromFlags(parsed.files).kind,
            TransportSecurity::Kind::kInsecure);
  for (TlsUse use :
       {TlsUse::kServe, TlsUse::kConnect, TlsUse::kServeAndConnect}) {
    EXPECT_TRUE(ValidateTlsFlags(parsed.files, use).ok());
  }
}

TEST(TlsFlagsTest, FlagsAndTheirEnvironmentVariablesFillTheFiles) {
  Parsed parsed;
  {
    const flags::ScopedEnv ca("TERN_TLS_CA", "/env/ca.pem");
    parsed.Parse("--tls_cert=/a.pem --tls_key=/a.key");
  }
  EXPECT_EQ(parsed.files.cert, "/a.pem");
  EXPECT_EQ(parsed.files.key, "/a.key");
  EXPECT_EQ(parsed.files.ca, "/env/ca.pem");
  const TransportSecurity security = SecurityFromFlags(parsed.files);
  EXPECT_EQ(security.kind, TransportSecurity::Kind::kTls);
  EXPECT_EQ(security.files.cert, "/a.pem");
  EXPECT_EQ(security.files.ca, "/env/ca.pem");
  const std::string help = parsed.app.help();
  for (const char* env : {"TERN_TLS_CERT", "TERN_TLS_KEY", "TERN_TLS_CA"}) {
    EXPECT_THAT(help, HasSubstr(env));
  }
}

TEST(TlsFlagsTest, CertAndKeyGoTogether) {
  for (TlsUse use :
       {TlsUse::kServe, TlsUse::kConnect, TlsUse::kServeAndConnect}) {
    absl::Status status = ValidateTlsFlags(Given("/a.pem", "", "/ca"), use);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), HasSubstr("--tls_key"));
    status = ValidateTlsFlags(Given("", "/a.key", "/ca"), use);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), HasSubstr("--tls_cert"));
  }
}

TEST(TlsFlagsTest, AServerNeedsItsOwnCertificateForACa) {
  const TlsFiles ca_only = Given("", "", "/ca");
  for (TlsUse use : {TlsUse::kServe, TlsUse::kServeAndConnect}) {
    const absl::Status status = ValidateTlsFlags(ca_only, use);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), HasSubstr("--tls_ca without"));
  }
  // A client with only the CA verifies its server and shows no certificate.
  EXPECT_TRUE(ValidateTlsFlags(ca_only, TlsUse::kConnect).ok());
}

TEST(TlsFlagsTest, AClientNeedsTheCaToVerifyItsServer) {
  const TlsFiles no_ca = Given("/a.pem", "/a.key", "");
  // A server without a CA is TLS without client certificates.
  EXPECT_TRUE(ValidateTlsFlags(no_ca, TlsUse::kServe).ok());
  for (TlsUse use : {TlsUse::kConnect, TlsUse::kServeAndConnect}) {
    const absl::Status status = ValidateTlsFlags(no_ca, use);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), HasSubstr("--tls_ca"));
  }
  for (TlsUse use :
       {TlsUse::kServe, TlsUse::kConnect, TlsUse::kServeAndConnect}) {
    EXPECT_TRUE(ValidateTlsFlags(Given("/a.pem", "/a.key", "/ca"), use).ok());
  }
}

// The files are read again every --tls_refresh_s seconds (1 to 3600).
TEST(TlsFlagsTest, RefreshIntervalIsAFlag) {
  Parsed parsed;
  EXPECT_EQ(parsed.files.refresh_s, 10);
  parsed.Parse("--tls_refresh_s=2 --tls_cert=/a.pem --tls_key=/a.key");
  EXPECT_EQ(SecurityFromFlags(parsed.files).refresh_interval, absl::Seconds(2));
  Parsed zero;
  EXPECT_THROW(zero.Parse("--tls_refresh_s=0"), CLI::ParseError);
}

// --insecure allows plaintext beyond loopback, and only without files.
TEST(TlsFlagsTest, InsecureIsPlaintextAllowedAndNotWithFiles) {
  EXPECT_TRUE(SecurityFromFlags(TlsFiles(), true).plaintext_allowed);
  EXPECT_FALSE(SecurityFromFlags(TlsFiles(), false).plaintext_allowed);
  EXPECT_TRUE(ValidateInsecureFlag(TlsFiles(), true).ok());
  EXPECT_THAT(
      std::string(
          ValidateInsecureFlag(Given("/a.pem", "/a.key", ""), true).message()),
      HasSubstr("not both"));
}

// A serving role's --run_id: any run when empty, else a valid run id.
TEST(TlsFlagsTest, ServingRunIdIsEmptyOrAValidRunId) {
  std::string run_id;
  CLI::App app{"test"};
  AddServingRunIdFlag(&app, &run_id);
  app.parse("--run_id=exp-3.a_b", false);
  EXPECT_EQ(run_id, "exp-3.a_b");
  EXPECT_TRUE(ValidateServingRunId(run_id).ok());
  EXPECT_TRUE(ValidateServingRunId("").ok());
  for (const std::string& bad : {std::string("a/b"), std::string(65, 'r')}) {
    const absl::Status status = ValidateServingRunId(bad);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(status.message()), HasSubstr("--run_id: '"));
  }
}

}  // namespace
}  // namespace tern::net
