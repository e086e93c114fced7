#include "common/net/peer_identity.h"

#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "grpc/grpc_security_constants.h"
#include "gtest/gtest.h"

namespace tern::net {
namespace {

using ::testing::HasSubstr;

// An auth context holding the properties a test gives it, as gRPC's own
// holds those of a verified certificate.
class FakeAuthContext final : public grpc::AuthContext {
 public:
  explicit FakeAuthContext(std::vector<std::string> uris)
      : uris_(std::move(uris)) {}

  bool IsPeerAuthenticated() const override { return !uris_.empty(); }
  std::vector<grpc::string_ref> GetPeerIdentity() const override {
    return {};
  }
  std::string GetPeerIdentityPropertyName() const override { return ""; }
  std::vector<grpc::string_ref> FindPropertyValues(
      const std::string& name) const override {
    std::vector<grpc::string_ref> values;
    if (name != GRPC_PEER_URI_PROPERTY_NAME) return values;
    for (const std::string& uri : uris_) values.emplace_back(uri);
    return values;
  }
  grpc::AuthPropertyIterator begin() const override { return Iterator(); }
  grpc::AuthPropertyIterator end() const override { return Iterator(); }
  void AddProperty(const std::string&, const grpc::string_ref&) override {}
  bool SetPeerIdentityPropertyName(const std::string&) override {
    return false;
  }

