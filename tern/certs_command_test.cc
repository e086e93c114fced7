#include "tern/certs_command.h"

#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/flags/flags_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tern/certs.h"

namespace tern {
namespace {

using certs::Role;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

mode_t ModeOf(const std::string& path) {
  struct stat info;
  EXPECT_EQ(::stat(path.c_str(), &info), 0) << path;
  return info.st_mode & 07777;
}

bool Exists(const std::string& path) {
  struct stat info;
  return ::lstat(path.c_str(), &info) == 0;
}

// A fresh folder under the test's temporary directory; `dir` inside it is
// where the certificates go (not created).
class CertsCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    std::string pattern =
        absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/certs_XXXXXX");
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    options_.out_dir = root_ + "/certs";
    options_.run_id = "demo";
    options_.shards = 2;
    options_.workers = 4;
    options_.datacenters = 1;
    options_.global = true;
  }

  std::string Path(const std::string& name) const {
    return absl::StrCat(options_.out_dir, "/", name);
  }

  std::string root_;
  CertsOptions options_;
};

// X509_verify_cert of the certificate at `leaf_path` against the CA at
// `ca_path`, both read from disk as a peer would.
int VerifyFile(const std::string& ca_path, const std::string& leaf_path) {
  absl::StatusOr<certs::CertPtr> ca = certs::ParseCertPem(ReadFile(ca_path));
  absl::StatusOr<certs::CertPtr> leaf =
      certs::ParseCertPem(ReadFile(leaf_path));
  EXPECT_TRUE(ca.ok()) << ca.status();
  EXPECT_TRUE(leaf.ok()) << leaf.status();
  if (!ca.ok() || !leaf.ok()) return -1;
  X509_STORE* store = X509_STORE_new();
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_add_cert(store, ca->get());
  X509_STORE_CTX_init(ctx, store, leaf->get(), nullptr);
  X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_CLIENT);
  X509_verify_cert(ctx);
  const int error = X509_STORE_CTX_get_error(ctx);
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  return error;
}

TEST_F(CertsCommandTest, WritesEveryIdentityWithModesThatVerify) {
  ASSERT_TRUE(WriteClusterCerts(options_).ok());
  EXPECT_EQ(ModeOf(options_.out_dir), 0700u);
  EXPECT_EQ(ModeOf(Path("ca.key")), 0600u);
  EXPECT_EQ(ModeOf(Path("ca.pem")), 0644u);
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"ps-0", "tern://demo/ps/0"},
      {"ps-1", "tern://demo/ps/1"},
      {"lps-0", "tern://demo/lps/0"},
      {"worker-0", "tern://demo/worker/0"},
      {"worker-1", "tern://demo/worker/1"},
      {"worker-2", "tern://demo/worker/2"},
      {"worker-3", "tern://demo/worker/3"},
      {"global", "tern://demo/global/0"},
  };
  for (const auto& [name, uri] : expected) {
    SCOPED_TRACE(name);
    const std::string pem = Path(name + ".pem");
    const std::string key = Path(name + ".key");
    EXPECT_EQ(ModeOf(key), 0600u);
    EXPECT_EQ(ModeOf(pem), 0644u);
    EXPECT_EQ(VerifyFile(Path("ca.pem"), pem), X509_V_OK);
    absl::StatusOr<std::vector<std::string>> uris =
        certs::SanUrisFromPem(ReadFile(pem));
    ASSERT_TRUE(uris.ok()) << uris.status();
    EXPECT_THAT(*uris, ElementsAre(uri));
    absl::StatusOr<certs::CertPtr> cert = certs::ParseCertPem(ReadFile(pem));
    absl::StatusOr<certs::KeyPtr> private_key =
        certs::ParseKeyPem(ReadFile(key));
    ASSERT_TRUE(cert.ok() && private_key.ok());
    EXPECT_EQ(X509_check_private_key(cert->get(), private_key->get()), 1);
  }
  EXPECT_FALSE(Exists(Path("worker-4.pem")));
  EXPECT_FALSE(Exists(Path("ps-2.pem")));
}

TEST_F(CertsCommandTest, ModesHoldWhateverTheUmask) {
  const mode_t old_umask = ::umask(0);
  const absl::Status status = WriteClusterCerts(options_);
  ::umask(old_umask);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(ModeOf(options_.out_dir), 0700u);
  EXPECT_EQ(ModeOf(Path("ca.key")), 0600u);
  EXPECT_EQ(ModeOf(Path("worker-3.key")), 0600u);
}

