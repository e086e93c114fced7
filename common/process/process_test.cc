#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "common/process/exit_codes.h"
#include "common/process/port_file.h"
#include "common/process/role_test_support.h"
#include "common/process/signals.h"
#include "common/process/stop.h"
#include "gtest/gtest.h"

namespace tern::process {
namespace {

TEST(WritePortFileTest, WritesThePortAndALineEnd) {
  const std::string path = TestTempDir() + "/port-file-test.port";
  ASSERT_TRUE(WritePortFile(path, 43210).ok());
  EXPECT_EQ(ReadWholeFile(path), "43210\n");
  ASSERT_TRUE(WritePortFile(path, 5).ok());  // replaces the old file
  EXPECT_EQ(ReadWholeFile(path), "5\n");
  const absl::Status status = WritePortFile(TestTempDir() + "/none/x.port", 1);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--port_file"), absl::string_view::npos);
}

TEST(ExitCodeForTest, TransientCodesAreAtLeast128) {
  EXPECT_EQ(ExitCodeFor(absl::OkStatus()), 0);
  EXPECT_EQ(ExitCodeFor(absl::UnavailableError("down")), kExitTransient);
  EXPECT_EQ(ExitCodeFor(absl::DeadlineExceededError("slow")), kExitTransient);
  EXPECT_EQ(ExitCodeFor(absl::AbortedError("x")), kExitTransient);
  EXPECT_EQ(ExitCodeFor(absl::CancelledError("x")), kExitTransient);
  EXPECT_EQ(ExitCodeFor(absl::ResourceExhaustedError("busy")), kExitTransient);
  EXPECT_EQ(ExitCodeFor(absl::InvalidArgumentError("flag")), 1);
  EXPECT_EQ(ExitCodeFor(absl::NotFoundError("no data")), 1);
  EXPECT_EQ(ExitCodeFor(absl::InternalError("odd shard")), 1);
  EXPECT_EQ(ExitCodeFor(absl::FailedPreconditionError("diverged")), 1);
  EXPECT_GE(kExitTransient, 128);
}

TEST(StopRequestTest, KeepsTheFirstReasonAndWakesWaiters) {
  StopRequest stop;
  EXPECT_FALSE(stop.requested());
  EXPECT_FALSE(stop.WaitFor(absl::Milliseconds(10)));
  EXPECT_EQ(stop.reason(), "");
  std::thread waiter([&] { EXPECT_TRUE(stop.WaitFor(absl::Seconds(30))); });
  stop.Request("first");
  stop.Request("second");
  waiter.join();
  EXPECT_TRUE(stop.requested());
  EXPECT_EQ(stop.reason(), "first");
}

class SignalWatcherTest : public ::testing::TestWithParam<int> {};

TEST_P(SignalWatcherTest, ASignalRequestsStop) {
  StopRequest stop;
  {
    SignalWatcher watcher(&stop);
    ASSERT_EQ(kill(getpid(), GetParam()), 0);
    ASSERT_TRUE(stop.WaitFor(absl::Seconds(30)));
  }
  EXPECT_EQ(stop.reason(), std::string(strsignal(GetParam())) + " received");
}

INSTANTIATE_TEST_SUITE_P(Signals, SignalWatcherTest,
                         ::testing::Values(SIGINT, SIGTERM));

// A thread that existed before the watcher (as libraries start them before
// main) does not block the signals; the kernel may deliver SIGTERM to it.
// The stop must still be requested instead of the process ending.
TEST(SignalWatcherTest, AThreadStartedBeforeTheWatcherDoesNotEndTheProcess) {
  absl::Notification release;
  std::thread earlier([&] { release.WaitForNotification(); });
  sigset_t both;
  sigemptyset(&both);
  sigaddset(&both, SIGINT);
  sigaddset(&both, SIGTERM);
  sigset_t previous;
  // Block them here, so that only `earlier` can take the signal.
  pthread_sigmask(SIG_BLOCK, &both, &previous);
  StopRequest stop;
  {
    SignalWatcher watcher(&stop);
    ASSERT_EQ(kill(getpid(), SIGTERM), 0);
    ASSERT_TRUE(stop.WaitFor(absl::Seconds(30)));
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  release.Notify();
  earlier.join();
  EXPECT_EQ(stop.reason(), std::string(strsignal(SIGTERM)) + " received");
}

TEST(SignalWatcherTest, WithoutASignalNothingIsRequested) {
  StopRequest stop;
  { SignalWatcher watcher(&stop); }
  EXPECT_FALSE(stop.requested());
}

}  // namespace
}  // namespace tern::process
