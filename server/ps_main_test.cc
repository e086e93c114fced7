#include "server/ps_main.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/net/channel.h"
#include "common/process/exit_codes.h"
#include "common/process/stop.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"
#include "tern/v1/parameter_server.grpc.pb.h"

namespace tern::server {
namespace {

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Names in `dir` that contain `part`.
std::vector<std::string> FilesWith(const std::string& dir,
                                   const std::string& part) {
  std::vector<std::string> names;
  if (DIR* handle = opendir(dir.c_str()); handle != nullptr) {
    while (const dirent* entry = readdir(handle)) {
      const std::string name = entry->d_name;
      if (name.find(part) != std::string::npos) names.push_back(name);
    }
    closedir(handle);
  }
  return names;
}

// grpc.health.v1.Health/Check for the whole server, over gRPC's generic
// client (Debian ships no generated health client). The request is an empty
// HealthCheckRequest; the answer's field 1 is the status (1 = SERVING).
std::string HealthCheck(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::GenericStub health_client(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  grpc::Slice empty("");
  const grpc::ByteBuffer request(&empty, 1);
  grpc::ByteBuffer response;
  absl::Notification done;
  grpc::Status status;
  health_client.UnaryCall(&context, "/grpc.health.v1.Health/Check",
                          grpc::StubOptions(), &request, &response,
                          [&](grpc::Status s) {
                            status = std::move(s);
                            done.Notify();
                          });
  done.WaitForNotification();
  if (!status.ok()) return absl::StrCat("error: ", status.error_message());
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return "error: unreadable";
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

class PsMainTest : public ::testing::Test {};

TEST_F(PsMainTest, ServesWritesItsPortAndStopsWhenAsked) {
  process::StopRequest stop;
  const std::string dir = TempDir();
  PsOptions options;
  options.listen = "127.0.0.1:0";
  options.port_file = dir + "/ps-0.port";
  options.num_workers = 1;
  options.log_level = "warn";
  std::remove(options.port_file.c_str());

  int exit_code = -1;
  std::thread shard(
      [&] { exit_code = RunParameterServer(options, MakeNullLogger(), stop); });

  int port = 0;
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (port == 0 && absl::Now() < give_up) {
    const std::string text = ReadFile(options.port_file);
    if (!text.empty()) {
      ASSERT_EQ(text.back(), '\n');
      ASSERT_TRUE(absl::SimpleAtoi(text.substr(0, text.size() - 1), &port))
          << text;
    } else {
      absl::SleepFor(absl::Milliseconds(10));
    }
  }
  ASSERT_GT(port, 0) << "no port in " << options.port_file;
  EXPECT_THAT(FilesWith(dir, ".tmp."), ::testing::IsEmpty());

  const auto channel = net::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                          net::ChannelOptions());
  EXPECT_EQ(HealthCheck(channel), std::string("\x08\x01", 2)) << "SERVING";

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
  bad_port_file.port_file = TempDir() + "/no/such/dir/ps.port";
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
