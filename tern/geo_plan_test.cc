#include "tern/geo_plan.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// A geo run's options as the flags would leave them.
LaunchOptions Geo(GeoMode mode, uint32_t k, uint32_t w,
                  std::vector<std::string> given = {}) {
  LaunchOptions options;
  options.geo.mode = mode;
  options.geo.datacenters = k;
  options.geo.workers_per_dc = w;
  options.job.seed = 7;
  options.job.log_level = "warn";
  options.worker_args = {"--model=lenet", "--steps=20"};
  options.given_flags = {"geo", "datacenters", "workers_per_dc"};
  options.given_flags.insert(options.given_flags.end(), given.begin(),
                             given.end());
  return options;
}

void ExpectInvalid(const LaunchOptions& options, const std::string& flag,
                   bool is_root = true) {
  const absl::Status status = ValidateGeoOptions(options, is_root);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << flag;
  EXPECT_THAT(status.message(), HasSubstr(flag));
}

TEST(ValidateGeoOptionsTest, AcceptsEachModeAndAPlainLaunch) {
  LaunchOptions plain;
  EXPECT_TRUE(ValidateGeoOptions(plain, /*is_root=*/false).ok());
  for (const GeoMode mode : {GeoMode::kBaseline, GeoMode::kTerngrad,
                             GeoMode::kGaia, GeoMode::kWeightgrad}) {
    SCOPED_TRACE(std::string(GeoModeName(mode)));
    EXPECT_TRUE(ValidateGeoOptions(Geo(mode, 3, 2), false).ok());
    LaunchOptions wan = Geo(mode, 3, 2, {"emulate_wan", "wan_mbit"});
    wan.geo.emulate_wan = true;
    wan.geo.wan_mbit = 100;
    EXPECT_TRUE(ValidateGeoOptions(wan, /*is_root=*/true).ok());
  }
}

// Options filled by code rather than by the flags can hold any number.
TEST(ValidateGeoOptionsTest, RefusesAModeThatIsNoEnumerator) {
  ExpectInvalid(Geo(static_cast<GeoMode>(9), 2, 2),
                "--geo: 9 is not one of baseline, terngrad, gaia, weightgrad");
}

TEST(ValidateGeoOptionsTest, GeoFlagsNeedGeo) {
  for (const char* flag :
       {"datacenters", "workers_per_dc", "sync_every", "weight_codec",
        "g_thresh", "t_global_s", "max_lag", "emulate_wan"}) {
    SCOPED_TRACE(flag);
    LaunchOptions options;
    options.given_flags = {flag};
    ExpectInvalid(options, absl::StrCat("--", flag, " needs --geo"));
  }
}

TEST(ValidateGeoOptionsTest, WanFlagsNeedEmulateWan) {
  for (const char* flag : {"wan_mbit", "wan_script", "wan_prefix"}) {
    SCOPED_TRACE(flag);
    ExpectInvalid(Geo(GeoMode::kBaseline, 2, 1, {flag}),
                  absl::StrCat("--", flag, " needs --emulate_wan"));
  }
}

TEST(ValidateGeoOptionsTest, EmulateWanNeedsRoot) {
  LaunchOptions options = Geo(GeoMode::kTerngrad, 2, 1, {"emulate_wan"});
  options.geo.emulate_wan = true;
  ExpectInvalid(options, "--emulate_wan needs root", /*is_root=*/false);
  EXPECT_TRUE(ValidateGeoOptions(options, /*is_root=*/true).ok());
}