 private:
  // The iterator's constructor is protected; the tests never iterate.
  struct Iterator : grpc::AuthPropertyIterator {};
  std::vector<std::string> uris_;
};

ExpectedPeer Worker(uint32_t id, absl::string_view run_id = "run-7") {
  ExpectedPeer expected;
  expected.identity_required = true;
  expected.run_id = run_id;
  expected.role = PeerRole::kWorker;
  expected.id = id;
  return expected;
}

TEST(ParsePeerUriTest, ReadsEachRole) {
  const std::map<std::string, PeerRole> roles = {
      {"ps", PeerRole::kPs},
      {"worker", PeerRole::kWorker},
      {"lps", PeerRole::kLps},
      {"global", PeerRole::kGlobal}};
  for (const auto& [name, role] : roles) {
    absl::StatusOr<PeerIdentity> identity =
        ParsePeerUri("tern://run.A_b-9/" + name + "/42");
    ASSERT_TRUE(identity.ok()) << identity.status();
    EXPECT_EQ(identity->run_id, "run.A_b-9");
    EXPECT_EQ(identity->role, role);
    EXPECT_EQ(identity->id, 42u);
    EXPECT_EQ(PeerRoleName(role), name);
  }
  absl::StatusOr<PeerIdentity> big = ParsePeerUri("tern://r/worker/4294967295");
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(big->id, 4294967295u);
  ASSERT_TRUE(ParsePeerUri("tern://r/global/0").ok());
}

TEST(ParsePeerUriTest, RefusesGarbage) {
  for (const char* uri : {
           "", "tern://", "tern:///worker/1", "tern://r/worker",
           "tern://r/worker/", "tern://r/worker/1/", "tern://r/worker/1/2",
           "tern://r/Worker/1", "tern://r/admin/1", "tern://r/worker/01",
           "tern://r/worker/-1", "tern://r/worker/+1", "tern://r/worker/1x",
           "tern://r/worker/ 1", "tern://r/worker/4294967296",
           "tern://r r/worker/1", "tern://r:1/worker/1", "https://r/worker/1",
           "spiffe://r/worker/1", "TERN://r/worker/1",
           "tern://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
           "aaaa/worker/1",
       }) {
    absl::StatusOr<PeerIdentity> identity = ParsePeerUri(uri);
    EXPECT_EQ(identity.status().code(), absl::StatusCode::kInvalidArgument)
        << "'" << uri << "'";
  }
  EXPECT_TRUE(IsValidRunId(std::string(64, 'a')));
  EXPECT_FALSE(IsValidRunId(std::string(65, 'a')));
}

TEST(CheckServerIdentityTest, OnlyTheExpectedRoleOfTheRunPasses) {
  const std::vector<PeerRole> shard = {PeerRole::kPs};
  EXPECT_TRUE(CheckServerIdentity({"tern://r1/ps/0"}, shard, "r1").ok());
  EXPECT_TRUE(CheckServerIdentity({"tern://r2/ps/0"}, shard, "").ok());
  EXPECT_TRUE(CheckServerIdentity({"tern://r1/lps/1"},
                                  {PeerRole::kPs, PeerRole::kLps}, "r1")
                  .ok());
  const absl::Status worker =
      CheckServerIdentity({"tern://r1/worker/1"}, shard, "r1");
  EXPECT_EQ(worker.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(worker.message()),
              ::testing::HasSubstr("worker 1 of run 'r1', not a ps"));
  EXPECT_EQ(CheckServerIdentity({"tern://r2/ps/0"}, shard, "r1").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(CheckServerIdentity({}, shard, "r1").code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(
      CheckServerIdentity({"tern://r1/ps/0", "tern://r1/ps/1"}, shard, "r1")
          .code(),
      absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(CheckServerIdentity({"https://r1/ps/0"}, shard, "r1").code(),
            absl::StatusCode::kUnauthenticated);
}

TEST(CheckPeerTest, TheRightWorkerPasses) {
  EXPECT_TRUE(
      CheckPeer(FakeAuthContext({"tern://run-7/worker/1"}), Worker(1)).ok());
  // No run asked for: any run's worker 1.
  EXPECT_TRUE(
      CheckPeer(FakeAuthContext({"tern://other/worker/1"}), Worker(1, ""))
          .ok());
}

TEST(CheckPeerTest, NoIdentityIsUnauthenticated) {
  const absl::Status status = CheckPeer(FakeAuthContext({}), Worker(0));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(status.message(), HasSubstr("no certificate"));
}

TEST(CheckPeerTest, NothingIsCheckedWhenNoIdentityIsRequired) {
  ExpectedPeer plaintext = Worker(0);
  plaintext.identity_required = false;
  EXPECT_TRUE(CheckPeer(FakeAuthContext({}), plaintext).ok());
  EXPECT_TRUE(
      CheckPeer(FakeAuthContext({"tern://x/ps/3"}), plaintext).ok());
}

TEST(CheckPeerTest, WrongRunIsDenied) {
  const absl::Status status =
      CheckPeer(FakeAuthContext({"tern://run-8/worker/1"}), Worker(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(status.message(), HasSubstr("wrong run"));
  EXPECT_THAT(status.message(), HasSubstr("run-8"));
  EXPECT_THAT(status.message(), HasSubstr("run-7"));
}

TEST(CheckPeerTest, WrongRoleIsDenied) {
  const absl::Status status =
      CheckPeer(FakeAuthContext({"tern://run-7/lps/1"}), Worker(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(status.message(), HasSubstr("wrong role"));
  EXPECT_THAT(status.message(), HasSubstr("lps 1"));
  EXPECT_THAT(status.message(), HasSubstr("worker 1"));
}

TEST(CheckPeerTest, WrongIdIsDenied) {
  const absl::Status status =
      CheckPeer(FakeAuthContext({"tern://run-7/worker/1"}), Worker(0));
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(status.message(), HasSubstr("wrong id"));
  EXPECT_THAT(status.message(), HasSubstr("worker 1"));
  EXPECT_THAT(status.message(), HasSubstr("as worker 0"));
}

TEST(CheckPeerTest, GarbageOrAmbiguousUrisAreUnauthenticated) {
  for (const std::vector<std::string>& uris :
       std::vector<std::vector<std::string>>{
           {"tern://run-7/worker/01"},
           {"spiffe://run-7/worker/1"},
           {"not a uri"},
           {"tern://run-7/worker/1", "tern://run-7/worker/0"}}) {
    const absl::Status status =
        CheckPeer(FakeAuthContext(uris), Worker(1));
    EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated) << uris[0];
  }
}

TEST(PeerPolicyTest, IdentitiesAreRequiredExactlyUnderMutualTls) {
  EXPECT_FALSE(
      PeerPolicy::For(TransportSecurity::Insecure(), "r").identity_required);
  TlsFiles server_only;
  server_only.cert = "c";
  server_only.key = "k";
  EXPECT_FALSE(PeerPolicy::For(TransportSecurity::Tls(server_only), "r")
                   .identity_required);
  TlsFiles mutual = server_only;
  mutual.ca = "ca";
  const PeerPolicy policy = PeerPolicy::For(TransportSecurity::Tls(mutual), "r");
  EXPECT_TRUE(policy.identity_required);
  const ExpectedPeer expected = policy.Expect(PeerRole::kLps, 2);
  EXPECT_TRUE(expected.identity_required);
  EXPECT_EQ(expected.run_id, "r");
  EXPECT_EQ(expected.role, PeerRole::kLps);
  EXPECT_EQ(expected.id, 2u);
}

// What `tern certs` writes is what the servers read back.
TEST(PeerUriTest, WritesWhatParsePeerUriReads) {
  for (const PeerIdentity& identity :
       {PeerIdentity{"run-1", PeerRole::kWorker, 3},
        PeerIdentity{"r", PeerRole::kPs, 0},
        PeerIdentity{"r.2_x", PeerRole::kLps, 4294967295u},
        PeerIdentity{"r", PeerRole::kGlobal, 0}}) {
    const std::string uri = PeerUri(identity);
    absl::StatusOr<PeerIdentity> parsed = ParsePeerUri(uri);
    ASSERT_TRUE(parsed.ok()) << uri << ": " << parsed.status();
    EXPECT_EQ(parsed->run_id, identity.run_id);
    EXPECT_EQ(parsed->role, identity.role);
    EXPECT_EQ(parsed->id, identity.id);
  }
  EXPECT_EQ(PeerUri({"run-1", PeerRole::kWorker, 3}), "tern://run-1/worker/3");
}

}  // namespace
}  // namespace tern::net