TEST_F(CertsCommandTest, RefusesToOverwriteTheCaUnlessForced) {
  ASSERT_TRUE(WriteClusterCerts(options_).ok());
  const std::string ca = ReadFile(Path("ca.pem"));
  const std::string old_leaf = ReadFile(Path("ps-0.pem"));

  const absl::Status again = WriteClusterCerts(options_);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.message(), HasSubstr(Path("ca.pem")));
  EXPECT_THAT(again.message(), HasSubstr("--force"));
  EXPECT_EQ(ReadFile(Path("ca.pem")), ca);
  EXPECT_EQ(ReadFile(Path("ps-0.pem")), old_leaf);

  options_.force = true;
  ASSERT_TRUE(WriteClusterCerts(options_).ok());
  EXPECT_NE(ReadFile(Path("ca.pem")), ca);
  // The new CA does not accept a certificate of the old one.
  const std::string kept = root_ + "/old-ps-0.pem";
  std::ofstream(kept) << old_leaf;
  EXPECT_EQ(VerifyFile(Path("ca.pem"), kept),
            X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
  EXPECT_EQ(VerifyFile(Path("ca.pem"), Path("ps-0.pem")), X509_V_OK);
}

TEST_F(CertsCommandTest, RefusesAnExistingLeafAndWritesNothing) {
  ASSERT_EQ(::mkdir(options_.out_dir.c_str(), 0755), 0);
  std::ofstream(Path("worker-2.key")) << "mine";
  const absl::Status status = WriteClusterCerts(options_);
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(status.message(), HasSubstr(Path("worker-2.key")));
  EXPECT_FALSE(Exists(Path("ca.pem")));
  EXPECT_FALSE(Exists(Path("ps-0.key")));
  EXPECT_EQ(ReadFile(Path("worker-2.key")), "mine");
  // A folder that was there keeps its mode.
  EXPECT_EQ(ModeOf(options_.out_dir), 0755u);
}

TEST_F(CertsCommandTest, ForceTightensAKeyLeftReadable) {
  ASSERT_EQ(::mkdir(options_.out_dir.c_str(), 0700), 0);
  std::ofstream(Path("ca.key")) << "old";
  ASSERT_EQ(::chmod(Path("ca.key").c_str(), 0644), 0);
  options_.force = true;
  ASSERT_TRUE(WriteClusterCerts(options_).ok());
  EXPECT_EQ(ModeOf(Path("ca.key")), 0600u);
  EXPECT_TRUE(certs::ParseKeyPem(ReadFile(Path("ca.key"))).ok());
}

TEST_F(CertsCommandTest, ForceDoesNotFollowALinkAtAKeyPath) {
  ASSERT_EQ(::mkdir(options_.out_dir.c_str(), 0700), 0);
  const std::string target = root_ + "/elsewhere";
  std::ofstream(target) << "untouched";
  ASSERT_EQ(::symlink(target.c_str(), Path("ps-0.key").c_str()), 0);
  options_.force = true;
  const absl::Status status = WriteClusterCerts(options_);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr(Path("ps-0.key")));
  EXPECT_EQ(ReadFile(target), "untouched");
}

TEST_F(CertsCommandTest, OutMustBeAFolderWithAParent) {
  std::ofstream(options_.out_dir) << "a file";
  absl::Status status = WriteClusterCerts(options_);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("not a folder"));

  options_.out_dir = root_ + "/missing/certs";
  status = WriteClusterCerts(options_);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr(options_.out_dir));
}

TEST(ValidateCertsOptionsTest, NamesTheBadFlag) {
  CertsOptions options;
  options.out_dir = "/tmp/x";
  options.run_id = "demo";
  options.workers = 1;
  EXPECT_TRUE(ValidateCertsOptions(options).ok());

  CertsOptions nothing = options;
  nothing.workers = 0;
  EXPECT_THAT(ValidateCertsOptions(nothing).message(),
              HasSubstr("nothing to issue"));
  CertsOptions run = options;
  run.run_id = "a/b";
  EXPECT_THAT(ValidateCertsOptions(run).message(), HasSubstr("--run_id"));
  CertsOptions hosts = options;
  hosts.hosts = {"ok.example", "not ok"};
  EXPECT_THAT(ValidateCertsOptions(hosts).message(), HasSubstr("--hosts"));
  CertsOptions days = options;
  days.days = 0;
  EXPECT_THAT(ValidateCertsOptions(days).message(), HasSubstr("--days"));
  CertsOptions out = options;
  out.out_dir.clear();
  EXPECT_THAT(ValidateCertsOptions(out).message(), HasSubstr("--out"));
}

