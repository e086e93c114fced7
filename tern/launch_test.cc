#include "tern/launch.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/civil_time.h"
#include "common/flags/flags_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Parses `args` (after the program name) with the launch flags.
class LaunchFlagsTest : public ::testing::Test {
 protected:
  void Parse(std::vector<std::string> args) {
    options_ = LaunchOptions();
    app_ = std::make_unique<CLI::App>("test", "tern-launch");
    AddLaunchFlags(app_.get(), &options_);
    args.insert(args.begin(), "tern-launch");
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    app_->parse(static_cast<int>(argv.size()), argv.data());
  }

  std::unique_ptr<CLI::App> app_;
  LaunchOptions options_;
};

TEST_F(LaunchFlagsTest, DefaultsPassNoWorkerFlags) {
  Parse({});
  EXPECT_EQ(options_.shards, 1u);
  EXPECT_EQ(options_.workers, 2u);
  EXPECT_THAT(options_.worker_args, IsEmpty());
}

TEST_F(LaunchFlagsTest, WorkerFlagsGoToEveryWorker) {
  Parse({"--shards", "2", "--workers=3", "--steps=40", "--model", "lenet",
         "--dataset=synthetic", "--fp32_tensors=fc2.weight,fc2.bias",
         "--out_dir=/tmp/x", "--lr=0.05"});
  EXPECT_EQ(options_.shards, 2u);
  EXPECT_EQ(options_.workers, 3u);
  EXPECT_EQ(options_.out_dir, "/tmp/x");
  EXPECT_EQ(options_.job.steps, 40u);
  // In definition order (worker/worker_flags.cc), launch's flags excluded.
  EXPECT_THAT(options_.worker_args,
              ElementsAre("--model=lenet", "--dataset=synthetic",
                          "--steps=40", "--lr=0.05",
                          "--fp32_tensors=fc2.weight",
                          "--fp32_tensors=fc2.bias"));

  const std::vector<std::string> worker = WorkerArgs(
      options_, 2, {"127.0.0.1:5000", "127.0.0.1:5001"}, "/tmp/x/w2.jsonl");
  EXPECT_THAT(worker,
              ElementsAre("worker", "--model=lenet", "--dataset=synthetic",
                          "--steps=40", "--lr=0.05",
                          "--fp32_tensors=fc2.weight",
                          "--fp32_tensors=fc2.bias",
                          // Only worker 0 evaluates before the end.
                          "--eval_every=0",
                          "--ps=127.0.0.1:5000,127.0.0.1:5001",
                          "--num_workers=3", "--worker_id=2",
                          "--metrics_out=/tmp/x/w2.jsonl"));
}

TEST_F(LaunchFlagsTest, WorkerFlagsFromTheEnvironmentArePassedToo) {
  {
    const flags::ScopedEnv batch_size("TERN_BATCH_SIZE", "16");
    const flags::ScopedEnv workers("TERN_WORKERS", "4");
    Parse({"--steps=5"});
  }
  EXPECT_EQ(options_.workers, 4u);
  EXPECT_THAT(options_.worker_args,
              ElementsAre("--batch_size=16", "--steps=5"));
}

// The worker's enum flags are numbers inside CLI11 once parsed; the
// workers must get the names that were typed.
TEST_F(LaunchFlagsTest, EnumWorkerFlagsPassByName) {
  Parse({"--codec=onebit", "--steps=5"});
  EXPECT_THAT(options_.worker_args,
              ElementsAre("--steps=5", "--codec=onebit"));
  {
    const flags::ScopedEnv codec("TERN_CODEC", "qsgd");
    Parse({});
  }
  EXPECT_THAT(options_.worker_args, ElementsAre("--codec=qsgd"));
}

