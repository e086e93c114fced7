#include "tern/cluster_spec.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseClusterSpecTest, ReadsShardsAndWorkers) {
  auto spec = ParseClusterSpec(
      R"({"shards": ["ps-0:50051", "[::1]:7000"], "num_workers": 4})", "s.json");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->shards(), ElementsAre("ps-0:50051", "[::1]:7000"));
  EXPECT_EQ(spec->num_workers(), 4u);
}

TEST(ParseClusterSpecTest, ReadsTlsDirAndInsecure) {
  auto tls = ParseClusterSpec(
      R"({"shards": ["a:1"], "num_workers": 1, "tls_dir": "/etc/tls"})",
      "s.json");
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_EQ(tls->tls_dir(), "/etc/tls");
  EXPECT_FALSE(tls->insecure());
  auto plaintext = ParseClusterSpec(
      R"({"shards": ["a:1"], "num_workers": 1, "insecure": true})", "s.json");
  ASSERT_TRUE(plaintext.ok()) << plaintext.status();
  EXPECT_TRUE(plaintext->insecure());
  EXPECT_EQ(plaintext->tls_dir(), "");
}

TEST(ParseClusterSpecTest, RefusesInsecureWithTlsDir) {
  auto spec = ParseClusterSpec(
      R"({"shards": ["a:1"], "num_workers": 1, "tls_dir": "/etc/tls",
          "insecure": true})",
      "s.json");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(spec.status().message(), HasSubstr("\"insecure\""));
  EXPECT_THAT(spec.status().message(), HasSubstr("\"tls_dir\""));
  EXPECT_THAT(spec.status().message(), HasSubstr("s.json"));
}

TEST(ParseClusterSpecTest, RejectsBadJsonNamingTheSource) {
  auto spec = ParseClusterSpec(R"({"shards": ["a:1"], )", "bad.json");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(spec.status().message(), HasSubstr("bad.json"));
}

TEST(ParseClusterSpecTest, RejectsUnknownFields) {
  auto spec =
      ParseClusterSpec(R"({"shards": ["a:1"], "num_worker": 2})", "s.json");
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(), HasSubstr("num_worker"));
}

TEST(ParseClusterSpecTest, RejectsMissingOrBadValues) {
  struct Case {
    const char* json;
    const char* expected;
  };
  for (const Case& c : {
           Case{R"({"num_workers": 2})", "\"shards\""},
           Case{R"({"shards": [], "num_workers": 2})", "\"shards\""},
           Case{R"({"shards": ["a:1"]})", "\"num_workers\""},
           Case{R"({"shards": ["a:1"], "num_workers": 0})", "\"num_workers\""},
           Case{R"({"shards": ["nohost"], "num_workers": 1})", "shards[0]"},
           Case{R"({"shards": ["a:1", ":5"], "num_workers": 1})", "shards[1]"},
           Case{R"({"shards": ["a:0"], "num_workers": 1})", "shards[0]"},
           Case{R"({"shards": ["a:65536"], "num_workers": 1})", "shards[0]"},
           Case{R"({"shards": ["a:x"], "num_workers": 1})", "shards[0]"},
           Case{R"({"shards": ["a:1"], "num_workers": -1})", "s.json"},
           Case{R"({"shards": ["a:1"], "num_workers": 1, "tls_dir": 5})",
                "s.json"},
           Case{R"({"shards": ["a:1"], "num_workers": 1, "insecure": "maybe"})",
                "s.json"},
       }) {
    auto spec = ParseClusterSpec(c.json, "s.json");
    ASSERT_FALSE(spec.ok()) << c.json;
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(spec.status().message(), HasSubstr(c.expected)) << c.json;
    EXPECT_THAT(spec.status().message(), HasSubstr("s.json")) << c.json;
  }
}

// Writes `text` to `name` under the test's temporary folder; its path.
std::string WriteTempFile(const std::string& name, const std::string& text) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::ofstream out(path);
  out << text;
  return path;
}

// Makes the folder `name` under the test's temporary folder; its path.
std::string MakeTempDir(const std::string& name) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  mkdir(path.c_str(), 0755);
  return path;
}

