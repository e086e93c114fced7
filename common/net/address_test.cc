#include "common/net/address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tern::net {
namespace {

TEST(HostOfAddressTest, DropsSchemeBracketsAndPort) {
  EXPECT_EQ(HostOfAddress("10.0.0.2:5000"), "10.0.0.2");
  EXPECT_EQ(HostOfAddress("dns:///ps-0.tern:5000"), "ps-0.tern");
  EXPECT_EQ(HostOfAddress("ipv4:10.0.0.2:5000"), "10.0.0.2");
  EXPECT_EQ(HostOfAddress("[fe80::1]:5000"), "fe80::1");
  EXPECT_EQ(HostOfAddress("ipv6:[::1]:5"), "::1");
  EXPECT_EQ(HostOfAddress("ps-0"), "ps-0");
  EXPECT_EQ(HostOfAddress("unix:/tmp/tern.sock"), "unix:/tmp/tern.sock");
}

TEST(IsLoopbackAddressTest, OnlyThisMachinesAddressesAreLoopback) {
  for (const char* address :
       {"127.0.0.1:50051", "127.9.8.7:1", "localhost:0", "[::1]:50051",
        "unix:/tmp/tern.sock", "dns:///localhost:5", "ipv4:127.0.0.1:5",
        "[::ffff:127.0.0.1]:5"}) {
    EXPECT_TRUE(IsLoopbackAddress(address)) << address;
  }
  for (const char* address :
       {"0.0.0.0:50051", "[::]:50051", "10.0.0.1:50051", "ps-0:50051",
        "128.0.0.1:5", "localhost.example.com:5", "[::2]:5", ":50051",
        "127.example.com:5"}) {
    EXPECT_FALSE(IsLoopbackAddress(address)) << address;
  }
}

TEST(IpBytesTest, NumericAddressesOnlyMappedOnesAsIpv4) {
  EXPECT_EQ(IpBytes("10.0.0.2"), std::string("\x0a\x00\x00\x02", 4));
  EXPECT_EQ(IpBytes("::ffff:10.0.0.2"), IpBytes("10.0.0.2"));
  ASSERT_TRUE(IpBytes("fe80::1").has_value());
  EXPECT_EQ(IpBytes("fe80::1")->size(), 16u);
  EXPECT_EQ(IpBytes("FE80:0::1"), IpBytes("fe80::1"));
  for (const char* host : {"ps-0", "localhost", "10.0.0", "", "1.2.3.4:5"}) {
    EXPECT_FALSE(IpBytes(host).has_value()) << host;
  }
}

// A socket's address of `family` holding the numeric `ip`.
sockaddr_storage SocketAddress(int family, const char* ip) {
  sockaddr_storage address{};
  address.ss_family = family;
  void* bytes =
      family == AF_INET
          ? static_cast<void*>(&reinterpret_cast<sockaddr_in&>(address).sin_addr)
          : static_cast<void*>(
                &reinterpret_cast<sockaddr_in6&>(address).sin6_addr);
  EXPECT_EQ(inet_pton(family, ip, bytes), 1) << ip;
  return address;
}

TEST(SocketIpBytesTest, TheSameBytesAsTheAddressesText) {
  EXPECT_EQ(SocketIpBytes(SocketAddress(AF_INET, "10.0.0.2")),
            IpBytes("10.0.0.2"));
  EXPECT_EQ(SocketIpBytes(SocketAddress(AF_INET6, "::ffff:10.0.0.2")),
            IpBytes("10.0.0.2"));
  EXPECT_EQ(SocketIpBytes(SocketAddress(AF_INET6, "fe80::1")),
            IpBytes("fe80::1"));
  sockaddr_storage unix_socket{};
  unix_socket.ss_family = AF_UNIX;
  EXPECT_FALSE(SocketIpBytes(unix_socket).has_value());
}

TEST(IsLoopbackIpTest, OnlyTheLoopbackNetworks) {
  for (const char* host : {"127.0.0.1", "127.255.0.9", "::1",
                           "::ffff:127.0.0.1"}) {
    EXPECT_TRUE(IsLoopbackIp(*IpBytes(host))) << host;
  }
  for (const char* host : {"128.0.0.1", "10.0.0.2", "::", "::2", "0.0.0.0",
                           "fe80::1"}) {
    EXPECT_FALSE(IsLoopbackIp(*IpBytes(host))) << host;
  }
}

TEST(IsOnThisHostTest, LoopbackAndTheInterfacesAddresses) {
  const std::vector<std::string> interfaces = {"127.0.0.1", "10.0.0.2",
                                               "fe80::1"};
  for (const char* address :
       {"10.0.0.2:5000", "dns:///10.0.0.2:5000", "ipv4:10.0.0.2:1",
        "[fe80::1]:5000", "[FE80:0::1]:5000", "localhost:5", "127.0.0.5:5",
        "unix:/tmp/tern.sock", "10.0.0.2"}) {
    EXPECT_TRUE(IsOnThisHost(address, interfaces)) << address;
  }
  for (const char* address :
       {"10.0.0.3:5000", "10.0.0.20:5000", "[fe80::2]:5000", "ps-0.tern:5000",
        "0.0.0.0:5000", "[::]:5", ":5000", ""}) {
    EXPECT_FALSE(IsOnThisHost(address, interfaces)) << address;
  }
}

TEST(IsOnThisHostTest, WithoutInterfacesOnlyLoopbackIsHere) {
  EXPECT_TRUE(IsOnThisHost("127.0.0.1:5", {}));
  EXPECT_FALSE(IsOnThisHost("10.0.0.2:5000", {}));
}

TEST(InterfaceAddressesTest, ListsLoopback) {
  const auto addresses = InterfaceAddresses();
  ASSERT_TRUE(addresses.ok()) << addresses.status();
  bool loopback = false;
  for (const std::string& address : *addresses) {
    loopback = loopback || address == "127.0.0.1" || address == "::1";
  }
  EXPECT_TRUE(loopback);
}

}  // namespace
}  // namespace tern::net
