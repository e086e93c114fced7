#include "server/run_config_check.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/codec_registry.h"

namespace tern::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

JoinRequest JoinOfRun(const std::string& run_id) {
  JoinRequest join;
  join.worker_id = 1;
  join.config.run_id = run_id;
  join.config.num_workers = 2;
  join.config.num_shards = 1;
  return join;
}

// A shard started with --run_id refuses a join of another run before it
// can configure anything, without naming the run it serves.
TEST(CheckJoinOptionsTest, AJoinOfAnotherRunIsRefusedWithoutNamingOurs) {
  ShardLimits limits{/*shard_index=*/0, /*num_shards=*/1, /*num_workers=*/2,
                     /*max_message_bytes=*/64ull << 20, kernels::MakeCodec,
                     /*run_id=*/"secret-run"};
  const absl::Status refused = CheckJoinOptions(JoinOfRun("other"), limits);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(refused.message(), HasSubstr("joins another run"));
  EXPECT_THAT(refused.message(), Not(HasSubstr("secret-run")));
  EXPECT_TRUE(CheckJoinOptions(JoinOfRun("secret-run"), limits).ok());

  limits.run_id.clear();  // no --run_id: the first joiner names the run
  EXPECT_TRUE(CheckJoinOptions(JoinOfRun("other"), limits).ok());
}

}  // namespace
}  // namespace tern::server
