// The LPS modes' step protocol (worker/lps_protocol.h) through the Trainer,
// against a fake local parameter server: what the join tells it, what each
// push carries, that the answered weights are what the model holds
// afterwards, and the final checksum check.
#include "worker/lps_protocol.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/checksum.h"
#include "common/logging.h"
#include "common/net/server.h"
#include "core/wire.h"
#include "gtest/gtest.h"
#include "worker/trainer.h"

namespace tern::worker {
namespace {

// The weights the fake LPS answers step t with: every element the same.
float WeightOf(uint64_t step) { return 0.001f * static_cast<float>(step + 1); }

// One LPS for one worker: records the join and the pushes, answers each
// push with WeightOf(step) in fp32, and the last step with its checksum
// (plus `checksum_error`, to make it disagree).
class FakeLps final : public tern::v1::ParameterServer::Service {
 public:
  FakeLps(uint64_t steps, uint64_t checksum_error)
      : steps_(steps), checksum_error_(checksum_error) {}

  grpc::Status Join(grpc::ServerContext*, const tern::v1::JoinRequest* req,
                    tern::v1::JoinResponse* resp) override {
    absl::MutexLock lock(&mu_);
    join_ = *req;
    for (int i = 0; i < req->initial_weights_size(); ++i) {
      resp->add_chunk_keys(i);
    }
    resp->set_next_step(0);
    return grpc::Status::OK;
  }

  grpc::Status PushPull(grpc::ServerContext*,
                        const tern::v1::PushPullRequest* req,
                        tern::v1::PushPullResponse* resp) override {
    absl::MutexLock lock(&mu_);
    pushes_.push_back(*req);
    resp->set_step(req->step());
    std::vector<float> all;
    for (const tern::v1::ChunkPayload& pushed : req->chunks()) {
      const std::vector<float> weights(pushed.payload().num_elements(),
                                       WeightOf(req->step()));
      all.insert(all.end(), weights.begin(), weights.end());
      kernels::Payload payload;
      payload.codec = kernels::CodecId::kFp32;
      payload.layout = kernels::Layout::kRaw;
      payload.num_elements = weights.size();
      payload.data.assign(reinterpret_cast<const char*>(weights.data()),
                          weights.size() * sizeof(float));
      tern::v1::ChunkPayload* answer = resp->add_chunks();
      answer->set_chunk_key(pushed.chunk_key());
      core::PayloadToWire(payload, answer->mutable_payload());
    }
    if (req->step() + 1 == steps_) {
      resp->set_param_checksum(
          ChecksumOf(all.data(), all.size() * sizeof(float)) + checksum_error_);
    }
    return grpc::Status::OK;
  }

  tern::v1::JoinRequest join() const {
    absl::MutexLock lock(&mu_);
    return join_;
  }
  std::vector<tern::v1::PushPullRequest> pushes() const {
    absl::MutexLock lock(&mu_);
    return pushes_;
  }

 private:
  const uint64_t steps_;
  const uint64_t checksum_error_;
  mutable absl::Mutex mu_;
  tern::v1::JoinRequest join_ ABSL_GUARDED_BY(mu_);
  std::vector<tern::v1::PushPullRequest> pushes_ ABSL_GUARDED_BY(mu_);
};

struct LpsRun {
  TrainMode mode;
  kernels::CodecId codec;
  tern::v1::Mode wire_mode;
  tern::v1::Codec pushed;
};

class LpsProtocolTest : public ::testing::TestWithParam<LpsRun> {
 protected:
  // Trains `steps` steps of worker 0 against a FakeLps.
  absl::Status Train(uint64_t checksum_error) {
    lps_ = std::make_unique<FakeLps>(kSteps, checksum_error);
    net::ServerOptions server_options;
    server_options.listen = "127.0.0.1:0";
    server_options.max_message_bytes = 64 << 20;
    server_ = *net::Server::Start(server_options,
                                  {{lps_.get(), "tern.v1.ParameterServer"}});
    const int port = server_->port();

    WorkerOptions options;
    options.mode = GetParam().mode;
    options.codec = GetParam().codec;
    options.ps = {absl::StrCat("127.0.0.1:", port)};
    options.model = "lenet";
    options.dataset = "synthetic";
    options.batch_size = 8;
    options.steps = kSteps;
    options.eval_every = 2;
    options.optimizer = "sgd";
    options.momentum = 0.5;
    options.partition_bytes = 64 << 10;
    absl::StatusOr<TrainTest> data = LoadDataset("synthetic", "", 1);
    if (!data.ok()) return data.status();
    torch::manual_seed(options.seed);
    absl::StatusOr<std::shared_ptr<Model>> model =
        MakeModel(options.model, data->train.shape);
    if (!model.ok()) return model.status();
    absl::StatusOr<std::unique_ptr<Trainer>> trainer =
        Trainer::Create(options, *model, *std::move(data), MakeNullLogger());
    if (!trainer.ok()) return trainer.status();
    trainer_ = *std::move(trainer);
    PsClientOptions client_options;
    client_options.rpc_timeout = absl::Seconds(20);
    client_options.join_timeout = absl::Seconds(20);
    client_options.max_message_bytes = trainer_->max_message_bytes();
    absl::StatusOr<std::unique_ptr<PsClient>> client =
        PsClient::Connect(options.ps, client_options, MakeNullLogger());
    if (!client.ok()) return client.status();
    const absl::Status run = trainer_->Run(**client, nullptr);
    server_->Shutdown(absl::ZeroDuration());
    return run;
  }