TEST(ValidateGeoOptionsTest, RefusesWhatTheModeDecides) {
  ExpectInvalid(Geo(GeoMode::kBaseline, 2, 2, {"workers"}), "--workers");
  LaunchOptions codec = Geo(GeoMode::kTerngrad, 2, 2);
  codec.worker_args.push_back("--codec=fp16");
  ExpectInvalid(codec, "--codec");
  for (const char* flag :
       {"sync_every", "weight_codec", "g_thresh", "t_global_s", "max_lag"}) {
    SCOPED_TRACE(flag);
    ExpectInvalid(Geo(GeoMode::kBaseline, 2, 2, {flag}),
                  absl::StrCat("--", flag, " does not apply"));
  }
  LaunchOptions shards = Geo(GeoMode::kWeightgrad, 2, 2, {"shards"});
  shards.shards = 2;
  ExpectInvalid(shards, "--shards=2");
  LaunchOptions gaia_weights = Geo(GeoMode::kGaia, 2, 2, {"weight_codec"});
  gaia_weights.geo.weight_codec = "ternary";
  ExpectInvalid(gaia_weights, "--weight_codec=ternary");
  LaunchOptions gaia_threshold = Geo(GeoMode::kGaia, 2, 2, {"g_thresh"});
  gaia_threshold.geo.g_thresh = 0.2;
  ExpectInvalid(gaia_threshold, "--g_thresh does not apply with --geo=gaia");
  LaunchOptions threshold = Geo(GeoMode::kWeightgrad, 2, 2, {"g_thresh"});
  threshold.geo.g_thresh = 1.5;
  ExpectInvalid(threshold, "--g_thresh=1.5 is not in [0, 1]");
  threshold.geo.g_thresh = 0.2;
  EXPECT_TRUE(ValidateGeoOptions(threshold, /*is_root=*/false).ok());
  LaunchOptions sync = Geo(GeoMode::kWeightgrad, 2, 2, {"sync_every"});
  sync.geo.sync_every = 0;
  ExpectInvalid(sync, "--sync_every");
}

TEST(ValidateGeoOptionsTest, Sizes) {
  ExpectInvalid(Geo(GeoMode::kGaia, 0, 2), "--datacenters=0");
  ExpectInvalid(Geo(GeoMode::kGaia, 257, 1), "--datacenters=257");
  ExpectInvalid(Geo(GeoMode::kGaia, 2, 0), "--workers_per_dc=0");
  ExpectInvalid(Geo(GeoMode::kGaia, 32, 33), "--workers_per_dc=33");
  EXPECT_TRUE(ValidateGeoOptions(Geo(GeoMode::kGaia, 32, 32), false).ok());
  EXPECT_TRUE(ValidateGeoOptions(Geo(GeoMode::kGaia, 1, 1), false).ok());
  EXPECT_TRUE(ValidateGeoOptions(Geo(GeoMode::kBaseline, 256, 4), false).ok());
}

TEST(ValidateGeoOptionsTest, WanPrefixAndRate) {
  LaunchOptions options = Geo(GeoMode::kGaia, 2, 1, {"emulate_wan", "wan_prefix"});
  options.geo.emulate_wan = true;
  for (const char* bad : {"", "a b", "x/y", "seventeen-chars-x"}) {
    SCOPED_TRACE(bad);
    options.geo.wan_prefix = bad;
    ExpectInvalid(options, "--wan_prefix");
  }
  options.geo.wan_prefix = "run_2-";
  EXPECT_TRUE(ValidateGeoOptions(options, true).ok());
  options.given_flags.push_back("wan_mbit");
  options.geo.wan_mbit = 0.5;
  ExpectInvalid(options, "--wan_mbit");
}

TEST(ResolveLaunchOptionsTest, BaselineAndTerngradSetTheCodecAndTheCount) {
  const LaunchOptions baseline = ResolveLaunchOptions(Geo(GeoMode::kBaseline, 3, 2));
  EXPECT_EQ(baseline.workers, 6u);
  EXPECT_THAT(baseline.worker_args,
              ElementsAre("--model=lenet", "--steps=20", "--codec=fp32"));
  const LaunchOptions terngrad = ResolveLaunchOptions(Geo(GeoMode::kTerngrad, 3, 2));
  EXPECT_THAT(terngrad.worker_args,
              ElementsAre("--model=lenet", "--steps=20", "--codec=terngrad"));
  const LaunchOptions gaia = ResolveLaunchOptions(Geo(GeoMode::kGaia, 3, 2));
  EXPECT_EQ(gaia.workers, 6u);
  EXPECT_THAT(gaia.worker_args, ElementsAre("--model=lenet", "--steps=20"));
  LaunchOptions plain;
  plain.workers = 5;
  EXPECT_EQ(ResolveLaunchOptions(plain).workers, 5u);
}

