// A worker that dies mid-run and is restarted from its checkpoint
// (--checkpoint_dir) rejoins the shards that kept running and ends with the
// same parameters as a run where nothing happened: the checkpoint holds its
// parameters, optimizer state, error-feedback residuals, step and data
// position, and a shard that completed the step the worker died in answers
// the repeated push from its retry cache. Workers run as threads against
// server/'s real shards on loopback.
#include <chrono>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/net/channel.h"
#include "common/net/server.h"
#include "gtest/gtest.h"
#include "tern/v1/parameter_server.grpc.pb.h"
#include "tests/support/in_process_shard.h"
#include "worker/checkpoint.h"
#include "worker/codec_config.h"
#include "worker/trainer.h"

namespace tern::worker {
namespace {

::testing::Environment* const kGrpcEnvironment =
    ::testing::AddGlobalTestEnvironment(new GrpcEnvironment);

using Stub = tern::v1::ParameterServer::Stub;

// The proxy forwards each call once, as it came: no retries of its own.
net::ChannelOptions ProxyChannelOptions() {
  net::ChannelOptions options;
  options.max_message_bytes = 64 << 20;
  options.retry.enabled = false;
  return options;
}

// Stands between one worker and one real shard and forwards every call,
// except the worker's PushPull of `crash_step`: that one fails with
// INTERNAL, as if the worker died there (not ABORTED: a shard's ABORTED
// asks the worker to push again, --on_worker_loss=shrink), after reaching the shard
// (`forward`: the shard completes the step without the worker) or before.
class CrashingProxy final : public tern::v1::ParameterServer::Service {
 public:
  CrashingProxy(int shard_port, uint64_t crash_step, bool forward)
      : shard_(tern::v1::ParameterServer::NewStub(
            net::CreateChannel(absl::StrCat("127.0.0.1:", shard_port),
                               ProxyChannelOptions()))),
        crash_step_(crash_step),
        forward_(forward) {
    net::ServerOptions options;
    options.listen = "127.0.0.1:0";
    options.max_message_bytes = 64 << 20;
    server_ = *net::Server::Start(options, {{this, "tern.v1.ParameterServer"}});
  }
  ~CrashingProxy() override { server_->Shutdown(absl::ZeroDuration()); }
  int port() const { return server_->port(); }

  grpc::Status Join(grpc::ServerContext*, const tern::v1::JoinRequest* request,
                    tern::v1::JoinResponse* response) override {
    return Forward(&Stub::Join, *request, response);
  }
  grpc::Status ShareScalers(grpc::ServerContext*,
                            const tern::v1::ShareScalersRequest* request,
                            tern::v1::ShareScalersResponse* response) override {
    return Forward(&Stub::ShareScalers, *request, response);
  }
  grpc::Status PushPull(grpc::ServerContext*,
                        const tern::v1::PushPullRequest* request,
                        tern::v1::PushPullResponse* response) override {
    if (request->step() != crash_step_) {
      return Forward(&Stub::PushPull, *request, response);
    }
    if (forward_) {
      tern::v1::PushPullResponse dropped;
      (void)Forward(&Stub::PushPull, *request, &dropped);
    }
    return grpc::Status(grpc::StatusCode::INTERNAL, "injected crash");
  }
  grpc::Status CheckParams(grpc::ServerContext*,
                           const tern::v1::CheckParamsRequest* request,
                           tern::v1::CheckParamsResponse* response) override {
    return Forward(&Stub::CheckParams, *request, response);
  }

 private:
  template <typename Request, typename Response>
  grpc::Status Forward(grpc::Status (Stub::*method)(grpc::ClientContext*,
                                                    const Request&, Response*),
                       const Request& request, Response* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    return (shard_.get()->*method)(&context, request, response);
  }