TEST(PlanLeavesTest, OrderAndHosts) {
  CertsOptions options;
  options.run_id = "r";
  options.shards = 2;
  options.workers = 1;
  options.datacenters = 1;
  options.global = true;
  options.days = 10;
  options.hosts = {"ps.example.com", "10.0.0.9"};
  options.shard_hosts = {"ps-0.tern"};
  const std::vector<certs::LeafSpec> leaves = PlanLeaves(options);
  ASSERT_EQ(leaves.size(), 5u);
  std::vector<std::string> uris;
  for (const certs::LeafSpec& leaf : leaves) {
    uris.push_back(net::PeerUri(leaf.identity));
    EXPECT_EQ(leaf.days, 10);
    EXPECT_THAT(leaf.hosts, Contains("localhost"));
    EXPECT_THAT(leaf.hosts, Contains("127.0.0.1"));
    EXPECT_THAT(leaf.hosts, Contains("ps.example.com"));
    EXPECT_THAT(leaf.hosts, Contains("10.0.0.9"));
  }
  EXPECT_THAT(uris,
              ElementsAre("tern://r/ps/0", "tern://r/ps/1", "tern://r/lps/0",
                          "tern://r/worker/0", "tern://r/global/0"));
  EXPECT_THAT(leaves[0].hosts, Contains("ps-0.tern"));  // from the spec
  EXPECT_THAT(leaves[1].hosts, Contains("tern-ps-1.tern-ps"));
  EXPECT_THAT(leaves[1].hosts, Contains("ps-1"));
  EXPECT_THAT(leaves[1].hosts, ::testing::Not(Contains("ps-0.tern")));
  EXPECT_THAT(leaves[4].hosts, Contains("tern-global"));
}

TEST(ApplyCertsClusterSpecTest, FillsWhatTheFlagsDidNotGive) {
  v1::ClusterSpec spec;
  spec.add_shards("ps-0.tern:50051");
  spec.add_shards("[::1]:50052");
  spec.set_num_workers(3);

  CertsOptions options;
  ApplyCertsClusterSpec(spec, &options);
  EXPECT_EQ(options.shards, 2u);
  EXPECT_EQ(options.workers, 3u);
  EXPECT_THAT(options.shard_hosts, ElementsAre("ps-0.tern", "::1"));

  CertsOptions given;
  given.shards = 1;
  given.shards_given = true;
  given.workers = 0;
  given.workers_given = true;
  ApplyCertsClusterSpec(spec, &given);
  EXPECT_EQ(given.shards, 1u);
  EXPECT_EQ(given.workers, 0u);
}

// Parses `args` (after the program name) with the certs flags.
CertsOptions Parse(std::vector<std::string> args) {
  CertsOptions options;
  CLI::App app("test", "tern");
  CLI::App* certs = app.add_subcommand("certs", "");
  AddCertsFlags(certs, &options);
  args.insert(args.begin(), "certs");
  std::reverse(args.begin(), args.end());
  app.parse(args);  // CLI11 takes them in reverse
  return options;
}

TEST(AddCertsFlagsTest, ParsesAndRecordsWhatWasGiven) {
  const CertsOptions options =
      Parse({"--out", "d", "--run_id", "r", "--shards", "2", "--hosts",
             "a.example,10.0.0.1", "--global", "--days", "30"});
  EXPECT_EQ(options.out_dir, "d");
  EXPECT_EQ(options.run_id, "r");
  EXPECT_EQ(options.shards, 2u);
  EXPECT_TRUE(options.shards_given);
  EXPECT_FALSE(options.workers_given);
  EXPECT_TRUE(options.global);
  EXPECT_EQ(options.days, 30);
  EXPECT_FALSE(options.force);
  EXPECT_THAT(options.hosts, ElementsAre("a.example", "10.0.0.1"));
}

TEST(AddCertsFlagsTest, RequiresOutAndRunIdAndChecksDays) {
  EXPECT_THROW(Parse({"--run_id", "r"}), CLI::RequiredError);
  EXPECT_THROW(Parse({"--out", "d"}), CLI::RequiredError);
  EXPECT_THROW(Parse({"--out", "d", "--run_id", "r", "--days", "0"}),
               CLI::ValidationError);
}

// TERN_FORCE must not replace a CA by accident, and TERN_GLOBAL is the
// global server's address in an LPS container.
TEST(AddCertsFlagsTest, ForceAndGlobalAreNotReadFromTheEnvironment) {
  const flags::ScopedEnv force("TERN_FORCE", "1");
  const flags::ScopedEnv global("TERN_GLOBAL", "tern-global:50060");
  const flags::ScopedEnv workers("TERN_WORKERS", "5");
  const CertsOptions options = Parse({"--out", "d", "--run_id", "r"});
  EXPECT_FALSE(options.force);
  EXPECT_FALSE(options.global);
  EXPECT_EQ(options.workers, 5u);  // the other flags are
  EXPECT_TRUE(options.workers_given);
}

}  // namespace
}  // namespace tern