TEST_F(LaunchFlagsTest, ShardArgs) {
  Parse({"--shards=3", "--workers=5", "--log_level=debug"});
  EXPECT_THAT(ShardArgs(options_, 1, "/o/ps-1.port"),
              ElementsAre("ps", "--listen=127.0.0.1:0",
                          "--port_file=/o/ps-1.port", "--shard_index=1",
                          "--num_shards=3", "--num_workers=5",
                          "--log_level=debug"));
}

TEST_F(LaunchFlagsTest, FlagsLaunchSetsItselfAreRejected) {
  for (const char* flag : kLaunchOwnedWorkerFlags) {
    SCOPED_TRACE(flag);
    LaunchOptions options;
    CLI::App app("test", "tern-launch");
    AddLaunchFlags(&app, &options);
    EXPECT_EQ(app.get_option_no_throw(std::string("--") + flag), nullptr);
    std::string arg = std::string("--") + flag + "=1";
    std::vector<char*> argv = {const_cast<char*>("tern-launch"), arg.data()};
    EXPECT_THROW(app.parse(2, argv.data()), CLI::ExtrasError);
  }
}

// --tls_* would reach the workers and not their shards: --tls gives every
// child its own certificate instead.
TEST_F(LaunchFlagsTest, TlsFilesAreNotLaunchFlags) {
  for (const char* flag : {"--tls_cert=/a.pem", "--tls_key=/a.key",
                           "--tls_ca=/ca.pem"}) {
    SCOPED_TRACE(flag);
    EXPECT_THROW(Parse({flag}), CLI::ExtrasError);
  }
}

// --metrics_listen is launch's own base port; no worker gets it verbatim
// (ChildSupervisor gives each child a port of its own).
TEST_F(LaunchFlagsTest, MetricsListenIsALaunchFlag) {
  Parse({"--metrics_listen=127.0.0.1:9400", "--metrics_linger_s=2",
         "--steps=5"});
  EXPECT_EQ(options_.metrics.listen, "127.0.0.1:9400");
  EXPECT_EQ(options_.metrics.linger_s, 2);
  EXPECT_THAT(options_.worker_args, ElementsAre("--steps=5"));
  EXPECT_TRUE(ValidateLaunchOptions(options_, false).ok());
  Parse({"--metrics_listen=127.0.0.1:0"});
  EXPECT_EQ(ValidateLaunchOptions(options_, false).code(),
            absl::StatusCode::kInvalidArgument);
  Parse({"--metrics_listen=localhost:9400"});
  EXPECT_EQ(ValidateLaunchOptions(options_, false).code(),
            absl::StatusCode::kInvalidArgument);
}

// --tls is launch's own flag, off by default; no worker gets it.
TEST_F(LaunchFlagsTest, TlsIsALaunchFlag) {
  Parse({});
  EXPECT_FALSE(options_.tls);
  Parse({"--tls", "--run_id=r1"});
  EXPECT_TRUE(options_.tls);
  EXPECT_THAT(options_.worker_args, ElementsAre("--run_id=r1"));
  EXPECT_TRUE(ValidateLaunchOptions(options_, false).ok());
  Parse({"--tls", "--run_id=no/slash"});
  EXPECT_THAT(ValidateLaunchOptions(options_, false).message(),
              HasSubstr("--run_id"));
}

// --save_model is a worker flag; launch checks the path before starting.
TEST_F(LaunchFlagsTest, SaveModelIsCheckedBeforeAnythingStarts) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = tmp == nullptr ? "/tmp" : tmp;
  Parse({"--save_model=" + dir + "/models/m.pt"});
  EXPECT_THAT(options_.worker_args,
              ElementsAre("--save_model=" + dir + "/models/m.pt"));
  EXPECT_TRUE(ValidateLaunchOptions(options_, false).ok());
  Parse({"--save_model=" + dir});
  EXPECT_THAT(ValidateLaunchOptions(options_, false).message(),
              HasSubstr("--save_model " + dir + " is a directory"));
}

