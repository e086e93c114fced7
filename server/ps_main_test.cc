#include "server/ps_main.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/net/channel.h"
#include "common/process/exit_codes.h"
#include "common/process/role_test_support.h"
#include "common/process/stop.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tern/v1/parameter_server.grpc.pb.h"

namespace tern::server {
namespace {

class PsMainTest : public ::testing::Test {};

TEST_F(PsMainTest, ServesWritesItsPortAndStopsWhenAsked) {
  process::StopRequest stop;
  const std::string dir = process::TestTempDir();
  PsOptions options;
  options.listen = "127.0.0.1:0";
  options.port_file = dir + "/ps-0.port";
  options.num_workers = 1;
  options.log_level = "warn";
  std::remove(options.port_file.c_str());

  int exit_code = -1;
  std::thread shard(
      [&] { exit_code = RunParameterServer(options, MakeNullLogger(), stop); });

  const int port = process::WaitForPortFile(options.port_file);
  ASSERT_GT(port, 0) << "no port in " << options.port_file << ": "
                    << process::ReadWholeFile(options.port_file);
  EXPECT_THAT(process::FilesWith(dir, ".tmp."), ::testing::IsEmpty());

  const auto channel = net::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                          net::ChannelOptions());
  EXPECT_EQ(process::HealthCheck(channel), std::string("\x08\x01", 2)) << "SERVING";

  // A worker joins over the wire.
  const auto shard_client = tern::v1::ParameterServer::NewStub(channel);
  tern::v1::JoinRequest join;
  join.set_worker_id(0);
  tern::v1::RunConfig* config = join.mutable_config();
  config->set_run_id("main-test");
  config->set_num_workers(1);
  config->set_num_shards(1);
  config->set_partition_bytes(1 << 20);
  config->set_codec(tern::v1::CODEC_FP32);
  config->set_push_layout(tern::v1::LAYOUT_RAW);
  config->set_pull_layout(tern::v1::LAYOUT_RAW);
  tern::v1::TensorSpec* tensor = join.mutable_param_spec()->add_tensors();
  tensor->set_name("w");
  tensor->add_shape(10);
  tensor->set_dtype(tern::v1::DTYPE_FLOAT32);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  tern::v1::JoinResponse joined;
  const grpc::Status status = shard_client->Join(&context, join, &joined);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(joined.chunk_keys_size(), 1);

  stop.Request("the test is done");
  shard.join();
  EXPECT_EQ(exit_code, process::kExitOk);
}

TEST_F(PsMainTest, ExitsTransientlyWhenWorkersDoNotJoinInTime) {
  const process::StopRequest never;  // the test does not stop it
  PsOptions options;
  options.listen = "127.0.0.1:0";
  options.num_workers = 2;
  options.join_timeout_s = 0.3;
  options.log_level = "off";
  const absl::Time start = absl::Now();
  EXPECT_EQ(RunParameterServer(options, MakeNullLogger(), never),
            process::kExitTransient);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
}

TEST_F(PsMainTest, ConfigurationErrorsExitWithOne) {
  const process::StopRequest never;  // the test does not stop it
  PsOptions no_workers;
  no_workers.listen = "127.0.0.1:0";
  no_workers.num_workers = 0;
  EXPECT_EQ(RunParameterServer(no_workers, MakeNullLogger(), never),
            process::kExitPermanent);

  PsOptions bad_shard;
  bad_shard.listen = "127.0.0.1:0";
  bad_shard.shard_index = 3;
  bad_shard.num_shards = 2;
  EXPECT_EQ(RunParameterServer(bad_shard, MakeNullLogger(), never),
            process::kExitPermanent);

  PsOptions bad_port_file;
  bad_port_file.listen = "127.0.0.1:0";
  bad_port_file.port_file = process::TestTempDir() + "/no/such/dir/ps.port";
  EXPECT_EQ(RunParameterServer(bad_port_file, MakeNullLogger(), never),
            process::kExitPermanent);

  // --state_dir is made if missing; one under a file cannot be.
  PsOptions bad_state_dir;
  bad_state_dir.listen = "127.0.0.1:0";
  bad_state_dir.state_dir = "/proc/self/status/state";
  EXPECT_EQ(RunParameterServer(bad_state_dir, MakeNullLogger(), never),
            process::kExitPermanent);
}

}  // namespace
}  // namespace tern::server
