#include "global/gs_main.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
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
#include "global/gs_state.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tern/v1/global_server.grpc.pb.h"

namespace tern::global {
namespace {

class GsMainTest : public ::testing::Test {};

TEST_F(GsMainTest, ServesWritesItsPortAndStopsWhenAsked) {
  process::StopRequest stop;
  const std::string dir = process::TestTempDir();
  GsOptions options;
  options.listen = "127.0.0.1:0";
  options.port_file = dir + "/gs.port";
  options.num_datacenters = 2;
  options.log_level = "warn";
  std::remove(options.port_file.c_str());

  int exit_code = -1;
  std::thread gs(
      [&] { exit_code = RunGlobalServer(options, MakeNullLogger(), stop); });

  const int port = process::WaitForPortFile(options.port_file);
  ASSERT_GT(port, 0) << "no port in " << options.port_file << ": "
                    << process::ReadWholeFile(options.port_file);
  EXPECT_THAT(process::FilesWith(dir, ".tmp."), ::testing::IsEmpty());

  // Without gRPC's retries: the test checks what the GS itself answers
  // (a retry of "shutting down" would meet a closed port instead).
  net::ChannelOptions channel_options;
  channel_options.retry.enabled = false;
  const auto channel = net::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                          channel_options);
  EXPECT_EQ(process::HealthCheck(channel), std::string("\x08\x01", 2)) << "SERVING";

  // A data center registers over the wire, and sends round 0, which waits
  // for the other data center: SIGTERM answers it UNAVAILABLE.
  const auto gs_client = tern::v1::GlobalServer::NewStub(channel);
  tern::v1::RegisterRequest registration;
  registration.set_datacenter(0);
  registration.set_num_datacenters(2);
  registration.add_chunk_elements(10);
  registration.set_update_codec(tern::v1::CODEC_FP32);
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(10));
    tern::v1::RegisterResponse reply;
    const grpc::Status status =
        gs_client->Register(&context, registration, &reply);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(reply.next_round(), 0u);
  }
  grpc::Status pending_status;
  std::thread lps([&] {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(20));
    tern::v1::SyncRoundRequest request;
    request.set_datacenter(0);
    request.set_round(0);
    tern::v1::SyncRoundResponse response;
    pending_status = gs_client->SyncRound(&context, request, &response);
  });
  absl::SleepFor(absl::Milliseconds(300));  // the call reaches the GS

  stop.Request("the test is done");
  gs.join();
  lps.join();
  EXPECT_EQ(exit_code, process::kExitOk);
  EXPECT_EQ(pending_status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(pending_status.error_message(),
              ::testing::HasSubstr("shutting down"));
}

TEST_F(GsMainTest, ConfigurationErrorsExitWithOne) {
  const process::StopRequest never;  // the test does not stop it
  GsOptions no_datacenters;
  no_datacenters.listen = "127.0.0.1:0";
  no_datacenters.num_datacenters = 0;
  EXPECT_EQ(RunGlobalServer(no_datacenters, MakeNullLogger(), never),
            process::kExitPermanent);

  GsOptions bad_timeout;
  bad_timeout.listen = "127.0.0.1:0";
  bad_timeout.t_global_s = 0;
  EXPECT_EQ(RunGlobalServer(bad_timeout, MakeNullLogger(), never),
            process::kExitPermanent);

  GsOptions bad_port_file;
  bad_port_file.listen = "127.0.0.1:0";
  bad_port_file.port_file = process::TestTempDir() + "/no/such/dir/gs.port";
  EXPECT_EQ(RunGlobalServer(bad_port_file, MakeNullLogger(), never),
            process::kExitPermanent);

  // --state_dir is made if missing; one under a file cannot be.
  GsOptions bad_state_dir;
  bad_state_dir.listen = "127.0.0.1:0";
  bad_state_dir.state_dir = "/proc/self/status/state";
  EXPECT_EQ(RunGlobalServer(bad_state_dir, MakeNullLogger(), never),
            process::kExitPermanent);

  // A state file written for other data centers is refused at start.
  const std::string dir = process::TestTempDir() + "/other-k";
  std::filesystem::create_directories(dir);
  GsSnapshot two;
  two.num_datacenters = 2;
  two.seed = GsOptions().seed;
  two.registered.assign(2, false);
  two.next_round.assign(2, 0);
  ASSERT_TRUE(WriteGsState(GsStatePath(dir), two, false).ok());
  GsOptions other_k;
  other_k.listen = "127.0.0.1:0";
  other_k.num_datacenters = 3;
  other_k.state_dir = dir;
  EXPECT_EQ(RunGlobalServer(other_k, MakeNullLogger(), never),
            process::kExitPermanent);
}

TEST_F(GsMainTest, AnAddressThatCannotBeBoundIsTransient) {
  const process::StopRequest never;  // the test does not stop it
  GsOptions options;
  options.listen = "192.0.2.1:0";  // TEST-NET-1: no address of this host
  options.insecure = true;          // not loopback: plaintext must be asked for
  options.log_level = "off";
  EXPECT_EQ(RunGlobalServer(options, MakeNullLogger(), never),
            process::kExitTransient);
}

}  // namespace
}  // namespace tern::global