std::string SpecWithTlsDir(const std::string& tls_dir) {
  return R"({"shards": ["h:1"], "num_workers": 1, "tls_dir": ")" + tls_dir +
         R"("})";
}

TEST(LoadClusterSpecTest, ReadsAFile) {
  const std::string path = WriteTempFile(
      "cluster.json", R"({"shards": ["h:1", "h:2", "h:3"], "num_workers": 5})");
  auto spec = LoadClusterSpec(path);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->shards_size(), 3);
  EXPECT_EQ(spec->num_workers(), 5u);
}

TEST(LoadClusterSpecTest, MissingFileIsNotFoundNamingThePath) {
  auto spec = LoadClusterSpec("/nonexistent/tern/cluster.json");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(spec.status().message(),
              HasSubstr("/nonexistent/tern/cluster.json"));
}

// Only the path is resolved: `tern certs` loads a spec to make the folder.
TEST(LoadClusterSpecTest, RelativeTlsDirIsBesideTheSpecFile) {
  const std::string folder = MakeTempDir("deploy");
  const std::string path =
      WriteTempFile("deploy/cluster.json", SpecWithTlsDir("tls"));
  auto spec = LoadClusterSpec(path);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->tls_dir(), folder + "/tls");
}

TEST(LoadClusterSpecTest, AbsoluteTlsDirIsKept) {
  auto spec =
      LoadClusterSpec(WriteTempFile("abs.json", SpecWithTlsDir("/etc/tls")));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->tls_dir(), "/etc/tls");
}

TEST(LoadClusterSpecTest, EmptyTlsDirIsNone) {
  auto spec = LoadClusterSpec(WriteTempFile("empty.json", SpecWithTlsDir("")));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->tls_dir(), "");
}

v1::ClusterSpec ThreeShardsFourWorkers() {
  v1::ClusterSpec spec;
  spec.add_shards("ps-0.tern:50051");
  spec.add_shards("ps-1.tern:50052");
  spec.add_shards("ps-2.tern:50053");
  spec.set_num_workers(4);
  return spec;
}

TEST(ApplyClusterSpecTest, ShardTakesCountsAndItsPort) {
  server::PsOptions options;
  options.shard_index = 1;
  ASSERT_TRUE(
      ApplyClusterSpec(ThreeShardsFourWorkers(), "s.json", {}, &options).ok());
  EXPECT_EQ(options.num_shards, 3u);
  EXPECT_EQ(options.num_workers, 4u);
  EXPECT_EQ(options.listen, "0.0.0.0:50052");
}

TEST(ApplyClusterSpecTest, ExplicitShardFlagsWin) {
  server::PsOptions options;
  options.shard_index = 7;  // would be out of range, but --listen is given
  options.listen = "127.0.0.1:0";
  options.num_workers = 9;
  ASSERT_TRUE(ApplyClusterSpec(ThreeShardsFourWorkers(), "s.json",
                               {"listen", "num_workers"}, &options)
                  .ok());
  EXPECT_EQ(options.listen, "127.0.0.1:0");
  EXPECT_EQ(options.num_workers, 9u);
  EXPECT_EQ(options.num_shards, 3u);
}

TEST(ApplyClusterSpecTest, ShardIndexOutsideTheSpecIsAnError) {
  server::PsOptions options;
  options.shard_index = 3;
  absl::Status status =
      ApplyClusterSpec(ThreeShardsFourWorkers(), "s.json", {}, &options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("--shard_index=3"));
  EXPECT_THAT(status.message(), HasSubstr("s.json"));
}

TEST(ApplyClusterSpecTest, WorkerTakesShardListAndCount) {
  worker::WorkerOptions options;
  ASSERT_TRUE(
      ApplyClusterSpec(ThreeShardsFourWorkers(), "s.json", {}, &options).ok());
  EXPECT_THAT(options.ps, ElementsAre("ps-0.tern:50051", "ps-1.tern:50052",
                                      "ps-2.tern:50053"));
  EXPECT_EQ(options.num_workers, 4u);
}

