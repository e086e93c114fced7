#include "common/net/pacing.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <limits>
#include <mutex>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern::net {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kNotPaced = std::numeric_limits<uint32_t>::max();

// A TCP connection over loopback: both ends and the listener, closed at
// the end of the test.
struct LoopbackConnection {
  int listener = -1;
  int client = -1;
  int server = -1;

  LoopbackConnection() {
    listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (bind(listener, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
        listen(listener, 1) != 0 ||
        getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) !=
            0) {
      return;
    }
    client = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(client, reinterpret_cast<sockaddr*>(&address), length) != 0) {
      return;
    }
    server = accept(listener, nullptr, nullptr);
  }
  ~LoopbackConnection() {
    for (int fd : {listener, client, server}) {
      if (fd >= 0) close(fd);
    }
  }
  bool ok() const { return listener >= 0 && client >= 0 && server >= 0; }
};

TEST(PacingTest, MbitBecomeBytesPerSecond) {
  EXPECT_EQ(PacingBytesPerSecond(0), 0u);
  EXPECT_EQ(PacingBytesPerSecond(100), 12'500'000u);
  EXPECT_EQ(PacingBytesPerSecond(31.6), 3'950'000u);
  EXPECT_EQ(PacingBytesPerSecond(kMaxPaceMbit), 4'250'000'000u);
}

TEST(PacingTest, ALoopbackConnectionIsOnThisHost) {
  LoopbackConnection connection;
  ASSERT_TRUE(connection.ok());
  EXPECT_FALSE(ConnectsToAnotherHost(connection.client));
  EXPECT_FALSE(ConnectsToAnotherHost(connection.server));
  EXPECT_FALSE(ConnectsToAnotherHost(connection.listener));
}

TEST(PacingTest, OnlyConnectedTcpSocketsCount) {
  int pipe_ends[2];
  ASSERT_EQ(pipe(pipe_ends), 0);
  EXPECT_FALSE(ConnectsToAnotherHost(pipe_ends[0]));
  EXPECT_FALSE(PacingOf(pipe_ends[0]).ok());
  close(pipe_ends[0]);
  close(pipe_ends[1]);
  const int udp = socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(udp, 0);
  EXPECT_FALSE(ConnectsToAnotherHost(udp));
  close(udp);
  EXPECT_FALSE(ConnectsToAnotherHost(-1));
}

TEST(PacingTest, ASocketKeepsTheRateItIsGiven) {
  LoopbackConnection connection;
  ASSERT_TRUE(connection.ok());
  ASSERT_EQ(PacingOf(connection.client).value_or(0), kNotPaced);
  ASSERT_TRUE(PaceSocket(connection.client, 3'950'000).ok());
  EXPECT_EQ(PacingOf(connection.client).value_or(0), 3'950'000u);
  EXPECT_EQ(PacingOf(connection.server).value_or(0), kNotPaced);
  const absl::Status closed = PaceSocket(-1, 1);
  EXPECT_FALSE(closed.ok());
  EXPECT_THAT(closed.message(), HasSubstr("SO_MAX_PACING_RATE"));
}

TEST(PacingTest, AScanPacesTheWantedSocketsOnce) {
  LoopbackConnection connection;
  ASSERT_TRUE(connection.ok());
  const int client = connection.client;
  // A period long enough that the thread's first scan is the only other.
  ConnectionPacer pacer(1'000'000, absl::Hours(1),
                        [client](int fd) { return fd == client; });
  pacer.PaceOpenSockets();
  EXPECT_EQ(PacingOf(client).value_or(0), 1'000'000u);
  EXPECT_EQ(PacingOf(connection.server).value_or(0), kNotPaced);
  EXPECT_EQ(PacingOf(connection.listener).value_or(0), kNotPaced);
  EXPECT_EQ(pacer.PaceOpenSockets(), 0);  // already paced
}

TEST(PacingTest, TheThreadPacesConnectionsOpenedLater) {
  // One scan every 10 ms; the connection is opened after the first.
  int wanted = -1;
  std::mutex mu;
  ConnectionPacer pacer(2'000'000, absl::Milliseconds(10), [&](int fd) {
    std::lock_guard<std::mutex> lock(mu);
    return fd == wanted;
  });
  LoopbackConnection connection;
  ASSERT_TRUE(connection.ok());
  {
    std::lock_guard<std::mutex> lock(mu);
    wanted = connection.server;
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (PacingOf(connection.server).value_or(0) != 2'000'000u &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(PacingOf(connection.server).value_or(0), 2'000'000u);
  EXPECT_EQ(PacingOf(connection.client).value_or(0), kNotPaced);
}

}  // namespace
}  // namespace tern::net
