#include "deploy/wan/probe_args.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern::wan {
namespace {

using ::testing::HasSubstr;

TEST(ProbeArgsTest, ListenDefaults) {
  ProbeArgs args;
  std::string error;
  ASSERT_TRUE(ParseProbeArgs({"listen"}, &args, &error)) << error;
  EXPECT_EQ(args.mode, ProbeMode::kListen);
  EXPECT_EQ(args.address, "127.0.0.1");
  EXPECT_EQ(args.port, 0);
  EXPECT_EQ(args.seconds, 0);
  EXPECT_EQ(args.bytes, -1);
  EXPECT_EQ(args.timeout_s, 10);
  EXPECT_FALSE(args.help);
}

TEST(ProbeArgsTest, SendWithEveryFlagInBothForms) {
  ProbeArgs args;
  std::string error;
  ASSERT_TRUE(ParseProbeArgs({"send", "--address", "10.77.3.1", "--port=4711",
                              "--seconds", "2.5", "--timeout_s=7"},
                             &args, &error))
      << error;
  EXPECT_EQ(args.mode, ProbeMode::kSend);
  EXPECT_EQ(args.address, "10.77.3.1");
  EXPECT_EQ(args.port, 4711);
  EXPECT_DOUBLE_EQ(args.seconds, 2.5);
  EXPECT_DOUBLE_EQ(args.timeout_s, 7);

  ASSERT_TRUE(ParseProbeArgs(
      {"send", "--address=127.0.0.1", "--port", "1", "--bytes", "0"}, &args,
      &error))
      << error;
  EXPECT_EQ(args.bytes, 0);
}

TEST(ProbeArgsTest, Help) {
  for (const std::vector<std::string>& argv :
       std::vector<std::vector<std::string>>{
           {"--help"}, {"-h"}, {"send", "--help"}}) {
    ProbeArgs args;
    std::string error;
    ASSERT_TRUE(ParseProbeArgs(argv, &args, &error)) << error;
    EXPECT_TRUE(args.help);
  }
  EXPECT_THAT(ProbeUsage(), HasSubstr("goodput_mb_per_s="));
}

struct BadCase {
  std::vector<std::string> argv;
  std::string message;  // a part of the error that names what was wrong
};

class ProbeArgsErrorTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(ProbeArgsErrorTest, NamesWhatWasWrong) {
  ProbeArgs args;
  std::string error;
  EXPECT_FALSE(ParseProbeArgs(GetParam().argv, &args, &error));
  EXPECT_THAT(error, HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ProbeArgsErrorTest,
    ::testing::Values(
        BadCase{{}, "'listen' or 'send'"}, BadCase{{"serve"}, "not 'serve'"},
        BadCase{{"listen", "--colour", "red"}, "unknown flag --colour"},
        BadCase{{"listen", "--port"}, "--port needs a value"},
        BadCase{{"listen", "stray"}, "unexpected argument 'stray'"},
        BadCase{{"listen", "--port", "70000"}, "--port: '70000'"},
        BadCase{{"listen", "--port", "12ab"}, "--port: '12ab'"},
        BadCase{{"listen", "--port", ""}, "--port: ''"},
        BadCase{{"listen", "--seconds", "0"}, "--seconds: '0'"},
        BadCase{{"listen", "--seconds", "-1"}, "--seconds: '-1'"},
        BadCase{{"listen", "--seconds", "nan"}, "--seconds: 'nan'"},
        BadCase{{"listen", "--seconds", "1e9"}, "--seconds: '1e9'"},
        BadCase{{"listen", "--timeout_s", "0"}, "--timeout_s: '0'"},
        BadCase{{"listen", "--address="}, "--address: empty"},
        BadCase{{"listen", "--bytes", "5"}, "only a sender"},
        BadCase{
            {"send", "--address", "1.2.3.4", "--port", "9", "--bytes", "-5"},
            "--bytes: '-5'"},
        BadCase{{"send", "--port", "9", "--bytes", "1"}, "--address"},
        BadCase{{"send", "--address", "1.2.3.4", "--bytes", "1"}, "--port"},
        BadCase{{"send", "--address", "1.2.3.4", "--port", "9"},
                "exactly one of --bytes and --seconds"},
        BadCase{{"send", "--address", "1.2.3.4", "--port", "9", "--bytes", "1",
                 "--seconds", "1"},
                "exactly one of --bytes and --seconds"}));

}  // namespace
}  // namespace tern::wan