TEST(ApplyClusterSpecTest, ExplicitWorkerFlagsWin) {
  worker::WorkerOptions options;
  options.ps = {"localhost:1"};
  options.num_workers = 2;
  ASSERT_TRUE(ApplyClusterSpec(ThreeShardsFourWorkers(), "s.json",
                               {"ps", "num_workers"}, &options)
                  .ok());
  EXPECT_THAT(options.ps, ElementsAre("localhost:1"));
  EXPECT_EQ(options.num_workers, 2u);
}

v1::ClusterSpec WithTlsDir(const std::string& tls_dir) {
  v1::ClusterSpec spec = ThreeShardsFourWorkers();
  spec.set_tls_dir(tls_dir);
  return spec;
}

// A folder that exists, as ApplyClusterSpec checks.
std::string TlsFolder() { return MakeTempDir("tls"); }

TEST(ApplyClusterSpecTest, ShardTakesItsOwnFilesFromTlsDir) {
  const std::string tls = TlsFolder();
  server::PsOptions options;
  options.shard_index = 2;
  ASSERT_TRUE(ApplyClusterSpec(WithTlsDir(tls), "s.json", {}, &options).ok());
  EXPECT_EQ(options.tls.cert, tls + "/ps-2.pem");
  EXPECT_EQ(options.tls.key, tls + "/ps-2.key");
  EXPECT_EQ(options.tls.ca, tls + "/ca.pem");
  EXPECT_FALSE(options.insecure);
}

TEST(ApplyClusterSpecTest, LocalPsTakesItsDataCentersFiles) {
  const std::string tls = TlsFolder();
  for (server::RunMode mode :
       {server::RunMode::kWeightGrad, server::RunMode::kGaia}) {
    server::PsOptions options;
    options.mode = mode;
    options.datacenter = 1;
    // A trailing slash is not doubled.
    ASSERT_TRUE(
        ApplyClusterSpec(WithTlsDir(tls + "/"), "s.json", {}, &options).ok());
    EXPECT_EQ(options.tls.cert, tls + "/lps-1.pem") << RunModeName(mode);
    EXPECT_EQ(options.tls.key, tls + "/lps-1.key") << RunModeName(mode);
    EXPECT_EQ(options.tls.ca, tls + "/ca.pem") << RunModeName(mode);
  }
}

TEST(ApplyClusterSpecTest, WorkerTakesItsOwnFilesFromTlsDir) {
  const std::string tls = TlsFolder();
  worker::WorkerOptions options;
  options.worker_id = 3;
  ASSERT_TRUE(ApplyClusterSpec(WithTlsDir(tls), "s.json", {}, &options).ok());
  EXPECT_EQ(options.tls.cert, tls + "/worker-3.pem");
  EXPECT_EQ(options.tls.key, tls + "/worker-3.key");
  EXPECT_EQ(options.tls.ca, tls + "/ca.pem");
}

TEST(ApplyClusterSpecTest, NoTlsDirLeavesTlsOff) {
  server::PsOptions shard;
  ASSERT_TRUE(
      ApplyClusterSpec(ThreeShardsFourWorkers(), "s.json", {}, &shard).ok());
  EXPECT_FALSE(shard.tls.any());
  EXPECT_FALSE(shard.insecure);
  worker::WorkerOptions worker;
  ASSERT_TRUE(
      ApplyClusterSpec(ThreeShardsFourWorkers(), "s.json", {}, &worker).ok());
  EXPECT_FALSE(worker.tls.any());
}

TEST(ApplyClusterSpecTest, ExplicitTlsFlagsWin) {
  const std::string tls = TlsFolder();
  server::PsOptions options;
  options.tls.ca = "/own/ca.pem";
  ASSERT_TRUE(
      ApplyClusterSpec(WithTlsDir(tls), "s.json", {"tls_ca"}, &options).ok());
  EXPECT_EQ(options.tls.ca, "/own/ca.pem");
  EXPECT_EQ(options.tls.cert, tls + "/ps-0.pem");
  EXPECT_EQ(options.tls.key, tls + "/ps-0.key");

  // All three given: the folder is not even looked at.
  worker::WorkerOptions worker;
  worker.tls = {"/own/w.pem", "/own/w.key", "/own/ca.pem"};
  ASSERT_TRUE(ApplyClusterSpec(WithTlsDir("/no/such/tls"), "s.json",
                               {"tls_cert", "tls_key", "tls_ca"}, &worker)
                  .ok());
  EXPECT_EQ(worker.tls.cert, "/own/w.pem");
  EXPECT_EQ(worker.tls.key, "/own/w.key");
  EXPECT_EQ(worker.tls.ca, "/own/ca.pem");
}

