#include "worker/ps_client.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/captured_log.h"
#include "common/net/server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern::worker {
namespace {

using tern::v1::CheckParamsRequest;
using tern::v1::CheckParamsResponse;
using tern::v1::JoinRequest;
using tern::v1::JoinResponse;
using tern::v1::PushPullRequest;
using tern::v1::PushPullResponse;
using tern::v1::ShareScalersRequest;
using tern::v1::ShareScalersResponse;

// A shard whose answers each test scripts.
class FakeShard final : public tern::v1::ParameterServer::Service {
 public:
  std::function<grpc::Status(const PushPullRequest&, PushPullResponse*)>
      push_pull = [](const PushPullRequest& req, PushPullResponse* resp) {
        resp->set_step(req.step());
        return grpc::Status::OK;
      };
  std::atomic<int> push_pull_calls{0};

  grpc::Status Join(grpc::ServerContext*, const JoinRequest* req,
                    JoinResponse* resp) override {
    resp->set_shard_index(req->shard_index());
    resp->add_chunk_keys(req->worker_id());
    return grpc::Status::OK;
  }
  grpc::Status ShareScalers(grpc::ServerContext*,
                            const ShareScalersRequest* req,
                            ShareScalersResponse* resp) override {
    resp->set_step(req->step());
    *resp->mutable_scalers() = req->scalers();
    return grpc::Status::OK;
  }
  grpc::Status PushPull(grpc::ServerContext*, const PushPullRequest* req,
                        PushPullResponse* resp) override {
    ++push_pull_calls;
    return push_pull(*req, resp);
  }
  // Empty: Waiting is UNIMPLEMENTED, as an LPS's.
  std::string waiting_for;
  grpc::Status Waiting(grpc::ServerContext*, const tern::v1::WaitingRequest*,
                       tern::v1::WaitingResponse* resp) override {
    if (waiting_for.empty()) {
      return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "not a shard");
    }
    resp->set_step(7);
    resp->set_waiting_for(waiting_for);
    resp->set_waited_s(12.5);
    return grpc::Status::OK;
  }
  grpc::Status CheckParams(grpc::ServerContext*, const CheckParamsRequest* req,
                           CheckParamsResponse*) override {
    if (req->param_checksum() != 42) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "replicas diverged");
    }
    return grpc::Status::OK;
  }
};

// A port nobody listens on right now (bound and released).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

std::unique_ptr<net::Server> Serve(FakeShard* shard, int port,
                                   int* bound_port = nullptr) {
  net::ServerOptions options;
  options.listen = absl::StrCat("127.0.0.1:", port);
  auto server = net::Server::Start(
      options, {{shard, tern::v1::ParameterServer::service_full_name()}});
  if (!server.ok()) return nullptr;
  if (bound_port != nullptr) *bound_port = (*server)->port();
  return *std::move(server);
}

struct Cluster {
  std::vector<std::unique_ptr<FakeShard>> shards;
  std::vector<std::unique_ptr<net::Server>> servers;
  std::vector<std::string> addresses;

  explicit Cluster(int n) {
    for (int i = 0; i < n; ++i) {
      shards.push_back(std::make_unique<FakeShard>());
      int port = 0;
      servers.push_back(Serve(shards.back().get(), 0, &port));
      addresses.push_back(absl::StrCat("127.0.0.1:", port));
    }
  }
  ~Cluster() {
    for (auto& server : servers) server->Shutdown(absl::ZeroDuration());
  }
  std::unique_ptr<PsClient> Client(
      absl::Duration rpc_timeout, PushOrder push_order = PushOrder::kTogether,
      std::function<bool(const std::string&)> on_this_host = nullptr) {
    PsClientOptions options;
    options.rpc_timeout = rpc_timeout;
    options.push_order = push_order;
    options.on_this_host = std::move(on_this_host);
    options.join_timeout = absl::Seconds(10);
    return *PsClient::Connect(addresses, options, MakeNullLogger());
  }
};

std::vector<ShardRequest<PushPullRequest>> PushToAll(int shards,
                                                     uint64_t step) {
  std::vector<ShardRequest<PushPullRequest>> requests(shards);
  for (int s = 0; s < shards; ++s) {
    requests[s].shard = s;
    requests[s].request.set_step(step);
    requests[s].request.add_chunks()->set_chunk_key(s);
  }
  return requests;
}

TEST(PsClientTest, ConnectNeedsAtLeastOneShard) {
  EXPECT_FALSE(PsClient::Connect({}, PsClientOptions(), MakeNullLogger()).ok());
}

