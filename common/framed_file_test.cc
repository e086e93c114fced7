// common/framed_file.h: a file written is read back as it was; a damaged
// one is refused; a link at the temporary name is not followed (the rule of
// common/replace_file.h, which writes it).
#include "common/framed_file.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern {
namespace {

using ::testing::HasSubstr;

constexpr FramedFileOptions kOptions{"TESTFIL1", "test file", false};

std::string TmpDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return tmp == nullptr ? "/tmp" : tmp;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(FramedFileTest, ReadsBackWhatWasWritten) {
  const std::string path = TmpDir() + "/sub/dir/file";
  ASSERT_TRUE(WriteFramedFile(path, "hello", kOptions).ok());
  absl::StatusOr<std::string> read = ReadFramedFile(path, kOptions);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "hello");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(FramedFileTest, DamageIsDataLoss) {
  const std::string path = TmpDir() + "/damaged";
  ASSERT_TRUE(WriteFramedFile(path, "hello", kOptions).ok());
  std::string bytes = ReadAll(path);
  bytes[17] ^= 1;  // in the message
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  absl::Status status = ReadFramedFile(path, kOptions).status();
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_TRUE(absl::IsNotFound(
      ReadFramedFile(TmpDir() + "/absent", kOptions).status()));
}

TEST(FramedFileTest, ALinkAtTheTemporaryNameIsNotFollowed) {
  const std::string target = TmpDir() + "/precious";
  std::ofstream(target) << "keep";
  const std::string path = TmpDir() + "/state";
  std::filesystem::create_symlink(target, path + ".tmp");
  absl::Status status = WriteFramedFile(path, "hello", kOptions);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr(path + ".tmp"));
  EXPECT_EQ(ReadAll(target), "keep");
  // The link is gone with the failed write; the next one goes through.
  EXPECT_FALSE(std::filesystem::is_symlink(path + ".tmp"));
  ASSERT_TRUE(WriteFramedFile(path, "hello", kOptions).ok());
  EXPECT_EQ(*ReadFramedFile(path, kOptions), "hello");
  EXPECT_EQ(ReadAll(target), "keep");
}

}  // namespace
}  // namespace tern
