#include "tern/launch_tls.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tern/geo_plan.h"

namespace tern {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

LaunchOptions Plain(uint32_t shards, uint32_t workers) {
  LaunchOptions options;
  options.tls = true;
  options.shards = shards;
  options.workers = workers;
  options.job.run_id = "run-7";
  return options;
}

LaunchOptions GeoRun(GeoMode mode, uint32_t k, uint32_t w, bool wan) {
  LaunchOptions options = Plain(1, 2);
  options.geo.mode = mode;
  options.geo.datacenters = k;
  options.geo.workers_per_dc = w;
  options.geo.emulate_wan = wan;
  return ResolveLaunchOptions(options);
}

TEST(TlsArgsTest, NoneWithoutTlsEachIdentitysFilesWithIt) {
  EXPECT_THAT(TlsArgs("", certs::Role::kPs, 0), IsEmpty());
  EXPECT_THAT(TlsArgs("out/tls", certs::Role::kWorker, 3),
              ElementsAre("--tls_cert=out/tls/worker-3.pem",
                          "--tls_key=out/tls/worker-3.key",
                          "--tls_ca=out/tls/ca.pem"));
  EXPECT_THAT(TlsArgs("o/tls", certs::Role::kGlobal, 0),
              ElementsAre("--tls_cert=o/tls/global.pem",
                          "--tls_key=o/tls/global.key",
                          "--tls_ca=o/tls/ca.pem"));
  EXPECT_THAT(TlsArgs("o/tls", certs::Role::kLps, 1),
              Contains("--tls_cert=o/tls/lps-1.pem"));
  EXPECT_EQ(TlsDirOf("runs/x"), "runs/x/tls");
}

// Exactly the identities the launch starts, for 0, 1 and several of each.
TEST(LaunchCertsOptionsTest, ShardsAndWorkersOfAPlainRun) {
  for (uint32_t shards : {1u, 3u}) {
    for (uint32_t workers : {1u, 2u, 5u}) {
      const CertsOptions request =
          LaunchCertsOptions(Plain(shards, workers), "d");
      EXPECT_EQ(request.out_dir, "d");
      EXPECT_EQ(request.run_id, "run-7");
      EXPECT_EQ(request.shards, shards);
      EXPECT_EQ(request.workers, workers);
      EXPECT_EQ(request.datacenters, 0u);
      EXPECT_FALSE(request.global);
      EXPECT_THAT(request.hosts, IsEmpty());
      EXPECT_TRUE(request.force);
    }
  }
}

TEST(LaunchCertsOptionsTest, GlobalLpssAndEveryWorkerOfAnLpsRun) {
  const CertsOptions request =
      LaunchCertsOptions(GeoRun(GeoMode::kGaia, 3, 2, false), "d");
  EXPECT_EQ(request.shards, 0u);
  EXPECT_EQ(request.datacenters, 3u);
  EXPECT_TRUE(request.global);
  EXPECT_EQ(request.workers, 6u);
  EXPECT_THAT(request.hosts, IsEmpty());
}

// Under an emulated WAN the DCs dial the GS's region at 10.77.<d>.1.
TEST(LaunchCertsOptionsTest, WanAddressesOfTheGsRegion) {
  const CertsOptions lps_run =
      LaunchCertsOptions(GeoRun(GeoMode::kWeightgrad, 2, 1, true), "d");
  EXPECT_THAT(lps_run.hosts, ElementsAre("10.77.0.1", "10.77.1.1"));
  const CertsOptions shard_run =
      LaunchCertsOptions(GeoRun(GeoMode::kBaseline, 2, 2, true), "d");
  EXPECT_EQ(shard_run.shards, 1u);
  EXPECT_EQ(shard_run.datacenters, 0u);
  EXPECT_FALSE(shard_run.global);
  EXPECT_THAT(shard_run.hosts, ElementsAre("10.77.0.1", "10.77.1.1"));
}

TEST(ValidateLaunchTlsTest, RunIdMustFitACertificate) {
  LaunchOptions options = Plain(1, 1);
  EXPECT_TRUE(ValidateLaunchTls(options).ok());
  options.job.run_id = "has space";
  const absl::Status status = ValidateLaunchTls(options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("--run_id"));
  options.tls = false;
  EXPECT_TRUE(ValidateLaunchTls(options).ok());
}

TEST(ValidateLaunchTlsTest, EmulatedWanNeedsTlsOrInsecureAndNotBoth) {
  LaunchOptions options = Plain(1, 1);
  options.tls = false;
  options.geo.emulate_wan = true;
  EXPECT_THAT(ValidateLaunchTls(options).message(),
              HasSubstr("give --tls (mutual TLS on every link) or --insecure"));
  options.insecure = true;
  EXPECT_TRUE(ValidateLaunchTls(options).ok());
  options.tls = true;
  EXPECT_THAT(ValidateLaunchTls(options).message(),
              HasSubstr("--tls and --insecure"));
  options.insecure = false;
  EXPECT_TRUE(ValidateLaunchTls(options).ok());
}

// The files are there, name the identity and its hosts, and a rerun into
// the same folder replaces them.
TEST(WriteLaunchCertsTest, WritesEveryIdentityAndReplacesAnEarlierRuns) {
  const std::string dir =
      absl::StrCat(::testing::TempDir(), "/launch_tls_", ::getpid(), "/tls");
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
  std::filesystem::create_directories(std::filesystem::path(dir).parent_path());
  const LaunchOptions options = GeoRun(GeoMode::kGaia, 2, 1, true);
  ASSERT_TRUE(WriteLaunchCerts(options, dir).ok());
  for (const char* stem : {"ca", "global", "lps-0", "lps-1", "worker-0",
                           "worker-1"}) {
    EXPECT_TRUE(std::filesystem::exists(absl::StrCat(dir, "/", stem, ".pem")))
        << stem;
    EXPECT_TRUE(std::filesystem::exists(absl::StrCat(dir, "/", stem, ".key")))
        << stem;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/ps-0.pem"));
  const std::string first = ReadFile(dir + "/global.pem");
  absl::StatusOr<certs::CertPtr> cert = certs::ParseCertPem(first);
  ASSERT_TRUE(cert.ok());
  absl::StatusOr<certs::SubjectAltNames> names =
      certs::ReadSubjectAltNames(**cert);
  ASSERT_TRUE(names.ok());
  EXPECT_THAT(names->uris, ElementsAre("tern://run-7/global/0"));
  EXPECT_THAT(names->ips, Contains("127.0.0.1"));
  EXPECT_THAT(names->ips, Contains("10.77.1.1"));
  ASSERT_TRUE(WriteLaunchCerts(options, dir).ok());
  EXPECT_NE(ReadFile(dir + "/global.pem"), first);
}

}  // namespace
}  // namespace tern