// Only one of the pair given: the folder's pair stays out, so that the
// flags' own check reports the missing half instead of a mismatched key.
TEST(ApplyClusterSpecTest, CertificateAndKeyComeFromOnePlace) {
  const std::string tls = TlsFolder();
  for (const char* given : {"tls_cert", "tls_key"}) {
    worker::WorkerOptions options;
    ASSERT_TRUE(
        ApplyClusterSpec(WithTlsDir(tls), "s.json", {given}, &options).ok());
    EXPECT_EQ(options.tls.cert, "") << given;
    EXPECT_EQ(options.tls.key, "") << given;
    EXPECT_EQ(options.tls.ca, tls + "/ca.pem") << given;
  }
}

TEST(ApplyClusterSpecTest, InsecureGoesToTheShard) {
  v1::ClusterSpec spec = ThreeShardsFourWorkers();
  spec.set_insecure(true);
  server::PsOptions options;
  ASSERT_TRUE(ApplyClusterSpec(spec, "s.json", {}, &options).ok());
  EXPECT_TRUE(options.insecure);
  EXPECT_FALSE(options.tls.any());
}

TEST(ApplyClusterSpecTest, ExplicitInsecureFalseWins) {
  v1::ClusterSpec spec = ThreeShardsFourWorkers();
  spec.set_insecure(true);
  server::PsOptions options;
  ASSERT_TRUE(ApplyClusterSpec(spec, "s.json", {"insecure"}, &options).ok());
  EXPECT_FALSE(options.insecure);
}

TEST(ApplyClusterSpecTest, ExplicitTlsFilesOverrideTheSpecsInsecure) {
  v1::ClusterSpec spec = ThreeShardsFourWorkers();
  spec.set_insecure(true);
  server::PsOptions options;
  options.tls = {"/own/ps.pem", "/own/ps.key", "/own/ca.pem"};
  ASSERT_TRUE(ApplyClusterSpec(spec, "s.json",
                               {"tls_cert", "tls_key", "tls_ca"}, &options)
                  .ok());
  EXPECT_FALSE(options.insecure);
  EXPECT_EQ(options.tls.cert, "/own/ps.pem");
}

TEST(ApplyClusterSpecTest, ExplicitInsecureWithTlsDirIsRefused) {
  server::PsOptions options;
  options.insecure = true;
  absl::Status status = ApplyClusterSpec(WithTlsDir(TlsFolder()), "s.json",
                                         {"insecure"}, &options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("--insecure"));
  EXPECT_THAT(status.message(), HasSubstr("tls_dir"));
  EXPECT_THAT(status.message(), HasSubstr("s.json"));
}

TEST(ApplyClusterSpecTest, MissingTlsDirIsNotFoundNamingTheField) {
  server::PsOptions shard;
  absl::Status status =
      ApplyClusterSpec(WithTlsDir("/no/such/tls"), "s.json", {}, &shard);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("tls_dir /no/such/tls"));
  EXPECT_THAT(status.message(), HasSubstr("s.json"));
  EXPECT_FALSE(shard.tls.any());

  worker::WorkerOptions worker;
  status = ApplyClusterSpec(WithTlsDir("/no/such/tls"), "s.json", {}, &worker);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("tls_dir /no/such/tls"));
}

TEST(ApplyClusterSpecTest, TlsDirThatIsAFileIsRefused) {
  const std::string file = WriteTempFile("a_file", "not a folder");
  worker::WorkerOptions options;
  absl::Status status =
      ApplyClusterSpec(WithTlsDir(file), "s.json", {}, &options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("tls_dir " + file));
  EXPECT_THAT(status.message(), HasSubstr("not a folder"));
}

}  // namespace
}  // namespace tern
