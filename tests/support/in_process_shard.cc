#include "tests/support/in_process_shard.h"

#include "common/logging.h"
#include "grpc/grpc.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace tern::worker {

void GrpcEnvironment::SetUp() { grpc_init(); }
void GrpcEnvironment::TearDown() { grpc_shutdown(); }

InProcessShard::InProcessShard(uint32_t shard, uint32_t num_shards,
                               uint32_t num_workers,
                               absl::Duration barrier_timeout) {
  server::AggregatorOptions options;
  options.shard_index = shard;
  options.num_shards = num_shards;
  options.num_workers = num_workers;
  options.barrier_timeout = barrier_timeout;
  aggregator_ = *server::Aggregator::Create(options, MakeNullLogger());
  service_ =
      std::make_unique<server::PsService>(aggregator_.get(), MakeNullLogger());
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port_);
  builder.RegisterService(service_.get());
  builder.SetMaxReceiveMessageSize(64 << 20);
  builder.SetMaxSendMessageSize(64 << 20);
  server_ = builder.BuildAndStart();
  ticker_ = std::thread([this] {
    while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(20))) {
      (void)aggregator_->ExpireWaits(absl::Now());
    }
  });
}

InProcessShard::~InProcessShard() {
  stop_.Notify();
  ticker_.join();
  aggregator_->Close(absl::UnavailableError("test shard stops"));
  server_->Shutdown(gpr_now(GPR_CLOCK_REALTIME));
}

}  // namespace tern::worker