TEST_F(LaunchFlagsTest, BadValuesNameTheFlag) {
  try {
    Parse({"--batch_size=0"});
    FAIL() << "parsed";
  } catch (const CLI::ParseError& error) {
    EXPECT_THAT(error.what(), HasSubstr("--batch_size"));
  }
  try {
    Parse({"--shards=0"});
    FAIL() << "parsed";
  } catch (const CLI::ParseError& error) {
    EXPECT_THAT(error.what(), HasSubstr("--shards"));
  }
}

TEST_F(LaunchFlagsTest, ValidationSeesLaunchsClusterFlags) {
  Parse({"--workers=3"});
  EXPECT_TRUE(ValidateLaunchOptions(options_, /*is_root=*/false).ok());
  options_.job.momentum = 2;  // a value no flag check would let through
  absl::Status status = ValidateLaunchOptions(options_, /*is_root=*/false);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("--momentum"));
}

TEST_F(LaunchFlagsTest, GeoFlagsAreLaunchsOwn) {
  Parse({"--geo=weightgrad", "--datacenters", "3", "--workers_per_dc=2",
         "--sync_every=5", "--weight_codec=int8", "--g_thresh=0.2",
         "--steps=20", "--target_accuracy=0.8"});
  EXPECT_EQ(options_.geo.mode, GeoMode::kWeightgrad);
  EXPECT_EQ(options_.geo.datacenters, 3u);
  EXPECT_EQ(options_.geo.workers_per_dc, 2u);
  EXPECT_EQ(options_.geo.sync_every, 5u);
  EXPECT_EQ(options_.geo.weight_codec, "int8");
  EXPECT_DOUBLE_EQ(options_.geo.g_thresh, 0.2);
  EXPECT_DOUBLE_EQ(options_.target_accuracy, 0.8);
  EXPECT_FALSE(options_.geo.emulate_wan);
  EXPECT_THAT(options_.worker_args, ElementsAre("--steps=20"));
  EXPECT_THAT(options_.given_flags,
              ::testing::UnorderedElementsAre(
                  "geo", "datacenters", "workers_per_dc", "sync_every",
                  "weight_codec", "g_thresh", "target_accuracy"));
  EXPECT_TRUE(ValidateLaunchOptions(options_, /*is_root=*/false).ok());
}

TEST_F(LaunchFlagsTest, GeoValidationRunsWithTheWorkerChecks) {
  Parse({"--geo=baseline", "--workers=4"});
  EXPECT_THAT(ValidateLaunchOptions(options_, true).message(),
              HasSubstr("--workers"));
  Parse({"--geo=terngrad", "--emulate_wan", "--wan_mbit=10", "--insecure"});
  EXPECT_TRUE(options_.geo.emulate_wan);
  EXPECT_THAT(ValidateLaunchOptions(options_, /*is_root=*/false).message(),
              HasSubstr("root"));
  EXPECT_TRUE(ValidateLaunchOptions(options_, /*is_root=*/true).ok());
  Parse({"--emulate_wan"});
  EXPECT_THAT(ValidateLaunchOptions(options_, true).message(),
              HasSubstr("needs --geo"));
  // A batch too large for the K x W workers' shards of the data is the
  // worker's own check, with the geo worker count.
  Parse({"--geo=gaia", "--datacenters=2", "--workers_per_dc=2"});
  options_.job.momentum = 2;
  EXPECT_THAT(ValidateLaunchOptions(options_, false).message(),
              HasSubstr("--momentum"));
}