// Worker g of K x W: data center g / W in every mode; the shards number
// workers globally, an LPS locally.
TEST(PlaceWorkerTest, GlobalForShardsLocalForAnLps) {
  for (uint32_t k : {1u, 2u, 3u}) {
    for (uint32_t w : {1u, 2u, 5u}) {
      const LaunchOptions shards = ResolveLaunchOptions(Geo(GeoMode::kTerngrad, k, w));
      const LaunchOptions lps = ResolveLaunchOptions(Geo(GeoMode::kWeightgrad, k, w));
      for (uint32_t g = 0; g < k * w; ++g) {
        SCOPED_TRACE(absl::StrCat(k, "x", w, " worker ", g));
        const WorkerPlacement a = PlaceWorker(shards, g);
        EXPECT_EQ(a.datacenter, g / w);
        EXPECT_EQ(a.worker_id, g);
        EXPECT_EQ(a.num_workers, k * w);
        const WorkerPlacement b = PlaceWorker(lps, g);
        EXPECT_EQ(b.datacenter, g / w);
        EXPECT_EQ(b.worker_id, g % w);
        EXPECT_EQ(b.num_workers, w);
      }
    }
  }
  LaunchOptions plain;
  plain.workers = 4;
  EXPECT_EQ(PlaceWorker(plain, 3).worker_id, 3u);
  EXPECT_EQ(PlaceWorker(plain, 3).datacenter, 0u);
}

TEST(AddressTest, LoopbackWithoutWanLinksWithIt) {
  EXPECT_EQ(ListenAddress(false, kGsRegion), "127.0.0.1:0");
  EXPECT_EQ(ListenAddress(true, kGsRegion), "0.0.0.0:0");
  EXPECT_EQ(ListenAddress(true, "dc3"), "127.0.0.1:0");
  EXPECT_EQ(DcRegion(12), "dc12");
  EXPECT_EQ(*DialAddress(false, kGsRegion, "dc1", 5000), "127.0.0.1:5000");
  EXPECT_EQ(*DialAddress(true, kGsRegion, "dc0", 5000), "10.77.0.1:5000");
  EXPECT_EQ(*DialAddress(true, kGsRegion, "dc255", 1), "10.77.255.1:1");
  EXPECT_EQ(*DialAddress(true, "dc2", "dc2", 6000), "127.0.0.1:6000");
  EXPECT_FALSE(DialAddress(true, "dc1", "dc2", 6000).ok());
  EXPECT_FALSE(DialAddress(true, "dc1", kGsRegion, 6000).ok());
  EXPECT_FALSE(DialAddress(true, kGsRegion, "dc256", 1).ok());
  EXPECT_FALSE(DialAddress(true, kGsRegion, "dcx", 1).ok());
}

// Every address DialAddress gives a dialer of the GS's region, and only
// those: a certificate naming them passes the TLS host check.
TEST(AddressTest, DialHostsAreWhereTheRegionIsDialed) {
  EXPECT_THAT(DialHosts(false, kGsRegion, 3), ElementsAre("127.0.0.1"));
  EXPECT_THAT(DialHosts(true, kGsRegion, 3),
              ElementsAre("127.0.0.1", "10.77.0.1", "10.77.1.1", "10.77.2.1"));
  EXPECT_THAT(DialHosts(true, kGsRegion, 0), ElementsAre("127.0.0.1"));
  // An LPS is dialed from its own region only: loopback.
  EXPECT_THAT(DialHosts(true, "dc1", 3), ElementsAre("127.0.0.1"));
}

TEST(CommandLineTest, ReportFilesAreNamedAfterTheServer) {
  EXPECT_EQ(ReportFileOf("/o", "lps/2"), "/o/lps-2.report.json");
  EXPECT_EQ(ReportFileOf("runs/x", "global"), "runs/x/global.report.json");
}

TEST(CommandLineTest, GlobalServer) {
  LaunchOptions options = Geo(GeoMode::kWeightgrad, 3, 2);
  EXPECT_THAT(
      GlobalServerArgs(ResolveLaunchOptions(options), "/o/g.port", "/o/g.json"),
      ElementsAre("global", "--listen=127.0.0.1:0", "--port_file=/o/g.port",
                  "--report_file=/o/g.json",
                  "--num_datacenters=3", "--seed=7", "--log_level=warn"));
  options.geo.emulate_wan = true;
  options.geo.t_global_s = 2.5;
  options.geo.max_lag = 0;
  EXPECT_THAT(
      GlobalServerArgs(ResolveLaunchOptions(options), "/o/g.port", "/o/g.json"),
      ElementsAre("global", "--listen=0.0.0.0:0", "--port_file=/o/g.port",
                  "--report_file=/o/g.json",
                  "--num_datacenters=3", "--seed=7", "--t_global_s=2.5",
                  "--max_lag=0", "--log_level=warn"));
}

