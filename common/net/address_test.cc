#include "common/net/address.h"

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
        "unix:/tmp/tern.sock", "dns:///localhost:5", "ipv4:127.0.0.1:5"}) {
    EXPECT_TRUE(IsLoopbackAddress(address)) << address;
  }
  for (const char* address :
       {"0.0.0.0:50051", "[::]:50051", "10.0.0.1:50051", "ps-0:50051",
        "128.0.0.1:5", "localhost.example.com:5", "[::2]:5", ":50051"}) {
    EXPECT_FALSE(IsLoopbackAddress(address)) << address;
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
