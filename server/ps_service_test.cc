#include "server/ps_service.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/grpc_status.h"
#include "common/net/channel.h"
#include "common/net/credentials.h"
#include "common/net/peer_identity.h"
#include "common/net/server.h"
#include "common/net/test_certs.h"
#include "gmock/gmock.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/completion_queue.h"
#include "gtest/gtest.h"
#include "kernels/codec_registry.h"
#include "kernels/codec_test_util.h"
#include "server/wire.h"

namespace tern::server {
namespace {

using ::testing::HasSubstr;
// gRPC's generated client of the shard service: calls go over the wire.
using ShardClient = tern::v1::ParameterServer::Stub;

// The model: one tensor of 40 elements in chunks of at most 16: 3 chunks.
constexpr uint64_t kElements = 40;
constexpr uint64_t kPartitionBytes = 64;
constexpr uint64_t kSeed = 3;

// A shard (aggregator, service, server on 127.0.0.1:0) in this process,
// with a thread that expires barrier deadlines as `tern ps` does.
class InProcessShard {
 public:
  // `security` and `peers`: the server's TLS and who may call
  // (plaintext, nothing checked, by default).
  InProcessShard(uint32_t num_workers, absl::Duration barrier_timeout,
                 net::TransportSecurity security = {},
                 net::PeerPolicy peers = {}) {
    AggregatorOptions options;
    options.num_workers = num_workers;
    options.barrier_timeout = barrier_timeout;
    aggregator_ = *Aggregator::Create(options, MakeNullLogger());
    service_ = std::make_unique<PsService>(aggregator_.get(), MakeNullLogger(),
                                           std::move(peers));
    net::ServerOptions server_options;
    server_options.listen = "127.0.0.1:0";
    server_options.security = std::move(security);
    absl::StatusOr<std::unique_ptr<net::Server>> server = net::Server::Start(
        server_options, {{service_.get(), "tern.v1.ParameterServer"}});
    if (server.ok()) {
      server_ = *std::move(server);
      port_ = server_->port();
    }
    ticker_ = std::thread([this] {
      while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(20))) {
        (void)aggregator_->ExpireWaits(absl::Now());
      }
    });
  }
  ~InProcessShard() {
    stop_.Notify();
    ticker_.join();
    aggregator_->Close(absl::UnavailableError("test shard stops"));
    if (server_ != nullptr) server_->Shutdown(absl::ZeroDuration());
  }

  bool started() const { return server_ != nullptr && port_ != 0; }

  std::unique_ptr<ShardClient> NewClient(
      net::TransportSecurity security = {}) const {
    net::ChannelOptions options;
    options.security = std::move(security);
    return tern::v1::ParameterServer::NewStub(
        net::CreateChannel(absl::StrCat("127.0.0.1:", port_), options));
  }

  Aggregator& aggregator() { return *aggregator_; }

 private:
  std::unique_ptr<Aggregator> aggregator_;
  std::unique_ptr<PsService> service_;
  int port_ = 0;
  std::unique_ptr<net::Server> server_;
  absl::Notification stop_;
  std::thread ticker_;
};

// Every RPC of the tests has a deadline.
void SetDeadline(grpc::ClientContext* context) {
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::seconds(20));
}

tern::v1::JoinRequest MakeJoin(uint32_t worker, uint32_t num_workers) {
  tern::v1::JoinRequest join;
  join.set_worker_id(worker);
  join.set_shard_index(0);
  tern::v1::RunConfig* config = join.mutable_config();
  config->set_run_id("service-test");
  config->set_num_workers(num_workers);
  config->set_num_shards(1);
  config->set_partition_bytes(kPartitionBytes);
  config->set_seed(kSeed);
  config->set_codec(tern::v1::CODEC_TERNGRAD);
  config->set_push_layout(tern::v1::LAYOUT_TERNARY_2BIT);
  config->set_pull_layout(tern::v1::LAYOUT_SUM_BITS);
  config->set_clip(2.5f);
  tern::v1::TensorSpec* tensor = join.mutable_param_spec()->add_tensors();
  tensor->set_name("w");
  tensor->add_shape(static_cast<int64_t>(kElements));
  tensor->set_dtype(tern::v1::DTYPE_FLOAT32);
  join.set_param_spec_hash(0x11);
  join.set_param_checksum(0x22);
  return join;
}

