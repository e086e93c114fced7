// Test-only helpers for the roles' flag tests (server/ps_flags_test.cc,
// global/gs_flags_test.cc, worker/worker_flags_test.cc, ...): an
// environment variable set for one test, and the check that a list of
// flags is registered as flags.h's Flag registers them.
#ifndef TERN_COMMON_FLAGS_FLAGS_TESTING_H_
#define TERN_COMMON_FLAGS_FLAGS_TESTING_H_

#include <cstdlib>
#include <initializer_list>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "gtest/gtest.h"

namespace tern::flags {

// Sets an environment variable for the lifetime of the object, and unsets
// it at the end, also when an assertion ends the test early.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() { ::unsetenv(name_.c_str()); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
};

// Expects each of `names` to be a flag --name of `app` whose --help names
// its environment variable TERN_<NAME>.
inline void ExpectFlagsWithEnvironment(
    const CLI::App& app, std::initializer_list<const char*> names) {
  const std::string help = app.help();
  for (const char* name : names) {
    const std::string flag = std::string("--") + name;
    EXPECT_NE(app.get_option_no_throw(flag), nullptr) << flag;
    const std::string env = "TERN_" + absl::AsciiStrToUpper(name);
    EXPECT_NE(help.find(env), std::string::npos) << env;
  }
}

}  // namespace tern::flags

#endif  // TERN_COMMON_FLAGS_FLAGS_TESTING_H_