// --geo is read into the enum once, from the command line or TERN_GEO; the
// LPSs and their workers get the mode back by name.
TEST_F(LaunchFlagsTest, GeoModeIsParsedOnceIntoTheEnum) {
  Parse({});
  EXPECT_EQ(options_.geo.mode, GeoMode::kNone);
  Parse({"--geo", ""});
  EXPECT_EQ(options_.geo.mode, GeoMode::kNone);
  for (const GeoMode mode : {GeoMode::kBaseline, GeoMode::kTerngrad,
                             GeoMode::kGaia, GeoMode::kWeightgrad}) {
    const std::string name(GeoModeName(mode));
    SCOPED_TRACE(name);
    Parse({"--geo=" + name});
    EXPECT_EQ(options_.geo.mode, mode);
    EXPECT_THAT(options_.given_flags, ElementsAre("geo"));
    EXPECT_THAT(options_.worker_args, IsEmpty());
  }
  {
    const flags::ScopedEnv geo("TERN_GEO", "gaia");
    Parse({"--datacenters=3"});
  }
  EXPECT_EQ(options_.geo.mode, GeoMode::kGaia);
  EXPECT_TRUE(ValidateLaunchOptions(options_, /*is_root=*/false).ok());
  const LaunchOptions resolved = ResolveLaunchOptions(options_);
  EXPECT_THAT(LpsArgs(resolved, 0, "127.0.0.1:1", "/o/p", "/o/r"),
              ::testing::Contains("--mode=gaia"));
  EXPECT_THAT(LpsWorkerArgs(resolved, 0, "127.0.0.1:1", "/o/m"),
              ::testing::Contains("--mode=gaia"));
}

TEST_F(LaunchFlagsTest, BadGeoModeNamesTheChoices) {
  try {
    Parse({"--geo=Gaia"});
    FAIL() << "parsed";
  } catch (const CLI::ParseError& error) {
    EXPECT_THAT(error.what(), HasSubstr("--geo"));
    EXPECT_THAT(error.what(), HasSubstr("'Gaia'"));
    EXPECT_THAT(error.what(),
                HasSubstr("baseline, terngrad, gaia, weightgrad"));
  }
}

TEST_F(LaunchFlagsTest, BadGeoValuesNameTheFlag) {
  for (const char* arg : {"--geo=gaia2", "--datacenters=0",
                          "--weight_codec=int4", "--g_thresh=1.5",
                          "--wan_mbit=20000", "--target_accuracy=1.5"}) {
    SCOPED_TRACE(arg);
    const std::string flag = std::string(arg).substr(0, std::string(arg).find('='));
    try {
      Parse({arg});
      FAIL() << "parsed";
    } catch (const CLI::ParseError& error) {
      EXPECT_THAT(error.what(), HasSubstr(flag));
    }
  }
}

ChildExit Exited(int code) { return ChildExit{W_EXITCODE(code, 0)}; }
ChildExit Killed(int signal) { return ChildExit{W_EXITCODE(0, signal)}; }

TEST(ExitCodeForTest, KubernetesClasses) {
  EXPECT_EQ(ExitCodeFor(Exited(0)), 0);
  EXPECT_EQ(ExitCodeFor(Exited(1)), 1);
  EXPECT_EQ(ExitCodeFor(Exited(2)), 1);
  EXPECT_EQ(ExitCodeFor(Exited(127)), 1);
  EXPECT_EQ(ExitCodeFor(Exited(128)), 128);
  EXPECT_EQ(ExitCodeFor(Exited(143)), 143);
  EXPECT_EQ(ExitCodeFor(Killed(SIGKILL)), 137);
  EXPECT_EQ(ExitCodeFor(Killed(SIGSEGV)), 139);
  EXPECT_TRUE(Killed(SIGTERM).signaled());
  EXPECT_EQ(Killed(SIGTERM).Describe(),
            absl::StrCat("killed by signal 15 (", strsignal(SIGTERM), ")"));
}

TEST(DefaultOutDirTest, UtcTimestamp) {
  const absl::Time t = absl::FromCivil(absl::CivilSecond(2024, 1, 31, 23, 59, 58),
                                       absl::UTCTimeZone());
  EXPECT_EQ(DefaultOutDir(t), "runs/20240131-235958Z");
}

}  // namespace
}  // namespace tern
