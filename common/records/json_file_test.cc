#include "common/records/json_file.h"

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern::records {
namespace {

using ::testing::HasSubstr;

TEST(JsonFileTest, WritesAndReadsBack) {
  const std::string path = ::testing::TempDir() + "/json_file_test.json";
  const nlohmann::ordered_json json = {
      {"b", 1}, {"a", "x\"y"}, {"nested", {{"n", nullptr}}}};
  ASSERT_TRUE(WriteJsonFile(path, json).ok());
  absl::StatusOr<nlohmann::json> read = ReadJsonFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ((*read)["b"], 1);
  EXPECT_EQ((*read)["a"], "x\"y");
  EXPECT_TRUE((*read)["nested"]["n"].is_null());
  // Key order is the writer's, and the file ends with a newline.
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  EXPECT_LT(text.find("\"b\""), text.find("\"a\""));
  EXPECT_EQ(text.back(), '\n');
}

TEST(JsonFileTest, MissingAndBadFilesAreStatuses) {
  const std::string dir = ::testing::TempDir();
  EXPECT_EQ(ReadJsonFile(dir + "/no_such.json").status().code(),
            absl::StatusCode::kNotFound);
  for (const char* text : {"", "{", "[1, 2]", "3", "{\"a\": 1} trailing"}) {
    SCOPED_TRACE(text);
    const std::string path = dir + "/bad.json";
    std::ofstream(path) << text;
    absl::StatusOr<nlohmann::json> read = ReadJsonFile(path);
    EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(read.status().message(), HasSubstr(path));
  }
  EXPECT_EQ(WriteJsonFile(dir + "/no/such/dir/x.json", {{"a", 1}}).code(),
            absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace tern::records