TEST(PsClientTest, JoinWaitsForAShardThatStartsLater) {
  const int port = FreePort();
  PsClientOptions options;
  options.rpc_timeout = absl::Milliseconds(300);
  options.join_timeout = absl::Seconds(20);
  auto client = *PsClient::Connect({absl::StrCat("127.0.0.1:", port)}, options,
                                   MakeNullLogger());
  FakeShard shard;
  std::unique_ptr<net::Server> server;
  std::thread late([&] {
    absl::SleepFor(absl::Milliseconds(800));
    server = Serve(&shard, port);
  });
  JoinRequest request;
  request.set_worker_id(7);
  const auto responses = client->Join(request);
  late.join();
  ASSERT_TRUE(responses.ok()) << responses.status();
  ASSERT_EQ(responses->size(), 1u);
  EXPECT_EQ((*responses)[0].chunk_keys(0), 7u);
  server->Shutdown(absl::ZeroDuration());
}

TEST(PsClientTest, JoinSetsTheShardIndexPerShard) {
  Cluster cluster(3);
  auto client = cluster.Client(absl::Seconds(5));
  const auto responses = client->Join(JoinRequest());
  ASSERT_TRUE(responses.ok()) << responses.status();
  ASSERT_EQ(responses->size(), 3u);
  for (uint32_t s = 0; s < 3; ++s) EXPECT_EQ((*responses)[s].shard_index(), s);
}

