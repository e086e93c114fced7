#include "common/flags/flags.h"

#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace tern::flags {
namespace {

// Parses `args` (after the program name); the parse error's text, or "".
std::string Parse(CLI::App* app, std::vector<std::string> args) {
  std::vector<const char*> argv = {"test"};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  try {
    app->parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& error) {
    return error.what();
  }
  return "";
}

TEST(FlagTest, ReadsTheCommandLineThenTheEnvironmentThenTheDefault) {
  ::unsetenv("TERN_SOME_NUMBER");
  {
    CLI::App app;
    int value = 7;
    Flag(&app, "some_number", &value, "help");
    EXPECT_EQ(Parse(&app, {}), "");
    EXPECT_EQ(value, 7);
  }
  ::setenv("TERN_SOME_NUMBER", "8", 1);
  {
    CLI::App app;
    int value = 7;
    Flag(&app, "some_number", &value, "help");
    EXPECT_EQ(Parse(&app, {}), "");
    EXPECT_EQ(value, 8);
  }
  {
    CLI::App app;
    int value = 7;
    Flag(&app, "some_number", &value, "help");
    EXPECT_EQ(Parse(&app, {"--some_number=9"}), "");
    EXPECT_EQ(value, 9);
  }
  ::unsetenv("TERN_SOME_NUMBER");
}

TEST(SwitchTest, TakesABareFlagOrAValue) {
  CLI::App app;
  bool on = false;
  Switch(&app, "on", &on, "help");
  EXPECT_EQ(Parse(&app, {"--on"}), "");
  EXPECT_TRUE(on);
  CLI::App again;
  Switch(&again, "on", &on, "help");
  EXPECT_EQ(Parse(&again, {"--on=false"}), "");
  EXPECT_FALSE(on);
}

struct Case {
  std::string value;
  bool accepted;
};

// Runs `validator` on each case's value as the flag --x.
void ExpectChecks(const CLI::Validator& validator,
                  const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    CLI::App app;
    std::string value;
    app.add_option("--x", value)->check(validator);
    const std::string error = Parse(&app, {"--x=" + c.value});
    EXPECT_EQ(error.empty(), c.accepted) << "'" << c.value << "': " << error;
    if (!c.accepted) {
      EXPECT_NE(error.find("--x"), std::string::npos) << error;
    }
  }
}

TEST(ValidatorTest, HostPort) {
  ExpectChecks(HostPort(), {{"localhost:50051", true},
                            {"[::1]:0", true},
                            {"10.0.0.1:", false},
                            {":50051", false},
                            {"localhost", false}});
  EXPECT_TRUE(IsHostPort("a:1"));
  EXPECT_FALSE(IsHostPort("a"));
}

TEST(ValidatorTest, FinitePositive) {
  ExpectChecks(FinitePositive(), {{"0.5", true},
                                  {"60", true},
                                  {"0", false},
                                  {"-1", false},
                                  {"inf", false},
                                  {"nan", false},
                                  {"x", false}});
}

TEST(ValidatorTest, FiniteInAndBetween) {
  const double inf = std::numeric_limits<double>::infinity();
  ExpectChecks(FiniteIn(0, 1),
               {{"0", true}, {"1", true}, {"1.01", false}, {"nan", false}});
  ExpectChecks(FiniteIn(0, inf), {{"1e9", true}, {"inf", false}});
  ExpectChecks(FiniteBetween(0, 1),
               {{"0.5", true}, {"0", false}, {"1", false}, {"nan", false}});
}

TEST(ValidatorTest, LogLevelNamesTheLevels) {
  ExpectChecks(LogLevel(), {{"info", true},
                            {"off", true},
                            {"trace", true},
                            {"loud", false},
                            {"", false}});
  CLI::App app;
  std::string level;
  app.add_option("--log_level", level)->check(LogLevel());
  const std::string error = Parse(&app, {"--log_level=loud"});
  EXPECT_NE(error.find("unknown log level 'loud'"), std::string::npos) << error;
}

// MiB to bytes for gRPC's int limits; the largest flag value still fits.
TEST(MessageBytesTest, ConvertsMebibytesAndClampsToTheLimit) {
  EXPECT_EQ(MessageBytes(1), 1 << 20);
  EXPECT_EQ(MessageBytes(64), 64 << 20);
  EXPECT_EQ(MessageBytes(kMaxMessageMb), 2147483647 - (1 << 20) + 1);
  EXPECT_EQ(MessageBytes(kMaxMessageMb + 1), MessageBytes(kMaxMessageMb));
  EXPECT_EQ(MessageBytes(UINT32_MAX), MessageBytes(kMaxMessageMb));
}

// For options built in code: each bad value is refused naming its flag.
TEST(CheckMessageAndLogFlagsTest, NamesTheFlag) {
  EXPECT_TRUE(CheckMessageAndLogFlags(1, "info").ok());
  EXPECT_TRUE(CheckMessageAndLogFlags(kMaxMessageMb, "off").ok());
  for (uint32_t mb : {0u, kMaxMessageMb + 1}) {
    const absl::Status status = CheckMessageAndLogFlags(mb, "info");
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find("--max_message_mb=" + std::to_string(mb)),
              absl::string_view::npos)
        << status;
  }
  const absl::Status status = CheckMessageAndLogFlags(64, "loud");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--log_level: unknown log level 'loud'"),
            absl::string_view::npos)
      << status;
}

TEST(CheckFiniteTest, NamesTheFlagAndTheValue) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(CheckFinitePositive("join_timeout_s", 0.5).ok());
  EXPECT_TRUE(CheckFiniteNonNegative("straggler_warn_s", 0).ok());
  EXPECT_TRUE(CheckFiniteNonNegative("straggler_warn_s", 7).ok());
  struct Case {
    absl::Status (*check)(absl::string_view, double);
    const char* bound;
    std::vector<double> refused;
  };
  for (const Case& c :
       {Case{CheckFinitePositive, "> 0", {0, -1, inf, -inf, nan}},
        Case{CheckFiniteNonNegative, ">= 0", {-1e-9, inf, nan}}}) {
    for (const double bad : c.refused) {
      const absl::Status status = c.check("x_s", bad);
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
      EXPECT_EQ(
          status.message(),
          absl::StrCat("--x_s=", bad, " is not a finite number ", c.bound));
    }
  }
}

TEST(ValidatorTest, NonEmpty) {
  ExpectChecks(NonEmpty(), {{"a", true}, {"", false}});
}

}  // namespace
}  // namespace tern::flags
