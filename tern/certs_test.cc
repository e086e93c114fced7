#include "tern/certs.h"

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern::certs {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

struct StoreFree {
  void operator()(X509_STORE* store) const { X509_STORE_free(store); }
};
struct StoreCtxFree {
  void operator()(X509_STORE_CTX* ctx) const { X509_STORE_CTX_free(ctx); }
};

struct ChainFree {
  void operator()(STACK_OF(X509) * chain) const { sk_X509_free(chain); }
};

// X509_verify_cert of `leaf` against a store holding only `ca`, for TLS
// `purpose` (X509_PURPOSE_SSL_SERVER / _CLIENT), with `intermediate` (if
// any) offered as an untrusted chain certificate, as a peer would send it:
// X509_V_OK or the verification error.
int Verify(X509* ca, X509* leaf, int purpose, X509* intermediate = nullptr) {
  std::unique_ptr<X509_STORE, StoreFree> store(X509_STORE_new());
  std::unique_ptr<X509_STORE_CTX, StoreCtxFree> ctx(X509_STORE_CTX_new());
  std::unique_ptr<STACK_OF(X509), ChainFree> chain(sk_X509_new_null());
  if (intermediate != nullptr) sk_X509_push(chain.get(), intermediate);
  EXPECT_EQ(X509_STORE_add_cert(store.get(), ca), 1);
  EXPECT_EQ(X509_STORE_CTX_init(ctx.get(), store.get(), leaf, chain.get()), 1);
  EXPECT_EQ(X509_STORE_CTX_set_purpose(ctx.get(), purpose), 1);
  const int verified = X509_verify_cert(ctx.get());
  const int error = X509_STORE_CTX_get_error(ctx.get());
  EXPECT_EQ(verified == 1, error == X509_V_OK);
  return error;
}

KeyAndCert MustMakeCa(const std::string& run_id = "demo") {
  absl::StatusOr<KeyAndCert> ca = MakeCa(run_id, 365);
  EXPECT_TRUE(ca.ok()) << ca.status();
  return ca.ok() ? *std::move(ca) : KeyAndCert{};
}

KeyAndCert MustIssue(const KeyAndCert& ca, const LeafSpec& spec) {
  absl::StatusOr<KeyAndCert> leaf = IssueLeaf(ca, spec);
  EXPECT_TRUE(leaf.ok()) << leaf.status();
  return leaf.ok() ? *std::move(leaf) : KeyAndCert{};
}

LeafSpec Spec(Role role, uint32_t id, std::vector<std::string> hosts = {}) {
  LeafSpec spec;
  spec.identity = Identity{"demo", role, id};
  spec.hosts = std::move(hosts);
  return spec;
}

TEST(IdentityTest, UriAndName) {
  EXPECT_EQ(net::PeerUri({"run-1", Role::kWorker, 3}), "tern://run-1/worker/3");
  EXPECT_EQ(net::PeerUri({"r", Role::kPs, 0}), "tern://r/ps/0");
  EXPECT_EQ(net::PeerUri({"r", Role::kLps, 12}), "tern://r/lps/12");
  EXPECT_EQ(net::PeerUri({"r", Role::kGlobal, 0}), "tern://r/global/0");
  EXPECT_EQ(IdentityName({"r", Role::kWorker, 3}), "worker-3");
  EXPECT_EQ(IdentityName({"r", Role::kLps, 1}), "lps-1");
  EXPECT_EQ(IdentityName({"r", Role::kGlobal, 0}), "global");
}

TEST(ValidateTest, RunIds) {
  for (const char* good : {"demo", "run-2024.01_a", "R"}) {
    EXPECT_TRUE(ValidateRunId(good).ok()) << good;
  }
  EXPECT_TRUE(ValidateRunId(std::string(64, 'a')).ok());
  for (const std::string& bad :
       {std::string(), std::string("a/b"), std::string("a b"),
        std::string("a:b"), std::string("ü"), std::string(65, 'a')}) {
    EXPECT_EQ(ValidateRunId(bad).code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST(ValidateTest, Hosts) {
  for (const char* good : {"localhost", "tern-ps-0.tern-ps", "10.0.0.1", "::1",
                           "fe80::1", "a.b-c.d9"}) {
    EXPECT_TRUE(ValidateHost(good).ok()) << good;
  }
  for (const char* bad :
       {"", "bad host", "-x", "x-", "a..b", "a,b", "*.tern", "a.", "tern_ps"}) {
    EXPECT_EQ(ValidateHost(bad).code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_FALSE(ValidateHost(std::string(64, 'a')).ok());  // a label > 63
}

TEST(MakeCaTest, IsASelfSignedCaForItsKey) {
  KeyAndCert ca = MustMakeCa();
  ASSERT_NE(ca.cert, nullptr);
  EXPECT_EQ(X509_check_ca(ca.cert.get()), 1);
  EXPECT_EQ(X509_check_issued(ca.cert.get(), ca.cert.get()), X509_V_OK);
  EXPECT_EQ(X509_check_private_key(ca.cert.get(), ca.key.get()), 1);
  EXPECT_EQ(X509_verify(ca.cert.get(), ca.key.get()), 1);
  EXPECT_EQ(EVP_PKEY_get_base_id(ca.key.get()), EVP_PKEY_EC);
  EXPECT_EQ(EVP_PKEY_get_bits(ca.key.get()), 256);
}

TEST(MakeCaTest, RejectsBadArguments) {
  EXPECT_EQ(MakeCa("a/b", 365).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeCa("demo", 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MakeCaTest, ValidityIsDaysFromFiveMinutesAgo) {
  absl::StatusOr<KeyAndCert> ca = MakeCa("demo", 30);
  ASSERT_TRUE(ca.ok()) << ca.status();
  int days = 0;
  int seconds = 0;
  ASSERT_EQ(ASN1_TIME_diff(&days, &seconds, X509_get0_notBefore(ca->cert.get()),
                           X509_get0_notAfter(ca->cert.get())),
            1);
  EXPECT_EQ(days, 30);
  EXPECT_NEAR(seconds, 300, 2);
  // It is valid now.
  EXPECT_LT(X509_cmp_current_time(X509_get0_notBefore(ca->cert.get())), 0);
  EXPECT_GT(X509_cmp_current_time(X509_get0_notAfter(ca->cert.get())), 0);
}

// Every role, with ids 0, 1, an odd one and the largest.
class LeafTest : public ::testing::TestWithParam<std::tuple<Role, uint32_t>> {};

TEST_P(LeafTest, VerifiesAndNamesExactlyItsIdentity) {
  const auto [role, id] = GetParam();
  KeyAndCert ca = MustMakeCa();
  KeyAndCert leaf = MustIssue(ca, Spec(role, id,
                                       {"localhost", "127.0.0.1", "::1",
                                        "tern-ps-0.tern-ps", "10.1.2.3"}));
  ASSERT_NE(leaf.cert, nullptr);
  EXPECT_EQ(Verify(ca.cert.get(), leaf.cert.get(), X509_PURPOSE_SSL_SERVER),
            X509_V_OK);
  EXPECT_EQ(Verify(ca.cert.get(), leaf.cert.get(), X509_PURPOSE_SSL_CLIENT),
            X509_V_OK);

  absl::StatusOr<SubjectAltNames> names = ReadSubjectAltNames(*leaf.cert);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_THAT(names->uris, ElementsAre(net::PeerUri({"demo", role, id})));
  EXPECT_THAT(names->dns, ElementsAre("localhost", "tern-ps-0.tern-ps"));
  EXPECT_THAT(names->ips, ElementsAre("127.0.0.1", "::1", "10.1.2.3"));
}

INSTANTIATE_TEST_SUITE_P(
    Roles, LeafTest,
    ::testing::Combine(::testing::Values(Role::kPs, Role::kWorker, Role::kLps,
                                         Role::kGlobal),
                       ::testing::Values(0u, 1u, 7u, 4294967295u)));

TEST(IssueLeafTest, HasBothExtendedKeyUsagesAndIsNoCa) {
  KeyAndCert ca = MustMakeCa();
  KeyAndCert leaf = MustIssue(ca, Spec(Role::kWorker, 3));
  ASSERT_NE(leaf.cert, nullptr);
  const uint32_t eku = X509_get_extended_key_usage(leaf.cert.get());
  EXPECT_TRUE(eku & XKU_SSL_SERVER);
  EXPECT_TRUE(eku & XKU_SSL_CLIENT);
  EXPECT_EQ(X509_check_ca(leaf.cert.get()), 0);
  // Nothing it signs verifies: a leaf cannot act as an intermediate CA.
  KeyAndCert grandchild = MustIssue(leaf, Spec(Role::kWorker, 4));
  ASSERT_NE(grandchild.cert, nullptr);
  EXPECT_EQ(Verify(ca.cert.get(), grandchild.cert.get(),
                   X509_PURPOSE_SSL_CLIENT, leaf.cert.get()),
            X509_V_ERR_INVALID_CA);
}

TEST(IssueLeafTest, KeyMatchesItsCertOnly) {
  KeyAndCert ca = MustMakeCa();
  KeyAndCert a = MustIssue(ca, Spec(Role::kPs, 0));
  KeyAndCert b = MustIssue(ca, Spec(Role::kPs, 1));
  ASSERT_NE(a.cert, nullptr);
  ASSERT_NE(b.cert, nullptr);
  EXPECT_EQ(X509_check_private_key(a.cert.get(), a.key.get()), 1);
  EXPECT_EQ(X509_check_private_key(b.cert.get(), b.key.get()), 1);
  EXPECT_NE(X509_check_private_key(a.cert.get(), b.key.get()), 1);
  EXPECT_NE(X509_check_private_key(a.cert.get(), ca.key.get()), 1);
  ERR_clear_error();
}

TEST(IssueLeafTest, SerialsAreRandom159BitNumbers) {
  KeyAndCert ca = MustMakeCa();
  KeyAndCert a = MustIssue(ca, Spec(Role::kPs, 0));
  KeyAndCert b = MustIssue(ca, Spec(Role::kPs, 0));
  ASSERT_NE(a.cert, nullptr);
  ASSERT_NE(b.cert, nullptr);
  const ASN1_INTEGER* serial_a = X509_get0_serialNumber(a.cert.get());
  const ASN1_INTEGER* serial_b = X509_get0_serialNumber(b.cert.get());
  EXPECT_NE(ASN1_INTEGER_cmp(serial_a, serial_b), 0);
  BIGNUM* bn = ASN1_INTEGER_to_BN(serial_a, nullptr);
  ASSERT_NE(bn, nullptr);
  EXPECT_EQ(BN_num_bits(bn), 159);
  EXPECT_FALSE(BN_is_negative(bn));
  BN_free(bn);
}

TEST(IssueLeafTest, LeafOfAnotherCaDoesNotVerify) {
  KeyAndCert ca = MustMakeCa();
  KeyAndCert other_ca = MustMakeCa();  // same run id, different key
  KeyAndCert stranger = MustIssue(other_ca, Spec(Role::kWorker, 0));
  ASSERT_NE(stranger.cert, nullptr);
  EXPECT_EQ(Verify(ca.cert.get(), stranger.cert.get(), X509_PURPOSE_SSL_CLIENT),
            X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
  EXPECT_EQ(
      Verify(other_ca.cert.get(), stranger.cert.get(), X509_PURPOSE_SSL_CLIENT),
      X509_V_OK);
}

TEST(IssueLeafTest, DropsDuplicateHosts) {
  KeyAndCert ca = MustMakeCa();
  KeyAndCert leaf =
      MustIssue(ca, Spec(Role::kPs, 0, {"a", "127.0.0.1", "a", "127.0.0.1"}));
  ASSERT_NE(leaf.cert, nullptr);
  absl::StatusOr<SubjectAltNames> names = ReadSubjectAltNames(*leaf.cert);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_THAT(names->dns, ElementsAre("a"));
  EXPECT_THAT(names->ips, ElementsAre("127.0.0.1"));
}

TEST(IssueLeafTest, RejectsBadSpecsAndAMismatchedCa) {
  KeyAndCert ca = MustMakeCa();
  EXPECT_EQ(IssueLeaf(ca, Spec(Role::kPs, 0, {"bad host"})).status().code(),
            absl::StatusCode::kInvalidArgument);
  LeafSpec bad_run = Spec(Role::kPs, 0);
  bad_run.identity.run_id = "x/y";
  EXPECT_EQ(IssueLeaf(ca, bad_run).status().code(),
            absl::StatusCode::kInvalidArgument);
  LeafSpec no_days = Spec(Role::kPs, 0);
  no_days.days = 0;
  EXPECT_EQ(IssueLeaf(ca, no_days).status().code(),
            absl::StatusCode::kInvalidArgument);

  KeyAndCert other = MustMakeCa();
  KeyAndCert mixed{std::move(other.key), std::move(ca.cert)};
  const absl::Status status = IssueLeaf(mixed, Spec(Role::kPs, 0)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("does not match"));
}

TEST(PemTest, RoundTrips) {
  KeyAndCert ca = MustMakeCa();
  KeyAndCert leaf = MustIssue(ca, Spec(Role::kLps, 2));
  ASSERT_NE(leaf.cert, nullptr);
  absl::StatusOr<std::string> cert_pem = CertToPem(*leaf.cert);
  absl::StatusOr<std::string> key_pem = KeyToPem(*leaf.key);
  ASSERT_TRUE(cert_pem.ok()) << cert_pem.status();
  ASSERT_TRUE(key_pem.ok()) << key_pem.status();
  EXPECT_THAT(*cert_pem, ::testing::StartsWith("-----BEGIN CERTIFICATE-----"));
  EXPECT_THAT(*key_pem, ::testing::StartsWith("-----BEGIN PRIVATE KEY-----"));

  absl::StatusOr<CertPtr> cert = ParseCertPem(*cert_pem);
  absl::StatusOr<KeyPtr> key = ParseKeyPem(*key_pem);
  ASSERT_TRUE(cert.ok()) << cert.status();
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(X509_cmp(cert->get(), leaf.cert.get()), 0);
  EXPECT_EQ(X509_check_private_key(cert->get(), key->get()), 1);

  absl::StatusOr<std::vector<std::string>> uris = SanUrisFromPem(*cert_pem);
  ASSERT_TRUE(uris.ok()) << uris.status();
  EXPECT_THAT(*uris, ElementsAre("tern://demo/lps/2"));
}

TEST(PemTest, GarbageIsInvalidArgument) {
  const absl::Status cert = SanUrisFromPem("not a certificate").status();
  EXPECT_EQ(cert.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(cert.message(), HasSubstr("OpenSSL: reading a PEM certificate"));
  EXPECT_EQ(ParseKeyPem("").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ReadSubjectAltNamesTest, NoneAndTwice) {
  KeyAndCert ca = MustMakeCa();
  ASSERT_NE(ca.cert, nullptr);
  absl::StatusOr<SubjectAltNames> none = ReadSubjectAltNames(*ca.cert);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_THAT(none->uris, IsEmpty());
  EXPECT_THAT(none->dns, IsEmpty());

  // A second subjectAltName makes the identity ambiguous: refused.
  KeyAndCert leaf = MustIssue(ca, Spec(Role::kWorker, 1));
  ASSERT_NE(leaf.cert, nullptr);
  GENERAL_NAMES* extra = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(
      leaf.cert.get(), NID_subject_alt_name, nullptr, nullptr));
  ASSERT_NE(extra, nullptr);
  ASSERT_EQ(X509_add1_ext_i2d(leaf.cert.get(), NID_subject_alt_name, extra, 0,
                              X509V3_ADD_APPEND),
            1);
  GENERAL_NAMES_free(extra);
  EXPECT_EQ(ReadSubjectAltNames(*leaf.cert).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tern::certs
