// common/replace_file.h: the new bytes replace the old whole, and a link
// planted at the temporary name is refused and removed, never followed.
#include "common/replace_file.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/test_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern {
namespace {

using ::testing::HasSubstr;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(ReplaceFileTest, NewBytesReplaceTheOld) {
  const std::string path = FreshTestDir() + "/file";
  for (const bool sync : {false, true}) {
    ReplaceFileOptions options;
    options.sync = sync;
    ASSERT_TRUE(ReplaceFile(path, "a longer first text", options).ok());
    ASSERT_TRUE(ReplaceFile(path, "second", options).ok());
    EXPECT_EQ(ReadAll(path), "second");
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  }
}

TEST(ReplaceFileTest, AWriterThatFailsLeavesTheFileAsItWas) {
  const std::string path = FreshTestDir() + "/kept";
  ASSERT_TRUE(ReplaceFile(path, "old", {}).ok());
  ReplaceFileOptions options;
  options.per_process_temporary = true;
  const std::string temporary = absl::StrCat(path, ".tmp.", ::getpid());
  std::string seen;
  const absl::Status status = ReplaceFileBy(
      path,
      [&seen](const std::string& name) {
        seen = name;
        std::ofstream(name) << "half";
        return absl::UnavailableError("the writer gave up");
      },
      options);
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_EQ(seen, temporary);
  EXPECT_EQ(ReadAll(path), "old");
  EXPECT_FALSE(std::filesystem::exists(temporary));
}

TEST(ReplaceFileTest, ALinkAtTheTemporaryNameIsRefusedAndRemoved) {
  const std::string dir = FreshTestDir();
  const std::string target = dir + "/precious";
  std::ofstream(target) << "keep";
  const std::string path = dir + "/replaced";
  std::filesystem::create_symlink(target, path + ".tmp");
  absl::Status status = ReplaceFile(path, "new", {});
  EXPECT_TRUE(absl::IsInternal(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("cannot create '" + path + ".tmp'"));
  EXPECT_EQ(ReadAll(target), "keep");
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::is_symlink(path + ".tmp"));
  ASSERT_TRUE(ReplaceFile(path, "new", {}).ok());
  EXPECT_EQ(ReadAll(path), "new");

  // The check before long work finds (and removes) one the same way.
  std::filesystem::create_symlink(target, path + ".tmp");
  EXPECT_FALSE(CheckReplaceable(path, {}).ok());
  EXPECT_FALSE(std::filesystem::is_symlink(path + ".tmp"));
  EXPECT_TRUE(CheckReplaceable(path, {}).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(ReadAll(target), "keep");
}

TEST(ReplaceFileTest, AMissingDirectoryIsNamed) {
  const std::string path = FreshTestDir() + "/no/such/dir/file";
  const absl::Status status = ReplaceFile(path, "x", {});
  EXPECT_THAT(status.message(), HasSubstr(path + ".tmp"));
  EXPECT_THAT(status.message(), HasSubstr("No such file or directory"));
}

}  // namespace
}  // namespace tern