TEST(PsClientTest, JoinGivesUpAfterItsTimeout) {
  PsClientOptions options;
  options.rpc_timeout = absl::Milliseconds(200);
  options.join_timeout = absl::Seconds(1);
  const std::string address = absl::StrCat("127.0.0.1:", FreePort());
  auto client = *PsClient::Connect({address}, options, MakeNullLogger());
  const absl::Time start = absl::Now();
  const auto responses = client->Join(JoinRequest());
  ASSERT_FALSE(responses.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(responses.status()) ||
              absl::IsUnavailable(responses.status()))
      << responses.status();
  EXPECT_NE(responses.status().message().find(address),
            absl::string_view::npos);
  EXPECT_NE(responses.status().message().find("gave up"),
            absl::string_view::npos);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(PsClientTest, CallsToShardsRunInParallel) {
  // Each shard answers only once both have been called: a client that called
  // them one after the other would hit its deadline.
  Cluster cluster(2);
  absl::Mutex mu;
  int arrived = 0;
  for (auto& shard : cluster.shards) {
    shard->push_pull = [&](const PushPullRequest& req, PushPullResponse* resp) {
      absl::MutexLock lock(&mu);
      ++arrived;
      const auto both = [&] { return arrived >= 2; };
      if (!mu.AwaitWithTimeout(absl::Condition(&both), absl::Seconds(5))) {
        return grpc::Status(grpc::StatusCode::ABORTED, "alone");
      }
      resp->set_step(req.step());
      *resp->mutable_chunks() = req.chunks();
      return grpc::Status::OK;
    };
  }
  auto client = cluster.Client(absl::Seconds(3));
  const auto responses = client->PushPull(PushToAll(2, 9));
  ASSERT_TRUE(responses.ok()) << responses.status();
  ASSERT_EQ(responses->size(), 2u);
  for (uint32_t s = 0; s < 2; ++s) {
    EXPECT_EQ((*responses)[s].step(), 9u);
    EXPECT_EQ((*responses)[s].chunks(0).chunk_key(), s);
  }
}

// In turn, each push starts once the previous shard has its request.
// These shards (gRPC's synchronous API) send their initial metadata only
// with the answer, so the calls go one at a time, in shard order.
TEST(PsClientTest, PushesInTurnStartWhenThePreviousShardHasItsPush) {
  Cluster cluster(3);
  absl::Mutex mu;
  std::vector<uint32_t> order;
  int inside = 0;
  int most_inside = 0;
  for (auto& shard : cluster.shards) {
    shard->push_pull = [&](const PushPullRequest& req, PushPullResponse* resp) {
      {
        absl::MutexLock lock(&mu);
        order.push_back(req.chunks(0).chunk_key());
        most_inside = std::max(most_inside, ++inside);
      }
      absl::SleepFor(absl::Milliseconds(50));
      absl::MutexLock lock(&mu);
      --inside;
      resp->set_step(req.step());
      *resp->mutable_chunks() = req.chunks();
      return grpc::Status::OK;
    };
  }
  auto client = cluster.Client(absl::Seconds(5), PushOrder::kInTurn);
  const auto responses = client->PushPull(PushToAll(3, 6));
  ASSERT_TRUE(responses.ok()) << responses.status();
  for (uint32_t s = 0; s < 3; ++s) {
    EXPECT_EQ((*responses)[s].step(), 6u);
    EXPECT_EQ((*responses)[s].chunks(0).chunk_key(), s);
  }
  EXPECT_EQ(order, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(most_inside, 1);
  // The other methods still go to every shard at once.
  EXPECT_TRUE(client->ShareScalers({{0, {}}, {1, {}}, {2, {}}}).ok());
}

// Local last: the shards elsewhere (0 and 2) get their pushes at once; this
// host's shard (1) only once both have theirs. These shards send their
// initial metadata with the answer, so shard 1 is called after both
// answered.
TEST(PsClientTest, PushesToThisHostsShardStartOnceTheOthersHaveTheirs) {
  Cluster cluster(3);
  absl::Mutex mu;
  std::vector<uint32_t> order;
  int answered = 0;
  int answered_before_local = -1;
  absl::Notification shard2_called;
  bool together = false;
  for (auto& shard : cluster.shards) {
    shard->push_pull = [&](const PushPullRequest& req, PushPullResponse* resp) {
      const uint32_t key = req.chunks(0).chunk_key();
      {
        absl::MutexLock lock(&mu);
        order.push_back(key);
        if (key == 1) answered_before_local = answered;
      }
      if (key == 2) shard2_called.Notify();
      // Shard 0 answers only once shard 2 has its push: both at once.
      if (key == 0) {
        together =
            shard2_called.WaitForNotificationWithTimeout(absl::Seconds(5));
      }
      absl::MutexLock lock(&mu);
      ++answered;
      resp->set_step(req.step());
      *resp->mutable_chunks() = req.chunks();
      return grpc::Status::OK;
    };
  }
  const std::string local = cluster.addresses[1];
  auto client = cluster.Client(
      absl::Seconds(5), PushOrder::kLocalLast,
      [&](const std::string& address) { return address == local; });
  const auto responses = client->PushPull(PushToAll(3, 6));
  ASSERT_TRUE(responses.ok()) << responses.status();
  for (uint32_t s = 0; s < 3; ++s) {
    EXPECT_EQ((*responses)[s].step(), 6u);
    EXPECT_EQ((*responses)[s].chunks(0).chunk_key(), s);
  }
  EXPECT_TRUE(together);
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order.back(), 1u);
  EXPECT_EQ(answered_before_local, 2);
}

// With every shard (or none) on this host there is nothing to hold back:
// local last pushes to all at once, as together does.
TEST(PsClientTest, LocalLastWithEveryShardHerePushesAtOnce) {
  for (const bool here : {true, false}) {
    Cluster cluster(3);
    absl::Mutex mu;
    int called = 0;
    for (auto& shard : cluster.shards) {
      shard->push_pull = [&](const PushPullRequest& req,
                             PushPullResponse* resp) {
        absl::MutexLock lock(&mu);
        ++called;
        // Each answers only once all three have been called.
        const auto all_called = [&] { return called == 3; };
        if (!mu.AwaitWithTimeout(absl::Condition(&all_called),
                                 absl::Seconds(5))) {
          return grpc::Status(grpc::StatusCode::INTERNAL, "not at once");
        }
        resp->set_step(req.step());
        return grpc::Status::OK;
      };
    }
    auto client = cluster.Client(absl::Seconds(10), PushOrder::kLocalLast,
                                 [here](const std::string&) { return here; });
    const auto responses = client->PushPull(PushToAll(3, 2));
    EXPECT_TRUE(responses.ok()) << here << ": " << responses.status();
  }
}

// Also in turn, where the silent shard holds the pushes after it back.
TEST(PsClientTest, ASilentShardHitsTheDeadline) {
  for (const PushOrder order :
       {PushOrder::kTogether, PushOrder::kInTurn, PushOrder::kLocalLast}) {
    Cluster cluster(2);
    absl::Notification release;
    cluster.shards[0]->push_pull = [&](const PushPullRequest&,
                                       PushPullResponse*) {
      release.WaitForNotificationWithTimeout(absl::Seconds(10));
      return grpc::Status::OK;
    };
    auto client = cluster.Client(absl::Milliseconds(300), order);
    const absl::Time start = absl::Now();
    const auto responses = client->PushPull(PushToAll(2, 0));
    const absl::Duration took = absl::Now() - start;
    release.Notify();
    ASSERT_FALSE(responses.ok()) << static_cast<int>(order);
    EXPECT_EQ(responses.status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_NE(responses.status().message().find(
                  absl::StrCat("shard 0 (", cluster.addresses[0], ")")),
              absl::string_view::npos)
        << responses.status();
    EXPECT_LT(took, absl::Seconds(3)) << static_cast<int>(order);
  }
}

// A step's call that waits --straggler_warn_s asks each shard it waits on
// what its step waits for, so that this worker's log names the straggler.
TEST(PsClientTest, ALateCallNamesWhatTheShardWaitsFor) {
  Cluster cluster(2);
  absl::Notification release;
  for (auto& shard : cluster.shards) {
    shard->push_pull = [&](const PushPullRequest& req, PushPullResponse* resp) {
      release.WaitForNotificationWithTimeout(absl::Seconds(10));
      resp->set_step(req.step());
      return grpc::Status::OK;
    };
  }
  cluster.shards[0]->waiting_for = "worker 2 to push";
  CapturedLog log;
  PsClientOptions options;
  options.rpc_timeout = absl::Seconds(20);
  options.straggler_warn = absl::Milliseconds(200);
  auto client = *PsClient::Connect(cluster.addresses, options, log.logger());
  std::thread releaser([&] {
    absl::SleepFor(absl::Seconds(1));
    release.Notify();
  });
  const auto responses = client->PushPull(PushToAll(2, 7));
  releaser.join();
  ASSERT_TRUE(responses.ok()) << responses.status();
  EXPECT_THAT(
      log.Lines(spdlog::level::warn),
      ::testing::UnorderedElementsAre(
          absl::StrCat("PushPull: no answer from shard 0 (",
                       cluster.addresses[0],
                       ") after 200ms: its step 7 waits for worker 2 to push, "
                       "12.5s after the first worker's call (a straggler? "
                       "--straggler_warn_s)"),
          absl::StrCat("PushPull: no answer from shard 1 (",
                       cluster.addresses[1],
                       ") after 200ms: a worker is late or the shard is slow; "
                       "the shard's log names the workers it waits for "
                       "(--straggler_warn_s)")));
}

TEST(PsClientTest, ShareScalersAndCheckParams) {
  Cluster cluster(2);
  auto client = cluster.Client(absl::Seconds(5));
  std::vector<ShardRequest<ShareScalersRequest>> requests(1);
  requests[0].shard = 1;  // only shard 1 owns TernGrad chunks here
  requests[0].request.set_step(3);
  auto* scaler = requests[0].request.add_scalers();
  scaler->set_chunk_key(5);
  scaler->set_scaler(0.25f);
  const auto responses = client->ShareScalers(std::move(requests));
  ASSERT_TRUE(responses.ok()) << responses.status();
  ASSERT_EQ(responses->size(), 1u);
  EXPECT_EQ((*responses)[0].scalers(0).scaler(), 0.25f);

  CheckParamsRequest check;
  check.set_param_checksum(42);
  EXPECT_TRUE(client->CheckParams(check).ok());
  check.set_param_checksum(43);
  const absl::Status diverged = client->CheckParams(check);
  EXPECT_EQ(diverged.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(diverged.message().find("CheckParams"), absl::string_view::npos);
}

TEST(PsClientTest, ARequestForAShardThatDoesNotExistIsRefused) {
  Cluster cluster(1);
  auto client = cluster.Client(absl::Seconds(1));
  auto requests = PushToAll(1, 0);
  requests[0].shard = 4;
  EXPECT_EQ(client->PushPull(std::move(requests)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MessageBytesBoundTest, CoversTheLargestShardInFp32) {
  // Tensors of 1000 and 10 elements on 2 shards: shard 0 gets the 1000.
  const auto partition = Partition::Create({1000, 10}, 1 << 20, 2);
  ASSERT_TRUE(partition.ok());
  const auto bound = MessageBytesBound(*partition);
  ASSERT_TRUE(bound.ok());
  EXPECT_EQ(*bound, 1000 * 4 + 128 + (1 << 20));

  const auto huge = Partition::Create({uint64_t{1} << 30}, 4ull << 30, 1);
  ASSERT_TRUE(huge.ok());
  EXPECT_FALSE(MessageBytesBound(*huge).ok());
}

}  // namespace
}  // namespace tern::worker
