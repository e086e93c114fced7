#include "tests/support/in_process_shard.h"

#include "common/logging.h"
#include "grpc/grpc.h"

namespace tern::worker {

void GrpcEnvironment::SetUp() { grpc_init(); }
void GrpcEnvironment::TearDown() { grpc_shutdown(); }

InProcessShard::InProcessShard(uint32_t shard, uint32_t num_shards,
                               uint32_t num_workers,
                               absl::Duration barrier_timeout,
                               std::optional<uint64_t> catch_up_bytes) {
  server::AggregatorOptions options;
  options.shard_index = shard;
  options.num_shards = num_shards;
  options.num_workers = num_workers;
  options.barrier_timeout = barrier_timeout;
  // The barrier's expiry rule alone: the trainer tests restart workers
  // across expiries and expect the step to stay open for them.
  // --on_worker_loss has its own tests (server/aggregator_test.cc,
  // tests/worker_loss_test.sh).
  options.worker_loss_timeout = absl::InfiniteDuration();
  if (catch_up_bytes.has_value()) options.catch_up_bytes = *catch_up_bytes;
  aggregator_ = *server::Aggregator::Create(options, MakeNullLogger());
  service_ =
      std::make_unique<server::PsService>(aggregator_.get(), MakeNullLogger());
  net::ServerOptions server_options;
  server_options.listen = "127.0.0.1:0";
  server_options.max_message_bytes = 64 << 20;
  server_ = *net::Server::Start(server_options,
                                {{service_.get(), "tern.v1.ParameterServer"}});
  port_ = server_->port();
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
  server_->Shutdown(absl::ZeroDuration());
}

}  // namespace tern::worker