TEST(CommandLineTest, LpsOfEachMode) {
  LaunchOptions weightgrad = Geo(GeoMode::kWeightgrad, 3, 2);
  EXPECT_THAT(
      LpsArgs(ResolveLaunchOptions(weightgrad), 2, "10.77.2.1:7000", "/o/l", "/o/r"),
      ElementsAre("ps", "--mode=weightgrad", "--listen=127.0.0.1:0",
                  "--port_file=/o/l", "--report_file=/o/r", "--shard_index=0", "--num_shards=1",
                  "--num_workers=2", "--global=10.77.2.1:7000",
                  "--datacenter=2", "--num_datacenters=3", "--log_level=warn"));
  weightgrad.geo.sync_every = 5;
  weightgrad.geo.weight_codec = "int8";
  weightgrad.geo.g_thresh = 0.25;
  EXPECT_THAT(
      LpsArgs(ResolveLaunchOptions(weightgrad), 0, "127.0.0.1:7000", "/o/l", "/o/r"),
      ElementsAre("ps", "--mode=weightgrad", "--listen=127.0.0.1:0",
                  "--port_file=/o/l", "--report_file=/o/r", "--shard_index=0", "--num_shards=1",
                  "--num_workers=2", "--global=127.0.0.1:7000",
                  "--datacenter=0", "--num_datacenters=3", "--sync_every=5",
                  "--weight_codec=int8", "--g_thresh=0.25",
                  "--log_level=warn"));
  const LaunchOptions gaia = Geo(GeoMode::kGaia, 2, 4);
  EXPECT_THAT(
      LpsArgs(ResolveLaunchOptions(gaia), 1, "127.0.0.1:7000", "/o/l", "/o/r"),
      ElementsAre("ps", "--mode=gaia", "--listen=127.0.0.1:0",
                  "--port_file=/o/l", "--report_file=/o/r", "--shard_index=0", "--num_shards=1",
                  "--num_workers=4", "--global=127.0.0.1:7000",
                  "--datacenter=1", "--num_datacenters=2",
                  "--weight_codec=fp32", "--log_level=warn"));
}

TEST(CommandLineTest, LpsWorkersAreNumberedInsideTheirDataCenter) {
  const LaunchOptions options = ResolveLaunchOptions(Geo(GeoMode::kGaia, 3, 2));
  EXPECT_THAT(
      LpsWorkerArgs(options, 5, "127.0.0.1:7002", "/o/worker-5.jsonl"),
      ElementsAre("worker", "--model=lenet", "--steps=20", "--eval_every=0",
                  "--mode=gaia", "--ps=127.0.0.1:7002", "--num_workers=2",
                  "--worker_id=1",
                  // Worker 5 of 6 reads slice 5, as it does with shards.
                  "--data_slice=5", "--num_data_slices=6",
                  "--metrics_out=/o/worker-5.jsonl"));
}

TEST(CommandLineTest, TheFirstWorkerOfEachDataCenterEvaluates) {
  LaunchOptions options = Geo(GeoMode::kWeightgrad, 3, 2);
  options.worker_args = {"--eval_every=50", "--model=lenet"};
  for (const uint32_t worker : {0u, 2u, 4u}) {
    EXPECT_THAT(WorkerFlagsOf(options, worker),
                ElementsAre("--eval_every=50", "--model=lenet"))
        << worker;
  }
  for (const uint32_t worker : {1u, 3u, 5u}) {
    EXPECT_THAT(WorkerFlagsOf(options, worker),
                ElementsAre("--model=lenet", "--eval_every=0"))
        << worker;
  }
  LaunchOptions plain;
  plain.worker_args = {"--eval_every=50"};
  EXPECT_THAT(WorkerFlagsOf(plain, 0), ElementsAre("--eval_every=50"));
  EXPECT_THAT(WorkerFlagsOf(plain, 2), ElementsAre("--eval_every=0"));
}

