#include "common/process/serve_loop.h"

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "common/process/exit_codes.h"
#include "gtest/gtest.h"

namespace tern::process {
namespace {

const Logger& TestLogger() {
  static const Logger logger = MakeLogger("test", "0");
  return logger;
}

TEST(ServeUntilStoppedTest, TicksUntilStopIsRequested) {
  StopRequest stop;
  std::atomic<int> ticks{0};
  std::thread stopper([&] {
    while (ticks.load() < 3) std::this_thread::yield();
    stop.Request("test done");
  });
  const int code = ServeUntilStopped(
      stop, TestLogger(),
      [&](absl::Time) {
        ++ticks;
        return absl::OkStatus();
      },
      absl::Milliseconds(1));
  stopper.join();
  EXPECT_EQ(code, kExitOk);
  EXPECT_GE(ticks.load(), 3);
}

TEST(ServeUntilStoppedTest, AFailingTickEndsTheLoopAsTransient) {
  StopRequest stop;
  int ticks = 0;
  const int code = ServeUntilStopped(
      stop, TestLogger(),
      [&](absl::Time) {
        return ++ticks < 2 ? absl::OkStatus()
                           : absl::DeadlineExceededError("workers 1 missing");
      },
      absl::Milliseconds(1));
  EXPECT_EQ(code, kExitTransient);
  EXPECT_EQ(ticks, 2);
}

TEST(ServeUntilStoppedTest, AStopRequestedBeforeTheLoopEndsItWithoutATick) {
  StopRequest stop;
  stop.Request("early");
  int ticks = 0;
  EXPECT_EQ(ServeUntilStopped(stop, TestLogger(),
                              [&](absl::Time) {
                                ++ticks;
                                return absl::OkStatus();
                              }),
            kExitOk);
  EXPECT_EQ(ticks, 0);
}

TEST(WritePortFileIfAskedTest, WritesOnlyWhenAPathIsGiven) {
  EXPECT_TRUE(WritePortFileIfAsked("", 123, TestLogger()));
  const std::string path =
      std::string(std::getenv("TEST_TMPDIR")) + "/serve_loop.port";
  ASSERT_TRUE(WritePortFileIfAsked(path, 4567, TestLogger()));
  std::ifstream in(path);
  int port = 0;
  in >> port;
  EXPECT_EQ(port, 4567);
  EXPECT_FALSE(WritePortFileIfAsked("/nonexistent-dir/x.port", 1,
                                    TestLogger()));
}

}  // namespace
}  // namespace tern::process