std::unique_ptr<kernels::Codec> TernGrad() {
  return *kernels::MakeCodec(kernels::CodecOptions{
      kernels::CodecId::kTernGrad, 2.5f, kernels::Layout::kTernary2Bit,
      kernels::Layout::kSumBits});
}

std::vector<float> Gradient(uint32_t worker, uint64_t elements) {
  return kernels::codec_test::Gaussian(elements, worker + 17);
}

// What one worker thread saw.
struct WorkerRun {
  grpc::Status status;
  std::vector<uint32_t> chunk_keys;
  tern::v1::PushPullRequest push;
  tern::v1::PushPullResponse pull;
};

// Sends the push of a WorkerRun and takes its answer.
using SendPush = std::function<grpc::Status(
    ShardClient*, const tern::v1::PushPullRequest&,
    tern::v1::PushPullResponse*)>;

// The blocking PushPull call a worker makes, with a deadline.
grpc::Status PushPullWithDeadline(ShardClient* client,
                                  const tern::v1::PushPullRequest& push,
                                  tern::v1::PushPullResponse* pull) {
  grpc::ClientContext context;
  SetDeadline(&context);
  return client->PushPull(&context, push, pull);
}

// Join, ShareScalers and PushPull of step 0 over the wire.
WorkerRun RunWorker(InProcessShard& shard, uint32_t worker,
                    uint32_t num_workers,
                    net::TransportSecurity security = {},
                    const SendPush& send_push = PushPullWithDeadline) {
  WorkerRun run;
  const auto shard_client = shard.NewClient(std::move(security));
  const auto codec = TernGrad();

  tern::v1::JoinResponse joined;
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    run.status =
        shard_client->Join(&context, MakeJoin(worker, num_workers), &joined);
    if (!run.status.ok()) return run;
  }
  run.chunk_keys.assign(joined.chunk_keys().begin(), joined.chunk_keys().end());
  // The chunk sizes of a 40-element tensor cut in 3 (16 elements at most).
  const std::vector<uint64_t> sizes = {14, 13, 13};
  std::vector<std::vector<float>> gradients;
  const std::vector<float> whole = Gradient(worker, kElements);
  uint64_t offset = 0;
  tern::v1::ShareScalersRequest share;
  share.set_worker_id(worker);
  share.set_step(0);
  for (const uint64_t size : sizes) {
    gradients.emplace_back(whole.begin() + offset,
                           whole.begin() + offset + size);
    offset += size;
    float max = 0;
    for (const float g : gradients.back()) max = std::max(max, std::fabs(g));
    tern::v1::ChunkScaler* scaler = share.add_scalers();
    scaler->set_chunk_key(static_cast<uint32_t>(gradients.size() - 1));
    scaler->set_scaler(max);
  }
  tern::v1::ShareScalersResponse shared;
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    run.status = shard_client->ShareScalers(&context, share, &shared);
    if (!run.status.ok()) return run;
  }
  run.push.set_worker_id(worker);
  run.push.set_step(0);
  for (uint32_t key = 0; key < sizes.size(); ++key) {
    kernels::EncodeContext context;
    context.stream = RandomStream{kSeed, 0, key, worker};
    context.scaler = shared.scalers(static_cast<int>(key)).scaler();
    const absl::StatusOr<kernels::Payload> payload =
        codec->Encode(gradients[key], context);
    EXPECT_TRUE(payload.ok()) << payload.status();
    tern::v1::ChunkPayload* chunk = run.push.add_chunks();
    chunk->set_chunk_key(key);
    PayloadToWire(*payload, chunk->mutable_payload());
  }
  run.status = send_push(shard_client.get(), run.push, &run.pull);
  return run;
}

std::vector<float> Decode(const kernels::Codec& codec,
                          const tern::v1::Payload& wire) {
  const absl::StatusOr<kernels::Payload> payload = PayloadFromWire(wire);
  EXPECT_TRUE(payload.ok()) << payload.status();
  std::vector<float> values(payload->num_elements);
  const absl::Status status = codec.Decode(*payload, absl::MakeSpan(values));
  EXPECT_TRUE(status.ok()) << status;
  return values;
}

class PsServiceTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(PsServiceTest, WorkersAsThreadsRunOneStepOverLoopback) {
  const uint32_t num_workers = GetParam();
  InProcessShard shard(num_workers, absl::Seconds(10));
  ASSERT_TRUE(shard.started());
  std::vector<WorkerRun> runs(num_workers);
  std::vector<std::thread> threads;
  for (uint32_t w = 0; w < num_workers; ++w) {
    threads.emplace_back(
        [&, w] { runs[w] = RunWorker(shard, w, num_workers); });
  }
  for (std::thread& thread : threads) thread.join();

  for (const WorkerRun& run : runs) {
    ASSERT_TRUE(run.status.ok()) << run.status.error_message();
    EXPECT_EQ(run.chunk_keys, (std::vector<uint32_t>{0, 1, 2}));
    EXPECT_EQ(run.pull.step(), 0u);
    EXPECT_EQ(run.pull.SerializeAsString(), runs[0].pull.SerializeAsString())
        << "every worker pulls the same bytes";
  }
  const auto codec = TernGrad();
  ASSERT_EQ(runs[0].pull.chunks_size(), 3);
  for (int key = 0; key < 3; ++key) {
    EXPECT_EQ(runs[0].pull.chunks(key).payload().num_summands(), num_workers);
    const std::vector<float> average =
        Decode(*codec, runs[0].pull.chunks(key).payload());
    std::vector<double> sum(average.size(), 0.0);
    for (const WorkerRun& run : runs) {
      const std::vector<float> pushed =
          Decode(*codec, run.push.chunks(key).payload());
      for (size_t j = 0; j < pushed.size(); ++j) sum[j] += pushed[j];
    }
    for (size_t j = 0; j < average.size(); ++j) {
      EXPECT_NEAR(average[j], sum[j] / num_workers,
                  1e-5 * (1 + std::fabs(sum[j])));
    }
  }
  EXPECT_EQ(shard.aggregator().step(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Workers, PsServiceTest, ::testing::Values(2u, 3u));

// A taken push's initial metadata comes at once, before the step's answer
// (which waits for the other worker's push): the sign a worker with
// --push_order=in_turn starts its next shard's push on.
TEST(PsServicePipelineTest, ATakenPushIsSignalledBeforeTheAnswer) {
  InProcessShard shard(2, absl::Seconds(20));
  ASSERT_TRUE(shard.started());
  absl::Notification signalled;
  absl::Notification second_pushes;
  const SendPush first = [&](ShardClient* client,
                             const tern::v1::PushPullRequest& push,
                             tern::v1::PushPullResponse* pull) {
    grpc::CompletionQueue queue;
    grpc::ClientContext context;
    SetDeadline(&context);
    grpc::Status status;
    auto reader = client->AsyncPushPull(&context, push, &queue);
    int received = 1, done = 2;
    reader->ReadInitialMetadata(&received);
    reader->Finish(pull, &status, &done);
    for (int events = 0; events < 2; ++events) {
      void* tag = nullptr;
      bool ok = false;
      if (!queue.Next(&tag, &ok)) break;
      if (tag == &received) {
        EXPECT_FALSE(second_pushes.HasBeenNotified())
            << "the metadata waited for the step's answer";
        signalled.Notify();
      }
    }
    return status;
  };
  const SendPush second = [&](ShardClient* client,
                              const tern::v1::PushPullRequest& push,
                              tern::v1::PushPullResponse* pull) {
    // Up to 5 s for worker 0's metadata, which must not need this push.
    signalled.WaitForNotificationWithTimeout(absl::Seconds(5));
    second_pushes.Notify();
    return PushPullWithDeadline(client, push, pull);
  };
  WorkerRun runs[2];
  std::thread other([&] { runs[1] = RunWorker(shard, 1, 2, {}, second); });
  runs[0] = RunWorker(shard, 0, 2, {}, first);
  other.join();
  EXPECT_TRUE(signalled.HasBeenNotified());
  for (const WorkerRun& run : runs) {
    ASSERT_TRUE(run.status.ok()) << run.status.error_message();
    EXPECT_EQ(run.pull.step(), 0u);
  }
}

TEST(PsServiceRefusalTest, StatusCodeAndMessageSurviveTheWire) {
  InProcessShard shard(1, absl::Seconds(10));
  ASSERT_TRUE(shard.started());
  const auto shard_client = shard.NewClient();
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    tern::v1::JoinResponse joined;
    ASSERT_TRUE(shard_client->Join(&context, MakeJoin(0, 1), &joined).ok());
  }
  {
    // A mismatching second join of the same worker (a rejoin).
    tern::v1::JoinRequest other = MakeJoin(0, 1);
    other.mutable_config()->set_seed(99);
    grpc::ClientContext context;
    SetDeadline(&context);
    tern::v1::JoinResponse joined;
    const grpc::Status status = shard_client->Join(&context, other, &joined);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_THAT(status.error_message(),
                HasSubstr("seed 99 of worker 0 differs from 3 of worker 0"));
  }
  {
    // One worker: its scalers complete the sharing of step 0 at once.
    tern::v1::ShareScalersRequest share;
    share.set_worker_id(0);
    share.set_step(0);
    for (uint32_t key = 0; key < 3; ++key) {
      tern::v1::ChunkScaler* scaler = share.add_scalers();
      scaler->set_chunk_key(key);
      scaler->set_scaler(1.0f);
    }
    grpc::ClientContext context;
    SetDeadline(&context);
    tern::v1::ShareScalersResponse shared;
    ASSERT_TRUE(shard_client->ShareScalers(&context, share, &shared).ok());
  }
  {
    tern::v1::PushPullRequest push;
    push.set_worker_id(0);
    push.set_step(0);
    push.add_chunks()->set_chunk_key(99);
    grpc::ClientContext context;
    SetDeadline(&context);
    tern::v1::PushPullResponse pull;
    const grpc::Status status = shard_client->PushPull(&context, push, &pull);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(status.error_message(),
              "step 0: chunk 99 of worker 0 is not a chunk of shard 0");
  }
  {
    tern::v1::PushPullRequest push;
    push.set_worker_id(0);
    push.set_step(0);
    tern::v1::ChunkPayload* chunk = push.add_chunks();
    chunk->set_chunk_key(1);
    chunk->mutable_payload()->set_codec(static_cast<tern::v1::Codec>(42));
    grpc::ClientContext context;
    SetDeadline(&context);
    tern::v1::PushPullResponse pull;
    const grpc::Status status = shard_client->PushPull(&context, push, &pull);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(status.error_message(),
              "step 0: chunk 1 of worker 0: unknown codec 42");
  }
  {
    tern::v1::CheckParamsRequest check;
    check.set_worker_id(7);
    grpc::ClientContext context;
    SetDeadline(&context);
    tern::v1::CheckParamsResponse response;
    const grpc::Status status =
        shard_client->CheckParams(&context, check, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("unknown worker 7"));
  }
}

TEST(PsServiceTimeoutTest, ABarrierThatTimesOutNamesTheMissingWorker) {
  InProcessShard shard(2, absl::Milliseconds(300));
  ASSERT_TRUE(shard.started());
  const auto shard_client = shard.NewClient();
  // Worker 0 joins alone: its join expires on the shard's barrier timeout,
  // well before the RPC's own deadline.
  grpc::ClientContext context;
  SetDeadline(&context);
  tern::v1::JoinResponse joined;
  const absl::Time start = absl::Now();
  const grpc::Status status =
      shard_client->Join(&context, MakeJoin(0, 2), &joined);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(status.error_message(),
            "worker 1 did not join shard 0 within 0.3s");
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

// Under mTLS a worker's certificate (SAN URI tern://<run>/worker/<id>, as
// `tern certs` issues) lets it call only as itself.
class PsServiceIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!net::TestCerts::OpensslAvailable()) GTEST_SKIP() << "no openssl";
    ASSERT_TRUE(certs_.MakeCa("ca").ok());
    ASSERT_TRUE(certs_.MakeLeaf("ca", "ps-0", {"tern://run-1/ps/0"}).ok());
    ASSERT_TRUE(
        certs_.MakeLeaf("ca", "worker-0", {"tern://run-1/worker/0"}).ok());
    ASSERT_TRUE(
        certs_.MakeLeaf("ca", "worker-1", {"tern://run-1/worker/1"}).ok());
    ASSERT_TRUE(
        certs_.MakeLeaf("ca", "other-run", {"tern://run-2/worker/1"}).ok());
    ASSERT_TRUE(certs_.MakeLeaf("ca", "no-uri").ok());
    const net::TransportSecurity server =
        net::TransportSecurity::Tls(certs_.Files("ps-0", "ca"));
    shard_ = std::make_unique<InProcessShard>(
        2, absl::Seconds(10), server, net::PeerPolicy::For(server, "run-1"));
    ASSERT_TRUE(shard_->started());
  }

  net::TransportSecurity As(const std::string& name) const {
    return net::TransportSecurity::Tls(certs_.Files(name, "ca"));
  }

  net::TestCerts certs_{absl::StrCat(testing::TempDir(), "/ps_identity")};
  std::unique_ptr<InProcessShard> shard_;
};

