// common/framed_file.h: a file written is read back as it was, and a
// damaged or missing one is refused. (How it is replaced, links planted at
// the temporary's name included, is common/replace_file_test.cc's.)
#include "common/framed_file.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "common/test_dir.h"
#include "gtest/gtest.h"

namespace tern {
namespace {

constexpr FramedFileOptions kOptions{"TESTFIL1", "test file", false};

TEST(FramedFileTest, ReadsBackWhatWasWritten) {
  const std::string path = FreshTestDir() + "/sub/dir/file";
  ASSERT_TRUE(WriteFramedFile(path, "hello", kOptions).ok());
  absl::StatusOr<std::string> read = ReadFramedFile(path, kOptions);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "hello");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(FramedFileTest, DamageIsDataLoss) {
  const std::string dir = FreshTestDir();
  const std::string path = dir + "/damaged";
  ASSERT_TRUE(WriteFramedFile(path, "hello", kOptions).ok());
  {
    // One bit of the message (after 8 bytes of magic, 8 of length).
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(17);
    const char byte = static_cast<char>(file.get() ^ 1);
    file.seekp(17);
    file.put(byte);
  }
  absl::Status status = ReadFramedFile(path, kOptions).status();
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_TRUE(
      absl::IsNotFound(ReadFramedFile(dir + "/absent", kOptions).status()));
}

}  // namespace
}  // namespace tern
