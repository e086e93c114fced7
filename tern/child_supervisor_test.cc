#include "tern/child_supervisor.h"

#include <signal.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// Run only as a child (the supervisor starts this test binary with a
// --gtest_filter that picks it): ends with exit code 3.
TEST(ChildSupervisorHelper, DISABLED_ExitThree) { ::_exit(3); }

// gtest's arguments that make this binary, as a child, exit 0 at once or
// with 3.
const std::vector<std::string> kExitZero = {"--gtest_filter=NoSuchTest.None"};
const std::vector<std::string> kExitThree = {
    "--gtest_also_run_disabled_tests",
    "--gtest_filter=ChildSupervisorHelper.DISABLED_ExitThree"};

class ChildSupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SupervisorConfig config;
    config.out_dir = ::testing::TempDir();
    config.self = "child_supervisor_test";
    config.stop_grace = absl::Seconds(5);
    absl::StatusOr<std::unique_ptr<ChildSupervisor>> supervisor =
        ChildSupervisor::Create(config, &options_, &console_, &outcome_);
    ASSERT_TRUE(supervisor.ok()) << supervisor.status();
    supervisor_ = *std::move(supervisor);
  }

  // Polls until none of `children` runs (at most 30 s).
  void AwaitEnd(const std::vector<size_t>& children) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (supervisor_->AnyRunning(children) && absl::Now() < deadline) {
      supervisor_->Poll(absl::Milliseconds(50));
    }
    ASSERT_FALSE(supervisor_->AnyRunning(children));
  }

  LaunchOptions options_;
  Console console_{false, absl::ZeroDuration()};
  LaunchOutcome outcome_;
  std::unique_ptr<ChildSupervisor> supervisor_;
};

TEST_F(ChildSupervisorTest, AWorkerThatSucceedsIsNoFailure) {
  std::optional<size_t> worker = supervisor_->SpawnTern(
      "worker/0", "dc0", kExitZero, ChildRole::kWorker);
  ASSERT_TRUE(worker.has_value());
  AwaitEnd({*worker});
  EXPECT_TRUE(outcome_.ok());
  EXPECT_THAT(supervisor_->Ends(), ElementsAre(Pair("worker/0", "exit code 0")));
}

TEST_F(ChildSupervisorTest, AServerThatEndsFailsTheRunEvenWithSuccess) {
  std::optional<size_t> server =
      supervisor_->SpawnTern("ps/0", "gs", kExitZero, ChildRole::kServer);
  ASSERT_TRUE(server.has_value());
  AwaitEnd({*server});
  EXPECT_EQ(outcome_.status, RunStatus::kFailed);
  EXPECT_EQ(outcome_.failed_child, "ps/0");
  EXPECT_EQ(outcome_.failure, "exited before the workers finished");
  EXPECT_EQ(outcome_.exit_code, process::kExitStartFailure);
}

TEST_F(ChildSupervisorTest, TheFirstFailureDecides) {
  std::optional<size_t> first = supervisor_->SpawnTern(
      "worker/0", "dc0", kExitThree, ChildRole::kWorker);
  ASSERT_TRUE(first.has_value());
  AwaitEnd({*first});
  std::optional<size_t> second =
      supervisor_->SpawnTern("ps/0", "gs", kExitZero, ChildRole::kServer);
  ASSERT_TRUE(second.has_value());
  AwaitEnd({*second});
  EXPECT_EQ(outcome_.status, RunStatus::kFailed);
  EXPECT_EQ(outcome_.failed_child, "worker/0");
  EXPECT_EQ(outcome_.failure, "exit code 3");
  EXPECT_EQ(outcome_.exit_code, 1);  // a configuration error's class
}

TEST_F(ChildSupervisorTest, AToolsExitIsItsCallersToJudge) {
  std::optional<ChildExit> exit = supervisor_->RunTool(
      "tool", {"/bin/sh", "-c", "exit 2"}, absl::Seconds(30), true);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->code_or_signal(), 2);
  EXPECT_TRUE(outcome_.ok());
  // A tool that outlives its limit is stopped; nothing is returned as its
  // exit only if it could not be reaped, which Stop rules out.
  std::optional<ChildExit> slow = supervisor_->RunTool(
      "slow", {"/bin/sh", "-c", "exec sleep 30"}, absl::Milliseconds(200),
      false);
  ASSERT_TRUE(slow.has_value());
  EXPECT_TRUE(slow->signaled());
  EXPECT_TRUE(outcome_.ok());
}

TEST_F(ChildSupervisorTest, ASignalInterruptsTheRunOnce) {
  EXPECT_FALSE(supervisor_->Interrupted());
  ASSERT_EQ(::kill(::getpid(), SIGTERM), 0);
  supervisor_->Poll(absl::Seconds(5));
  EXPECT_TRUE(supervisor_->Interrupted());
  EXPECT_EQ(outcome_.status, RunStatus::kInterrupted);
  EXPECT_EQ(outcome_.exit_code, 128 + SIGTERM);
  EXPECT_THAT(outcome_.failure, HasSubstr("received"));
  // Later failures are its consequences.
  outcome_.Fail("ps/0", "exit code 1", 1);
  EXPECT_EQ(outcome_.status, RunStatus::kInterrupted);
  EXPECT_EQ(outcome_.failed_child, "");
}

TEST_F(ChildSupervisorTest, LogsAreNamedAfterTheChild) {
  EXPECT_EQ(supervisor_->LogOf("lps/1"), ::testing::TempDir() + "/lps-1.log");
}

TEST(ExitCodeForTest, ClassesOfTheRestartPolicy) {
  EXPECT_EQ(ExitCodeFor(ChildExit{W_EXITCODE(0, 0)}), 0);
  EXPECT_EQ(ExitCodeFor(ChildExit{W_EXITCODE(3, 0)}), 1);
  EXPECT_EQ(ExitCodeFor(ChildExit{W_EXITCODE(130, 0)}), 130);
  EXPECT_EQ(ExitCodeFor(ChildExit{W_EXITCODE(0, SIGKILL)}), 128 + SIGKILL);
}

}  // namespace
}  // namespace tern
