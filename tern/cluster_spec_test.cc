#include "tern/cluster_spec.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseClusterSpecTest, ReadsShardsAndWorkers) {
  auto spec = ParseClusterSpec(
      R"({"shards": ["ps-0:50051", "[::1]:7000"], "num_workers": 4})", "s.json");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->shards(), ElementsAre("ps-0:50051", "[::1]:7000"));
  EXPECT_EQ(spec->num_workers(), 4u);
}

TEST(ParseClusterSpecTest, RejectsBadJsonNamingTheSource) {
  auto spec = ParseClusterSpec(R"({"shards": ["a:1"], )", "bad.json");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(spec.status().message(), HasSubstr("bad.json"));
}

TEST(ParseClusterSpecTest, RejectsUnknownFields) {
  auto spec =
      ParseClusterSpec(R"({"shards": ["a:1"], "num_worker": 2})", "s.json");
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(), HasSubstr("num_worker"));
}

TEST(ParseClusterSpecTest, RejectsMissingOrBadValues) {
  struct Case {
    const char* json;
    const char* expected;
  };
  for (const Case& c : {
           Case{R"({"num_workers": 2})", "\"shards\""},
           Case{R"({"shards": [], "num_workers": 2})", "\"shards\""},
           Case{R"({"shards": ["a:1"]})", "\"num_workers\""},
           Case{R"({"shards": ["a:1"], "num_workers": 0})", "\"num_workers\""},
           Case{R"({"shards": ["nohost"], "num_workers": 1})", "shards[0]"},
           Case{R"({"shards": ["a:1", ":5"], "num_workers": 1})", "shards[1]"},
           Case{R"({"shards": ["a:0"], "num_workers": 1})", "shards[0]"},
           Case{R"({"shards": ["a:65536"], "num_workers": 1})", "shards[0]"},
           Case{R"({"shards": ["a:x"], "num_workers": 1})", "shards[0]"},
           Case{R"({"shards": ["a:1"], "num_workers": -1})", "s.json"},
       }) {
    auto spec = ParseClusterSpec(c.json, "s.json");
    ASSERT_FALSE(spec.ok()) << c.json;
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(spec.status().message(), HasSubstr(c.expected)) << c.json;
    EXPECT_THAT(spec.status().message(), HasSubstr("s.json")) << c.json;
  }
}

TEST(LoadClusterSpecTest, ReadsAFile) {
  const std::string path =
      std::string(std::getenv("TEST_TMPDIR")) + "/cluster.json";
  {
    std::ofstream out(path);
    out << R"({"shards": ["h:1", "h:2", "h:3"], "num_workers": 5})";
  }
  auto spec = LoadClusterSpec(path);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->shards_size(), 3);
  EXPECT_EQ(spec->num_workers(), 5u);
}

TEST(LoadClusterSpecTest, MissingFileIsNotFoundNamingThePath) {
  auto spec = LoadClusterSpec("/nonexistent/tern/cluster.json");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(spec.status().message(),
              HasSubstr("/nonexistent/tern/cluster.json"));
}

v1::ClusterSpec ThreeShardsFourWorkers() {
  v1::ClusterSpec spec;
  spec.add_shards("ps-0.tern:50051");
  spec.add_shards("ps-1.tern:50052");
  spec.add_shards("ps-2.tern:50053");
  spec.set_num_workers(4);
  return spec;
}

TEST(ApplyClusterSpecTest, ShardTakesCountsAndItsPort) {
  server::PsOptions options;
  options.shard_index = 1;
  ASSERT_TRUE(
      ApplyClusterSpec(ThreeShardsFourWorkers(), "s.json", {}, &options).ok());
  EXPECT_EQ(options.num_shards, 3u);
  EXPECT_EQ(options.num_workers, 4u);
  EXPECT_EQ(options.listen, "0.0.0.0:50052");
}

TEST(ApplyClusterSpecTest, ExplicitShardFlagsWin) {
  server::PsOptions options;
  options.shard_index = 7;  // would be out of range, but --listen is given
  options.listen = "127.0.0.1:0";
  options.num_workers = 9;
  ASSERT_TRUE(ApplyClusterSpec(ThreeShardsFourWorkers(), "s.json",
                               {"listen", "num_workers"}, &options)
                  .ok());
  EXPECT_EQ(options.listen, "127.0.0.1:0");
  EXPECT_EQ(options.num_workers, 9u);
  EXPECT_EQ(options.num_shards, 3u);
}

TEST(ApplyClusterSpecTest, ShardIndexOutsideTheSpecIsAnError) {
  server::PsOptions options;
  options.shard_index = 3;
  absl::Status status =
      ApplyClusterSpec(ThreeShardsFourWorkers(), "s.json", {}, &options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("--shard_index=3"));
  EXPECT_THAT(status.message(), HasSubstr("s.json"));
}

TEST(ApplyClusterSpecTest, WorkerTakesShardListAndCount) {
  worker::WorkerOptions options;
  ASSERT_TRUE(
      ApplyClusterSpec(ThreeShardsFourWorkers(), "s.json", {}, &options).ok());
  EXPECT_THAT(options.ps, ElementsAre("ps-0.tern:50051", "ps-1.tern:50052",
                                      "ps-2.tern:50053"));
  EXPECT_EQ(options.num_workers, 4u);
}

TEST(ApplyClusterSpecTest, ExplicitWorkerFlagsWin) {
  worker::WorkerOptions options;
  options.ps = {"localhost:1"};
  options.num_workers = 2;
  ASSERT_TRUE(ApplyClusterSpec(ThreeShardsFourWorkers(), "s.json",
                               {"ps", "num_workers"}, &options)
                  .ok());
  EXPECT_THAT(options.ps, ElementsAre("localhost:1"));
  EXPECT_EQ(options.num_workers, 2u);
}

}  // namespace
}  // namespace tern