  std::unique_ptr<Stub> shard_;  // the real shard this proxy forwards to
  const uint64_t crash_step_;
  const bool forward_;
  std::unique_ptr<net::Server> server_;
};

WorkerOptions ResumeRun(const std::string& codec) {
  WorkerOptions options;
  options.num_workers = 2;
  options.model = "lenet";
  options.dataset = "synthetic";
  options.batch_size = 16;
  options.steps = 6;
  options.lr = 0.02;
  options.eval_every = 0;
  options.check_every = 1;
  options.seed = 11;
  options.codec = *ParseGradientCodec(codec);
  options.partition_bytes = 1 << 20;
  return options;
}

std::vector<std::string> Addresses(const std::vector<int>& ports) {
  std::vector<std::string> addresses;
  for (const int port : ports) {
    addresses.push_back(absl::StrCat("127.0.0.1:", port));
  }
  return addresses;
}

// A Trainer for `options` and the shards at `ports` with the model and
// data `tern worker` would build; the model is built right after
// torch::manual_seed.
std::unique_ptr<Trainer> MakeTrainer(WorkerOptions options,
                                     const std::vector<int>& ports) {
  options.ps = Addresses(ports);
  absl::StatusOr<TrainTest> data =
      LoadDataset(options.dataset, "", options.seed);
  EXPECT_TRUE(data.ok()) << data.status();
  if (!data.ok()) return nullptr;
  torch::manual_seed(options.seed);
  absl::StatusOr<std::shared_ptr<Model>> model =
      MakeModel(options.model, data->train.shape);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<Trainer>> trainer = Trainer::Create(
      options, *std::move(model), *std::move(data), MakeNullLogger());
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  return trainer.ok() ? *std::move(trainer) : nullptr;
}

std::unique_ptr<PsClient> ClientFor(const std::vector<int>& ports,
                                    const Trainer& trainer) {
  PsClientOptions options;
  options.rpc_timeout = absl::Seconds(30);
  options.join_timeout = absl::Seconds(10);
  options.max_message_bytes = trainer.max_message_bytes();
  return *PsClient::Connect(Addresses(ports), options, MakeNullLogger());
}

struct Shards {
  Shards(uint32_t num_shards, uint32_t num_workers,
         absl::Duration barrier_timeout,
         std::optional<uint64_t> catch_up_bytes = std::nullopt) {
    for (uint32_t s = 0; s < num_shards; ++s) {
      shards.push_back(std::make_unique<InProcessShard>(
          s, num_shards, num_workers, barrier_timeout, catch_up_bytes));
      ports.push_back(shards.back()->port());
    }
  }
  std::vector<std::unique_ptr<InProcessShard>> shards;
  std::vector<int> ports;
};

// The final checksum of both workers of an undisturbed run.
uint64_t UndisturbedChecksum(const WorkerOptions& options) {
  Shards shards(2, 2, absl::Seconds(20));
  std::vector<std::unique_ptr<Trainer>> trainers;
  std::vector<std::unique_ptr<PsClient>> clients;
  for (uint32_t w = 0; w < 2; ++w) {
    WorkerOptions mine = options;
    mine.worker_id = w;
    trainers.push_back(MakeTrainer(mine, shards.ports));
    if (trainers.back() == nullptr) return 0;
    clients.push_back(ClientFor(shards.ports, *trainers.back()));
  }
  absl::Status statuses[2];
  std::thread other([&] { statuses[1] = trainers[1]->Run(*clients[1], nullptr); });
  statuses[0] = trainers[0]->Run(*clients[0], nullptr);
  other.join();
  EXPECT_TRUE(statuses[0].ok()) << statuses[0];
  EXPECT_TRUE(statuses[1].ok()) << statuses[1];
  EXPECT_EQ(trainers[0]->final_checksum(), trainers[1]->final_checksum());
  return trainers[0]->final_checksum();
}

// Two workers on `num_shards` real shards; worker 1 checkpoints into `dir`
// every `checkpoint_every` steps, dies in its PushPull of `crash_step`
// (`reached_the_shard`: after its push got there) and is restarted from its
// checkpoint while worker 0 keeps running.
struct CrashPlan {
  uint32_t num_shards = 2;
  absl::Duration barrier_timeout = absl::Seconds(20);
  std::string dir;
  uint64_t checkpoint_every = 1;
  uint64_t crash_step = 3;
  bool reached_the_shard = true;
  std::optional<uint64_t> catch_up_bytes;  // the shards' default when absent
};

struct CrashOutcome {
  absl::Status survivor;      // worker 0's Run
  absl::Status died;          // worker 1's first Run
  uint64_t resumed_at = 0;    // the restarted worker 1's start_step()
  absl::Status restarted;     // its Run
  uint64_t survivor_checksum = 0;
  uint64_t restarted_checksum = 0;
};

CrashOutcome CrashAndRestart(const WorkerOptions& options,
                             const CrashPlan& plan) {
  CrashOutcome outcome;
  std::filesystem::remove_all(plan.dir);
  Shards shards(plan.num_shards, 2, plan.barrier_timeout, plan.catch_up_bytes);
  WorkerOptions first = options;
  first.worker_id = 0;
  WorkerOptions second = options;
  second.worker_id = 1;
  second.checkpoint_dir = plan.dir;
  second.checkpoint_every = plan.checkpoint_every;
  std::unique_ptr<Trainer> worker0 = MakeTrainer(first, shards.ports);
  std::unique_ptr<Trainer> doomed = MakeTrainer(second, shards.ports);
  if (worker0 == nullptr || doomed == nullptr) return outcome;
  EXPECT_EQ(doomed->start_step(), 0u);  // no checkpoint yet
  std::vector<std::unique_ptr<CrashingProxy>> proxies;
  std::vector<int> proxy_ports;
  for (const int port : shards.ports) {
    proxies.push_back(std::make_unique<CrashingProxy>(
        port, plan.crash_step, plan.reached_the_shard));
    proxy_ports.push_back(proxies.back()->port());
  }
  std::unique_ptr<PsClient> client0 = ClientFor(shards.ports, *worker0);
  std::unique_ptr<PsClient> doomed_client = ClientFor(proxy_ports, *doomed);

  std::thread survivor(
      [&] { outcome.survivor = worker0->Run(*client0, nullptr); });
  outcome.died = doomed->Run(*doomed_client, nullptr);
  // The restart: a new process builds the same model from the seed, then
  // finds the checkpoint.
  std::unique_ptr<Trainer> restarted = MakeTrainer(second, shards.ports);
  if (restarted != nullptr) {
    outcome.resumed_at = restarted->start_step();
    std::unique_ptr<PsClient> client1 = ClientFor(shards.ports, *restarted);
    outcome.restarted = restarted->Run(*client1, nullptr);
    outcome.restarted_checksum = restarted->final_checksum();
  }
  survivor.join();
  outcome.survivor_checksum = worker0->final_checksum();
  return outcome;
}

std::string TestDir(absl::string_view name) {
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
}

struct Crash {
  const char* name;
  const char* codec;
  bool reached_the_shard;  // the push of the crash step got there
};

class TrainerResumeTest : public ::testing::TestWithParam<Crash> {};

TEST_P(TrainerResumeTest, ARestartedWorkerEndsBitIdenticalToAnUndisturbedRun) {
  const Crash& crash = GetParam();
  const WorkerOptions options = ResumeRun(crash.codec);
  const uint64_t expected = UndisturbedChecksum(options);
  ASSERT_NE(expected, 0u);

  CrashPlan plan;
  plan.dir = TestDir(crash.name);
  plan.reached_the_shard = crash.reached_the_shard;
  const CrashOutcome outcome = CrashAndRestart(options, plan);
  EXPECT_TRUE(absl::IsInternal(outcome.died)) << outcome.died;
  EXPECT_NE(outcome.died.message().find("injected crash"), std::string::npos)
      << outcome.died;
  // The checkpoint written after step crash_step - 1.
  EXPECT_EQ(outcome.resumed_at, plan.crash_step);
  ASSERT_TRUE(outcome.survivor.ok()) << outcome.survivor;
  ASSERT_TRUE(outcome.restarted.ok()) << outcome.restarted;
  EXPECT_EQ(outcome.restarted_checksum, outcome.survivor_checksum);
  EXPECT_EQ(outcome.restarted_checksum, expected);

  // The checkpoint after the last step records the finished run, which a
  // further restart refuses to resume.
  absl::StatusOr<tern::v1::WorkerCheckpoint> last =
      ReadCheckpoint(CheckpointPath(plan.dir, 1));
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->next_step(), options.steps);
  EXPECT_EQ(last->param_checksum(), expected);
  absl::StatusOr<TrainTest> data =
      LoadDataset(options.dataset, "", options.seed);
  ASSERT_TRUE(data.ok());
  WorkerOptions again_options = options;
  again_options.worker_id = 1;
  again_options.ps = {"127.0.0.1:1", "127.0.0.1:2"};
  again_options.checkpoint_dir = plan.dir;
  torch::manual_seed(options.seed);
  absl::StatusOr<std::unique_ptr<Trainer>> again = Trainer::Create(
      again_options, *MakeModel(options.model, data->train.shape),
      *std::move(data), MakeNullLogger());
  EXPECT_TRUE(absl::IsFailedPrecondition(again.status())) << again.status();
  EXPECT_NE(again.status().message().find("finished run"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    Crashes, TrainerResumeTest,
    ::testing::Values(
        // Scaler sharing and the shards' retry cache.
        Crash{"terngrad_after_push", "terngrad", true},
        Crash{"terngrad_before_push", "terngrad", false},
        // Error feedback: a lost residual would change every later push,
        // and so the final parameters.
        Crash{"onebit_after_push", "onebit", true},
        Crash{"dropping_before_push", "dropping", false}),
    [](const auto& info) { return std::string(info.param.name); });

// With checkpoints every 2 steps, a worker dying at step 3 after its push
// comes back from step 2 while the shards completed step 3: it computes
// steps 2 and 3 again, the shards answer them from the answers they kept
// (scalers and sums), and it ends bit-identical to an undisturbed run.
TEST(TrainerResumeTest, AWorkerBehindTheShardsCatchesUpBitIdentically) {
  const WorkerOptions options = ResumeRun("terngrad");
  const uint64_t expected = UndisturbedChecksum(options);
  ASSERT_NE(expected, 0u);
  CrashPlan plan;
  plan.dir = TestDir("behind");
  plan.checkpoint_every = 2;
  const CrashOutcome outcome = CrashAndRestart(options, plan);
  EXPECT_TRUE(absl::IsInternal(outcome.died)) << outcome.died;
  EXPECT_EQ(outcome.resumed_at, 2u);
  ASSERT_TRUE(outcome.survivor.ok()) << outcome.survivor;
  ASSERT_TRUE(outcome.restarted.ok()) << outcome.restarted;
  EXPECT_EQ(outcome.restarted_checksum, outcome.survivor_checksum);
  EXPECT_EQ(outcome.restarted_checksum, expected);
}

// The same crash with shards that keep the last step's answer only
// (--catch_up_mb=0): the worker cannot replay step 2 and says so, naming
// both steps and the flag.
TEST(TrainerResumeTest, AShardTooFarAheadIsRefusedNamingBothSteps) {
  CrashPlan plan;
  plan.num_shards = 1;
  plan.barrier_timeout = absl::Seconds(3);
  plan.dir = TestDir("too_far_ahead");
  plan.checkpoint_every = 2;
  plan.catch_up_bytes = 0;
  const CrashOutcome outcome =
      CrashAndRestart(ResumeRun("terngrad"), plan);
  EXPECT_TRUE(absl::IsInternal(outcome.died)) << outcome.died;
  EXPECT_EQ(outcome.resumed_at, 2u);
  EXPECT_TRUE(absl::IsFailedPrecondition(outcome.restarted))
      << outcome.restarted;
  EXPECT_NE(outcome.restarted.message().find(
                "is at step 4 and keeps the answers from step 4 on, but "
                "checkpoint"),
            std::string::npos)
      << outcome.restarted;
  EXPECT_NE(outcome.restarted.message().find("--catch_up_mb"),
            std::string::npos)
      << outcome.restarted;
  EXPECT_NE(outcome.restarted.message().find("resumes at step 2"),
            std::string::npos)
      << outcome.restarted;
  // Worker 0 waits for a step 4 that never comes, and times out.
  EXPECT_FALSE(outcome.survivor.ok());
}

TEST(TrainerResumeTest, ACheckpointOfAnotherRunIsRefusedAtCreate) {
  WorkerOptions options = ResumeRun("onebit");
  options.worker_id = 1;
  options.ps = {"127.0.0.1:1"};
  options.checkpoint_dir = TestDir("another_run");
  tern::v1::WorkerCheckpoint foreign;
  foreign.set_format_version(kCheckpointFormatVersion);
  foreign.set_run_id("yesterday");
  foreign.set_worker_id(1);
  ASSERT_TRUE(
      WriteCheckpoint(CheckpointPath(options.checkpoint_dir, 1), foreign).ok());
  absl::StatusOr<TrainTest> data =
      LoadDataset(options.dataset, "", options.seed);
  ASSERT_TRUE(data.ok());
  torch::manual_seed(options.seed);
  absl::StatusOr<std::unique_ptr<Trainer>> trainer = Trainer::Create(
      options, *MakeModel(options.model, data->train.shape), *std::move(data),
      MakeNullLogger());
  EXPECT_TRUE(absl::IsFailedPrecondition(trainer.status())) << trainer.status();
  EXPECT_NE(trainer.status().message().find("run_id 'yesterday'"),
            std::string::npos)
      << trainer.status();
}

}  // namespace
}  // namespace tern::worker