TEST(CommandLineTest, OnlyWorkerZeroWritesTheModel) {
  LaunchOptions plain;
  plain.worker_args = {"--save_model=/o/model.pt", "--model=lenet"};
  EXPECT_THAT(WorkerFlagsOf(plain, 0),
              ElementsAre("--save_model=/o/model.pt", "--model=lenet"));
  EXPECT_THAT(WorkerFlagsOf(plain, 1),
              ElementsAre("--model=lenet", "--eval_every=0"));
  // Not the first worker of another data center either: one file.
  LaunchOptions geo = Geo(GeoMode::kWeightgrad, 3, 2);
  geo.worker_args = plain.worker_args;
  EXPECT_THAT(WorkerFlagsOf(geo, 2), ElementsAre("--model=lenet"));
}

TEST(CommandLineTest, TernWan) {
  LaunchOptions options = Geo(GeoMode::kBaseline, 3, 2);
  options.geo.wan_prefix = "t9-";
  EXPECT_THAT(WanUpArgv("/s/tern-wan", options),
              ElementsAre("/s/tern-wan", "up", "--datacenters", "3", "--prefix",
                          "t9-"));
  options.geo.wan_mbit = 12.5;
  EXPECT_THAT(WanUpArgv("/s/tern-wan", options),
              ElementsAre("/s/tern-wan", "up", "--datacenters", "3",
                          "--wan_mbit", "12.5", "--prefix", "t9-"));
  EXPECT_THAT(WanDownArgv("/s/tern-wan", options),
              ElementsAre("/s/tern-wan", "down", "--prefix", "t9-"));
  EXPECT_THAT(WanExecArgv("/s/tern-wan", options, "dc1", "/bin/tern",
                          {"worker", "--steps=3"}),
              ElementsAre("/s/tern-wan", "exec", "dc1", "--prefix", "t9-", "--",
                          "/bin/tern", "worker", "--steps=3"));
}

class FindWanScriptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::path(::testing::TempDir()) / "find_wan";
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  std::string MakeScript(const std::filesystem::path& relative,
                         bool executable = true) {
    const std::filesystem::path path = root_ / relative;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << "#!/bin/sh\n";
    ::chmod(path.c_str(), executable ? 0755 : 0644);
    return path.string();
  }
  std::filesystem::path root_;
};

TEST_F(FindWanScriptTest, FlagWinsAndMustBeExecutable) {
  const std::string script = MakeScript("mine/tern-wan");
  EXPECT_EQ(*FindWanScript(script, "/nowhere/tern", "/nowhere"), script);
  const std::string plain = MakeScript("plain/tern-wan", false);
  EXPECT_THAT(
      FindWanScript(plain, "/nowhere/tern", "/nowhere").status().message(),
      HasSubstr("--wan_script"));
  // An explicit path that is wrong does not fall back to the others.
  MakeScript("repo/deploy/wan/tern-wan");
  EXPECT_FALSE(
      FindWanScript(plain, "/nowhere/tern", (root_ / "repo").string()).ok());
}

TEST_F(FindWanScriptTest, RunfilesThenExecrootThenWorkingDirectory) {
  const std::string self =
      (root_ / "execroot/tern/bazel-out/k8-fastbuild/bin/tern/tern").string();
  const std::string cwd_script = MakeScript("cwd/deploy/wan/tern-wan");
  const std::string cwd = (root_ / "cwd").string();
  EXPECT_EQ(*FindWanScript("", self, cwd), cwd_script);
  const std::string execroot_script =
      MakeScript("execroot/tern/deploy/wan/tern-wan");
  EXPECT_EQ(*FindWanScript("", self, cwd), execroot_script);
  const std::string runfiles_script = MakeScript(
      "execroot/tern/bazel-out/k8-fastbuild/bin/tern/tern.runfiles/tern/"
      "deploy/wan/tern-wan");
  EXPECT_EQ(*FindWanScript("", self, cwd), runfiles_script);
}

TEST_F(FindWanScriptTest, NotFoundSaysWhere) {
  const absl::StatusOr<std::string> found =
      FindWanScript("", (root_ / "bin/tern").string(), root_.string());
  EXPECT_EQ(found.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(found.status().message(), HasSubstr("--wan_script"));
  EXPECT_THAT(found.status().message(), HasSubstr("tern.runfiles"));
}

}  // namespace
}  // namespace tern
