// Issue 14 over the wire: pushes held at the shard's barrier, duplicates
// of a counted push among them, hold no payload while they wait, and every
// one of them still gets the step's answer.
//
// gRPC keeps a call's request until the call is answered. The test gives
// the service's PushPull an allocator of its own (gRPC's MessageAllocator
// API; PushPull is served raw, so the requests are byte buffers), so that
// it can look at the requests gRPC holds while the calls wait at the
// barrier.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/net/channel.h"
#include "common/net/server.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/message_allocator.h"
#include "gtest/gtest.h"
#include "kernels/codec_registry.h"
#include "server/aggregator.h"
#include "server/ps_service.h"
#include "server/wire.h"

namespace tern::server {
namespace {

using PushMessages = grpc::MessageHolder<grpc::ByteBuffer, grpc::ByteBuffer>;

// The PushPull requests and responses of the service, each call's in a
// holder that lives until gRPC releases it, after the call is done.
class RecordingAllocator
    : public grpc::MessageAllocator<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  PushMessages* AllocateMessages() override {
    auto holder = std::make_unique<Holder>(this);
    Holder* const messages = holder.get();
    absl::MutexLock lock(&mu_);
    live_.emplace(messages, std::move(holder));
    return messages;
  }

  // The requests gRPC holds, and the bytes in them. Read only while no
  // call is being received: gRPC does not know the test reads.
  size_t live() const {
    absl::MutexLock lock(&mu_);
    return live_.size();
  }
  uint64_t HeldRequestBytes() const {
    absl::MutexLock lock(&mu_);
    uint64_t bytes = 0;
    for (const auto& [messages, holder] : live_) {
      bytes += messages->request()->Length();
    }
    return bytes;
  }

 private:
  class Holder : public PushMessages {
   public:
    explicit Holder(RecordingAllocator* owner) : owner_(owner) {
      set_request(&request_);
      set_response(&response_);
    }
    // gRPC's last word on a call: destroys this holder.
    void Release() override { owner_->Destroy(this); }

   private:
    RecordingAllocator* const owner_;
    grpc::ByteBuffer request_;
    grpc::ByteBuffer response_;
  };

  void Destroy(Holder* messages) {
    std::unique_ptr<Holder> holder;  // destroyed after the lock is released
    absl::MutexLock lock(&mu_);
    const auto it = live_.find(messages);
    holder = std::move(it->second);
    live_.erase(it);
  }

  mutable absl::Mutex mu_;
  absl::flat_hash_map<Holder*, std::unique_ptr<Holder>> live_
      ABSL_GUARDED_BY(mu_);
};

// One chunk of 64 Ki elements: 256 KiB of fp32 per push.
constexpr uint64_t kElements = 64 << 10;

tern::v1::JoinRequest MakeJoin(uint32_t worker) {
  tern::v1::JoinRequest join;
  join.set_worker_id(worker);
  tern::v1::RunConfig* config = join.mutable_config();
  config->set_run_id("pending-test");
  config->set_num_workers(2);
  config->set_num_shards(1);
  config->set_partition_bytes(1 << 20);
  config->set_codec(tern::v1::CODEC_FP32);
  config->set_push_layout(tern::v1::LAYOUT_RAW);
  config->set_pull_layout(tern::v1::LAYOUT_RAW);
  tern::v1::TensorSpec* tensor = join.mutable_param_spec()->add_tensors();
  tensor->set_name("w");
  tensor->add_shape(static_cast<int64_t>(kElements));
  tensor->set_dtype(tern::v1::DTYPE_FLOAT32);
  return join;
}

std::unique_ptr<kernels::Codec> Fp32() {
  return *kernels::MakeCodec(kernels::CodecOptions{kernels::CodecId::kFp32,
                                                   0.0f, kernels::Layout::kRaw,
                                                   kernels::Layout::kRaw});
}

// Worker `worker`'s push of step 0: every element `value`.
tern::v1::PushPullRequest MakePush(uint32_t worker, float value) {
  tern::v1::PushPullRequest push;
  push.set_worker_id(worker);
  push.set_step(0);
  tern::v1::ChunkPayload* chunk = push.add_chunks();
  chunk->set_chunk_key(0);
  const absl::StatusOr<kernels::Payload> payload =
      Fp32()->Encode(std::vector<float>(kElements, value), {});
  EXPECT_TRUE(payload.ok()) << payload.status();
  PayloadToWire(*payload, chunk->mutable_payload());
  return push;
}

// A PushPull in flight on the client's side.
struct PendingPush {
  grpc::ClientContext context;
  tern::v1::PushPullResponse response;
  grpc::Status status;
  absl::Notification done;
};

class PendingPushTest : public ::testing::Test {
 protected:
  void SetUp() override {
    AggregatorOptions options;
    options.num_workers = 2;
    options.barrier_timeout = absl::Seconds(30);
    aggregator_ = *Aggregator::Create(options, MakeNullLogger());
    service_ = std::make_unique<PsService>(aggregator_.get(), MakeNullLogger(),
                                           net::PeerPolicy{});
    service_->SetPushPullAllocator(&allocator_);
    net::ServerOptions server_options;
    server_options.listen = "127.0.0.1:0";
    absl::StatusOr<std::unique_ptr<net::Server>> server = net::Server::Start(
        server_options, {{service_.get(), "tern.v1.ParameterServer"}});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    shard_ = tern::v1::ParameterServer::NewStub(net::CreateChannel(
        absl::StrCat("127.0.0.1:", server_->port()), net::ChannelOptions{}));
  }

