// Test support: a fresh, empty directory for the running gtest test, named
// after it under the test's temporary directory.
#ifndef TERN_COMMON_TEST_DIR_H_
#define TERN_COMMON_TEST_DIR_H_

#include <algorithm>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace tern {

inline std::string FreshTestDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "_" + info->name();
  std::replace(name.begin(), name.end(), '/', '_');
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace tern

#endif  // TERN_COMMON_TEST_DIR_H_
