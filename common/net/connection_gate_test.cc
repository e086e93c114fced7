#include "common/net/connection_gate.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/net/channel.h"
#include "common/net/server.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"

namespace tern::net {
namespace {

// A socket that is not connected anywhere: a descriptor to count.
int NewSocket() { return socket(AF_INET, SOCK_STREAM, 0); }

TEST(ConnectionCountTest, RefusesPastThePeerAndTheTotalLimit) {
  ConnectionCount count({/*per_peer=*/2, /*total=*/3});
  std::vector<int> fds = {NewSocket(), NewSocket(), NewSocket(), NewSocket()};
  EXPECT_TRUE(count.Admit("10.0.0.1", fds[0]));
  EXPECT_TRUE(count.Admit("10.0.0.1", fds[1]));
  EXPECT_FALSE(count.Admit("10.0.0.1", fds[2]));  // the peer's limit
  EXPECT_TRUE(count.Admit("10.0.0.2", fds[2]));
  EXPECT_FALSE(count.Admit("10.0.0.3", fds[3]));  // the total
  EXPECT_EQ(count.Open("10.0.0.1"), 2);
  EXPECT_EQ(count.Open(""), 3);
  for (int fd : fds) close(fd);
}

// A connection stops counting once its descriptor is closed, even when
// the next socket gets the same number.
TEST(ConnectionCountTest, AClosedDescriptorStopsCountingEvenWhenReused) {
  ConnectionCount count({/*per_peer=*/2, /*total=*/10});
  const int first = NewSocket();
  const int second = NewSocket();
  ASSERT_TRUE(count.Admit("10.0.0.1", first));
  ASSERT_TRUE(count.Admit("10.0.0.1", second));
  close(first);
  const int reused = NewSocket();
  ASSERT_EQ(reused, first);  // the lowest free number
  EXPECT_TRUE(count.Admit("10.0.0.1", reused));
  EXPECT_EQ(count.Open("10.0.0.1"), 2);
  close(second);
  close(reused);
}

TEST(ConnectionLimitsTest, GrowWithTheSenders) {
  EXPECT_EQ(ConnectionLimitsFor(1).per_peer, 20);
  EXPECT_EQ(ConnectionLimitsFor(1).total, 72);
  EXPECT_EQ(ConnectionLimitsFor(0).per_peer, 20);  // at least one sender
  EXPECT_EQ(ConnectionLimitsFor(16).per_peer, 80);
  EXPECT_EQ(ConnectionLimitsFor(16).total, 192);
}

// A TCP connection to 127.0.0.1:port from `source` (127.0.0.x).
int Connect(int port, const char* source) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  inet_pton(AF_INET, source, &address.sin_addr);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)),
            0);
  inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  address.sin_port = htons(port);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)),
            0);
  return fd;
}

// Whether the server closed `fd` within `wait` (what it sent first, its
// HTTP/2 settings, is read and dropped).
bool ClosedByServer(int fd, absl::Duration wait) {
  const absl::Time deadline = absl::Now() + wait;
  while (absl::Now() < deadline) {
    pollfd polled{fd, POLLIN, 0};
    const int millis = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (poll(&polled, 1, std::max(millis, 1)) <= 0) continue;
    char bytes[256];
    if (read(fd, bytes, sizeof(bytes)) <= 0) return true;
  }
  return false;
}

grpc::Status Check(int port, absl::Duration deadline) {
  auto health_client = grpc::health::v1::Health::NewStub(
      CreateChannel(absl::StrCat("127.0.0.1:", port), ChannelOptions()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  grpc::health::v1::HealthCheckResponse response;
  return health_client->Check(&context, {}, &response);
}

// One address at its limit is refused; another address and, once some
// close, the first one are served again.
TEST(ConnectionGateTest, ServerClosesConnectionsOverThePeerLimit) {
  ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.senders = 1;  // 20 per peer
  // Raw connections never send HTTP/2's preface: keep them for the test.
  options.handshake_timeout = absl::Seconds(60);
  auto server = Server::Start(options, {});
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  // Serving, asked from an address of its own: a gRPC check from 127.0.0.1
  // would leave a connection that the server may count a moment longer
  // than the client holds it, and take one of 127.0.0.1's places below.
  const int probe = Connect(port, "127.0.0.3");
  ASSERT_FALSE(ClosedByServer(probe, absl::Milliseconds(300)));
  close(probe);

  std::vector<int> held;
  for (int i = 0; i < 20; ++i) held.push_back(Connect(port, "127.0.0.1"));
  EXPECT_FALSE(ClosedByServer(held.back(), absl::Milliseconds(300)));
  const int over = Connect(port, "127.0.0.1");
  EXPECT_TRUE(ClosedByServer(over, absl::Seconds(5)));
  EXPECT_FALSE(Check(port, absl::Seconds(2)).ok());
  const int other_peer = Connect(port, "127.0.0.2");
  EXPECT_FALSE(ClosedByServer(other_peer, absl::Milliseconds(300)));

  for (int i = 0; i < 5; ++i) close(held[i]);
  grpc::Status served;
  for (int attempt = 0; attempt < 20 && !served.ok(); ++attempt) {
    absl::SleepFor(absl::Milliseconds(100));
    served = Check(port, absl::Seconds(2));
  }
  EXPECT_TRUE(served.ok()) << served.error_message();
  for (int i = 5; i < 20; ++i) close(held[i]);
  close(over);
  close(other_peer);
}

TEST(ListenSocketsTest, BindsEveryAddressOfTheHostOnOnePort) {
  absl::StatusOr<ListenSockets> sockets = BindListenSockets("localhost:0");
  ASSERT_TRUE(sockets.ok()) << sockets.status();
  EXPECT_GT(sockets->port, 0);
  EXPECT_GE(sockets->fds.size(), 1u);
  CloseListenSockets(*sockets);
  EXPECT_TRUE(sockets->fds.empty());
}

TEST(ListenSocketsTest, RefusesWhatIsNotHostAndPort) {
  for (const char* listen : {"localhost", "localhost:x", "[::1:5", ":99999"}) {
    absl::StatusOr<ListenSockets> sockets = BindListenSockets(listen);
    ASSERT_FALSE(sockets.ok()) << listen;
    EXPECT_EQ(sockets.status().code(), absl::StatusCode::kInvalidArgument)
        << listen;
  }
}

}  // namespace
}  // namespace tern::net
