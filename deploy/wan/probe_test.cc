#include "deploy/wan/probe.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern::wan {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A plain blocking TCP socket listening on 127.0.0.1 at a free port, for
// playing a listener that misbehaves.
struct RawServer {
  int fd = -1;
  int port = 0;

  RawServer() {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof(at)), 0);
    EXPECT_EQ(listen(fd, 4), 0);
    socklen_t len = sizeof(at);
    EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&at), &len), 0);
    port = ntohs(at.sin_port);
  }
  ~RawServer() { close(fd); }

  // Accepts one connection, reads to EOF, writes `answer`, closes.
  void AnswerAfterEof(const std::string& answer) {
    const int conn = accept(fd, nullptr, nullptr);
    ASSERT_GE(conn, 0);
    char buf[4096];
    while (read(conn, buf, sizeof(buf)) > 0) {
    }
    ASSERT_EQ(write(conn, answer.data(), answer.size()),
              static_cast<ssize_t>(answer.size()));
    close(conn);
  }
};

SendOptions Options(int port, int64_t bytes, double seconds, double timeout) {
  SendOptions options;
  options.address = "127.0.0.1";
  options.port = port;
  options.bytes = bytes;
  options.seconds = seconds;
  options.timeout_s = timeout;
  return options;
}

// ---- the answer on the wire ----

TEST(ProbeAnswerTest, RoundTrips) {
  ProbeResult in;
  in.bytes = 35736576;
  in.seconds = 3.000125;
  ProbeResult out;
  std::string error;
  std::string line = EncodeAnswer(in);
  ASSERT_EQ(line.back(), '\n');
  line.pop_back();
  ASSERT_TRUE(DecodeAnswer(line, &out, &error)) << error;
  EXPECT_EQ(out.bytes, in.bytes);
  EXPECT_DOUBLE_EQ(out.seconds, in.seconds);
}

TEST(ProbeAnswerTest, RejectsAnythingElse) {
  for (const std::string& line : {
           std::string(""),
           std::string("hello"),
           std::string("tern-probe bytes=1"),
           std::string("tern-probe bytes= micros=1"),
           std::string("tern-probe bytes=1 micros="),
           std::string("tern-probe bytes=-1 micros=2"),
           std::string("tern-probe bytes=1 micros=2x"),
           std::string("tern-probe bytes=1 micros=2 "),
           std::string("tern-probe bytes=0x10 micros=2"),
           std::string("tern-probe bytes=99999999999999999999 micros=2"),
           std::string("tern-probe bytes=1 micros=") + std::string(200, '1'),
       }) {
    ProbeResult out;
    std::string error;
    EXPECT_FALSE(DecodeAnswer(line, &out, &error)) << line;
    EXPECT_THAT(error, HasSubstr("malformed answer")) << line;
  }
}

TEST(ProbeResultTest, RateAndFormat) {
  ProbeResult r;
  EXPECT_EQ(r.MegabytesPerSecond(), 0);  // no time: no division by zero
  r.bytes = 5000000;
  r.seconds = 2;
  EXPECT_DOUBLE_EQ(r.MegabytesPerSecond(), 2.5);
  EXPECT_EQ(FormatResult(r),
            "goodput_mb_per_s=2.500 bytes=5000000 seconds=2.000");
}

// ---- transfers over loopback ----

class ProbeSizeTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(ProbeSizeTest, BothEndsCountExactlyTheBytesSent) {
  std::string error;
  std::unique_ptr<Listener> listener = Listener::Open("127.0.0.1", 0, &error);
  ASSERT_NE(listener, nullptr) << error;
  ASSERT_GT(listener->port(), 0);
  ProbeResult heard;
  bool served = false;
  std::string serve_error;
  std::thread server(
      [&] { served = listener->ServeOne(0, 10, &heard, &serve_error); });
  ProbeResult told;
  const bool sent =
      Send(Options(listener->port(), GetParam(), 0, 10), &told, &error);
  server.join();
  ASSERT_TRUE(served) << serve_error;
  ASSERT_TRUE(sent) << error;
  EXPECT_EQ(heard.bytes, static_cast<uint64_t>(GetParam()));
  EXPECT_EQ(told.bytes, heard.bytes);
  // The sender learns the listener's duration, to the microsecond.
  EXPECT_NEAR(told.seconds, heard.seconds, 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Sizes, ProbeSizeTest,
                         ::testing::Values(0, 1, 31, 32, 33, 4096,
                                           (int64_t{1} << 20) + 3,
                                           int64_t{64} << 20));

TEST(ProbeTest, ListenerWindowStopsATimedSenderEarly) {
  std::string error;
  std::unique_ptr<Listener> listener = Listener::Open("127.0.0.1", 0, &error);
  ASSERT_NE(listener, nullptr) << error;
  ProbeResult heard;
  bool served = false;
  std::thread server(
      [&] { served = listener->ServeOne(0.3, 10, &heard, &error); });
  const auto start = Clock::now();
  ProbeResult told;
  std::string send_error;
  // The sender would go on for 30 s; the listener's answer ends it.
  const bool sent =
      Send(Options(listener->port(), -1, 30, 10), &told, &send_error);
  const double took = SecondsSince(start);
  server.join();
  ASSERT_TRUE(served) << error;
  ASSERT_TRUE(sent) << send_error;
  EXPECT_LT(took, 5);
  EXPECT_GE(told.seconds, 0.3);
  EXPECT_LT(told.seconds, 1.5);
  EXPECT_GT(told.bytes, 0u);
  EXPECT_EQ(told.bytes, heard.bytes);
}

TEST(ProbeTest, TimedSenderStopsOnItsOwn) {
  std::string error;
  std::unique_ptr<Listener> listener = Listener::Open("127.0.0.1", 0, &error);
  ASSERT_NE(listener, nullptr) << error;
  ProbeResult heard;
  bool served = false;
  std::thread server(
      [&] { served = listener->ServeOne(0, 10, &heard, &error); });
  ProbeResult told;
  std::string send_error;
  const bool sent =
      Send(Options(listener->port(), -1, 0.2, 10), &told, &send_error);
  server.join();
  ASSERT_TRUE(served) << error;
  ASSERT_TRUE(sent) << send_error;
  EXPECT_GT(told.bytes, 0u);
  EXPECT_GE(told.seconds, 0.1);
  EXPECT_LT(told.seconds, 2);
}

// ---- every wait ends ----

TEST(ProbeTest, ListenerGivesUpWhenNobodyConnects) {
  std::string error;
  std::unique_ptr<Listener> listener = Listener::Open("127.0.0.1", 0, &error);
  ASSERT_NE(listener, nullptr) << error;
  const auto start = Clock::now();
  ProbeResult heard;
  EXPECT_FALSE(listener->ServeOne(0, 0.3, &heard, &error));
  EXPECT_THAT(error, HasSubstr("no connection within"));
  EXPECT_GE(SecondsSince(start), 0.29);
  EXPECT_LT(SecondsSince(start), 3);
}

TEST(ProbeTest, ListenerGivesUpOnASilentSender) {
  std::string error;
  std::unique_ptr<Listener> listener = Listener::Open("127.0.0.1", 0, &error);
  ASSERT_NE(listener, nullptr) << error;
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  to.sin_port = htons(static_cast<uint16_t>(listener->port()));
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0);
  ProbeResult heard;
  EXPECT_FALSE(listener->ServeOne(0, 0.3, &heard, &error));
  EXPECT_THAT(error, HasSubstr("no data for"));
  close(client);
}

TEST(ProbeTest, SenderGivesUpWhenNothingListens) {
  int port = 0;
  {
    std::string error;
    std::unique_ptr<Listener> gone = Listener::Open("127.0.0.1", 0, &error);
    ASSERT_NE(gone, nullptr) << error;
    port = gone->port();
  }
  const auto start = Clock::now();
  ProbeResult told;
  std::string error;
  EXPECT_FALSE(Send(Options(port, 10, 0, 0.4), &told, &error));
  EXPECT_THAT(error, HasSubstr("could not connect to 127.0.0.1:"));
  // It retried (the listener might have been starting) for its timeout.
  EXPECT_GE(SecondsSince(start), 0.3);
  EXPECT_LT(SecondsSince(start), 3);
}

TEST(ProbeTest, SenderGivesUpWhenTheAnswerNeverComes) {
  RawServer server;  // listens, never accepts: the connect still succeeds
  const auto start = Clock::now();
  ProbeResult told;
  std::string error;
  EXPECT_FALSE(Send(Options(server.port, 10, 0, 0.3), &told, &error));
  EXPECT_THAT(error, HasSubstr("waiting for the listener's answer"));
  EXPECT_LT(SecondsSince(start), 3);
}

// ---- a listener that lies or breaks the protocol ----

struct BadListenerCase {
  std::string answer;
  std::string message;
};

class ProbeBadListenerTest : public ::testing::TestWithParam<BadListenerCase> {
};

TEST_P(ProbeBadListenerTest, SenderRejectsTheAnswer) {
  RawServer server;
  std::thread peer([&] { server.AnswerAfterEof(GetParam().answer); });
  ProbeResult told;
  std::string error;
  EXPECT_FALSE(Send(Options(server.port, 10, 0, 5), &told, &error));
  peer.join();
  EXPECT_THAT(error, HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ProbeBadListenerTest,
    ::testing::Values(
        BadListenerCase{"hello\n", "malformed answer"},
        BadListenerCase{"", "closed the connection without an answer"},
        BadListenerCase{"tern-probe bytes=3", "without an answer"},
        BadListenerCase{std::string(300, 'x'), "malformed answer"},
        BadListenerCase{"tern-probe bytes=3 micros=5\n",
                        "counted 3 of the 10 bytes"}));

TEST(ProbeTest, RejectsAddressesThatAreNotIpv4) {
  std::string error;
  EXPECT_EQ(Listener::Open("localhost", 0, &error), nullptr);
  EXPECT_THAT(error, HasSubstr("'localhost' is not an IPv4 address"));
  ProbeResult told;
  SendOptions options = Options(9, 1, 0, 1);
  options.address = "10.77.0";
  EXPECT_FALSE(Send(options, &told, &error));
  EXPECT_THAT(error, HasSubstr("'10.77.0' is not an IPv4 address"));
}

}  // namespace
}  // namespace tern::wan
