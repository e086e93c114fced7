#include "tern/server_startup.h"

#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace tern {
namespace {

TEST(ReadPortTest, OnlyACompleteValidPort) {
  const std::string path = ::testing::TempDir() + "/server_startup_test.port";
  std::remove(path.c_str());
  EXPECT_FALSE(ReadPort(path).has_value());  // not written yet
  struct Case {
    const char* text;
    std::optional<uint32_t> port;
  };
  for (const Case& c : {Case{"8080\n", 8080}, Case{"1", 1},
                        Case{" 65535 \n", 65535}, Case{"", std::nullopt},
                        Case{"0\n", std::nullopt}, Case{"65536", std::nullopt},
                        Case{"80a", std::nullopt}, Case{"-1", std::nullopt}}) {
    SCOPED_TRACE(c.text);
    std::ofstream(path) << c.text;
    EXPECT_EQ(ReadPort(path), c.port);
  }
}

TEST(PortFileOfTest, SlashesBecomeDashes) {
  EXPECT_EQ(PortFileOf("/o", "ps/3"), "/o/ps-3.port");
  EXPECT_EQ(PortFileOf("runs/x", "global"), "runs/x/global.port");
}

}  // namespace
}  // namespace tern