  static constexpr uint64_t kSteps = 3;
  std::unique_ptr<FakeLps> lps_;
  std::unique_ptr<net::Server> server_;
  std::unique_ptr<Trainer> trainer_;
};

TEST_P(LpsProtocolTest, JoinsPushesAndLoadsTheLpsWeights) {
  ASSERT_TRUE(Train(/*checksum_error=*/0).ok());
  const size_t num_chunks = trainer_->plan().partition.chunks().size();

  // The join names the mode and the optimizer the LPS runs, and worker 0
  // sends its weights in fp32, one payload per chunk.
  const tern::v1::JoinRequest join = lps_->join();
  EXPECT_EQ(join.config().mode(), GetParam().wire_mode);
  EXPECT_EQ(join.config().optimizer().momentum(), 0.0);  // --optimizer=sgd
  EXPECT_EQ(join.config().optimizer().steps(), kSteps);
  ASSERT_EQ(static_cast<size_t>(join.initial_weights_size()), num_chunks);
  for (const auto& weights : join.initial_weights()) {
    EXPECT_EQ(weights.payload().codec(), tern::v1::CODEC_FP32);
  }

  // One push a step with every chunk in the run's codec; fp32 weights are
  // asked for on evaluation steps only.
  const std::vector<tern::v1::PushPullRequest> pushes = lps_->pushes();
  ASSERT_EQ(pushes.size(), kSteps);
  for (uint64_t step = 0; step < kSteps; ++step) {
    EXPECT_EQ(pushes[step].step(), step);
    EXPECT_EQ(pushes[step].fp32_weights(), step == 1) << step;
    ASSERT_EQ(static_cast<size_t>(pushes[step].chunks_size()), num_chunks);
    for (const auto& chunk : pushes[step].chunks()) {
      EXPECT_EQ(chunk.payload().codec(), GetParam().pushed);
    }
  }

  // The model holds the last answer's weights, and its checksum is the
  // LPS's.
  std::vector<float> loaded(trainer_->params().total_elements());
  trainer_->params().GatherParameters(absl::MakeSpan(loaded));
  for (const float w : loaded) ASSERT_EQ(w, WeightOf(kSteps - 1));
  EXPECT_EQ(trainer_->final_checksum(),
            ChecksumOf(loaded.data(), loaded.size() * sizeof(float)));
  ASSERT_TRUE(trainer_->final_evaluation().has_value());
}

TEST_P(LpsProtocolTest, AFinalChecksumThatDisagreesIsAnError) {
  const absl::Status status = Train(/*checksum_error=*/1);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  EXPECT_NE(status.message().find("the LPS reports"), std::string::npos)
      << status;
  EXPECT_NE(status.message().find(absl::StrCat("step ", kSteps - 1)),
            std::string::npos)
      << status;
}

INSTANTIATE_TEST_SUITE_P(
    Modes, LpsProtocolTest,
    ::testing::Values(LpsRun{TrainMode::kWeightGrad,
                             kernels::CodecId::kTernGrad,
                             tern::v1::MODE_WEIGHTGRAD,
                             tern::v1::CODEC_TERNGRAD},
                      LpsRun{TrainMode::kGaia, kernels::CodecId::kTernGrad,
                             tern::v1::MODE_GAIA, tern::v1::CODEC_FP32}),
    [](const auto& info) {
      return std::string(TrainModeName(info.param.mode));
    });

}  // namespace
}  // namespace tern::worker