  void TearDown() override {
    // Answers whatever still waits, should the test have failed midway,
    // before the calls' client state goes.
    if (aggregator_ != nullptr)
      aggregator_->Close(absl::UnavailableError("end"));
    for (const auto& call : pending_) {
      call->done.WaitForNotificationWithTimeout(absl::Seconds(20));
    }
    if (server_ != nullptr) server_->Shutdown(absl::ZeroDuration());
  }

  static void SetDeadline(grpc::ClientContext* context) {
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::seconds(20));
  }

  // Joins both workers (Join is a barrier).
  void JoinBoth() {
    std::vector<grpc::Status> statuses(2);
    std::vector<std::thread> workers;
    for (uint32_t w = 0; w < 2; ++w) {
      workers.emplace_back([&, w] {
        grpc::ClientContext context;
        SetDeadline(&context);
        tern::v1::JoinResponse joined;
        statuses[w] = shard_->Join(&context, MakeJoin(w), &joined);
      });
    }
    for (std::thread& worker : workers) worker.join();
    for (const grpc::Status& status : statuses) {
      ASSERT_TRUE(status.ok()) << status.error_message();
    }
  }

  // Sends `push` (which must outlive the call); the call stays the
  // fixture's, so that TearDown can wait for it.
  PendingPush* PushAsync(const tern::v1::PushPullRequest& push) {
    pending_.push_back(std::make_unique<PendingPush>());
    PendingPush* const call = pending_.back().get();
    SetDeadline(&call->context);
    shard_->async()->PushPull(&call->context, &push, &call->response,
                              [call](grpc::Status status) {
                                call->status = std::move(status);
                                call->done.Notify();
                              });
    return call;
  }

  // Waits up to 10 s for `count` PushPull calls to wait at the barrier.
  bool WaitForWaitingPushes(size_t count) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (aggregator_->waiting_pushes() < count) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return true;
  }

  RecordingAllocator allocator_;  // outlives the server, as gRPC requires
  std::unique_ptr<Aggregator> aggregator_;
  std::unique_ptr<PsService> service_;
  std::unique_ptr<net::Server> server_;
  std::unique_ptr<tern::v1::ParameterServer::Stub> shard_;
  tern::v1::PushPullRequest push0_;  // worker 0's, sent more than once
  std::vector<std::unique_ptr<PendingPush>> pending_;
};

TEST_F(PendingPushTest, DuplicatesWaitWithoutPayloadAndGetTheStepsAnswer) {
  ASSERT_NO_FATAL_FAILURE(JoinBoth());
  constexpr size_t kDuplicates = 4;
  push0_ = MakePush(0, 1.0f);
  PushAsync(push0_);
  ASSERT_TRUE(WaitForWaitingPushes(1));  // counted first: the rest duplicate
  for (size_t i = 0; i < kDuplicates; ++i) PushAsync(push0_);
  ASSERT_TRUE(WaitForWaitingPushes(1 + kDuplicates));

  // Every call waits, and gRPC still holds its request: without a payload.
  // (The service's aggregator call returned before the call was counted
  // as waiting, under the aggregator's lock: what it did is seen here.)
  EXPECT_EQ(allocator_.live(), 1 + kDuplicates);
  EXPECT_EQ(allocator_.HeldRequestBytes(), 0u)
      << "a pending push keeps its bytes until the step completes";
  for (const auto& call : pending_) EXPECT_FALSE(call->done.HasBeenNotified());

  // Worker 1 completes the step: everyone gets its answer, the duplicates
  // the very bytes the others get.
  grpc::ClientContext context;
  SetDeadline(&context);
  tern::v1::PushPullResponse last;
  const grpc::Status status =
      shard_->PushPull(&context, MakePush(1, 3.0f), &last);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(last.chunks_size(), 1);
  const absl::StatusOr<kernels::Payload> average =
      PayloadFromWire(last.chunks(0).payload());
  ASSERT_TRUE(average.ok()) << average.status();
  std::vector<float> values(kElements);
  ASSERT_TRUE(Fp32()->Decode(*average, absl::MakeSpan(values)).ok());
  for (const float value : values) ASSERT_EQ(value, 2.0f) << "(1 + 3) / 2";
  for (const auto& call : pending_) {
    ASSERT_TRUE(call->done.WaitForNotificationWithTimeout(absl::Seconds(20)));
    ASSERT_TRUE(call->status.ok()) << call->status.error_message();
    EXPECT_EQ(call->response.SerializeAsString(), last.SerializeAsString());
  }
  EXPECT_EQ(aggregator_->step(), 1u);
}

}  // namespace
}  // namespace tern::server