TEST_F(PsServiceIdentityTest, AWorkerCannotCallAsAnotherAndCanAsItself) {
  const auto shard_client = shard_->NewClient(As("worker-1"));
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    tern::v1::JoinResponse joined;
    const grpc::Status status =
        shard_client->Join(&context, MakeJoin(0, 2), &joined);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_THAT(status.error_message(), HasSubstr("wrong id"));
    EXPECT_THAT(status.error_message(), HasSubstr("worker 1 of run 'run-1'"));
  }
  {
    // Had it reached the aggregator, a push before joining would be
    // FAILED_PRECONDITION.
    grpc::ClientContext context;
    SetDeadline(&context);
    tern::v1::PushPullRequest push;
    push.set_worker_id(0);
    tern::v1::PushPullResponse pulled;
    EXPECT_EQ(shard_client->PushPull(&context, push, &pulled).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    tern::v1::ShareScalersRequest share;
    share.set_worker_id(0);
    tern::v1::ShareScalersResponse shared;
    EXPECT_EQ(shard_client->ShareScalers(&context, share, &shared).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    tern::v1::CheckParamsRequest check;
    check.set_worker_id(0);
    tern::v1::CheckParamsResponse checked;
    EXPECT_EQ(shard_client->CheckParams(&context, check, &checked).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    tern::v1::WaitingRequest ask;
    ask.set_worker_id(0);
    tern::v1::WaitingResponse waiting;
    EXPECT_EQ(shard_client->Waiting(&context, ask, &waiting).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  {
    // As itself, Waiting answers: no step has begun, nobody is awaited.
    grpc::ClientContext context;
    SetDeadline(&context);
    tern::v1::WaitingRequest ask;
    ask.set_worker_id(1);
    tern::v1::WaitingResponse waiting;
    ASSERT_TRUE(shard_client->Waiting(&context, ask, &waiting).ok());
    EXPECT_EQ(waiting.step(), 0u);
    EXPECT_EQ(waiting.waiting_for(), "");
  }
  // Each as itself: join, share scalers and push-pull a step.
  std::vector<WorkerRun> runs(2);
  std::thread zero([&] { runs[0] = RunWorker(*shard_, 0, 2, As("worker-0")); });
  std::thread one([&] { runs[1] = RunWorker(*shard_, 1, 2, As("worker-1")); });
  zero.join();
  one.join();
  for (const WorkerRun& run : runs) {
    EXPECT_TRUE(run.status.ok()) << run.status.error_message();
  }
  EXPECT_EQ(shard_->aggregator().step(), 1u);
}

TEST_F(PsServiceIdentityTest, AnotherRunOrNoIdentityIsRefused) {
  {
    const auto shard_client = shard_->NewClient(As("other-run"));
    grpc::ClientContext context;
    SetDeadline(&context);
    tern::v1::JoinResponse joined;
    const grpc::Status status =
        shard_client->Join(&context, MakeJoin(1, 2), &joined);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_THAT(status.error_message(), HasSubstr("wrong run"));
  }
  {
    // Chains to the CA, so the handshake passes, but names nobody.
    const auto shard_client = shard_->NewClient(As("no-uri"));
    grpc::ClientContext context;
    SetDeadline(&context);
    tern::v1::JoinResponse joined;
    EXPECT_EQ(
        shard_client->Join(&context, MakeJoin(1, 2), &joined).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
}

}  // namespace
}  // namespace tern::server
