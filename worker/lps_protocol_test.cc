// The LPS modes' step protocol (worker/lps_protocol.h) through the Trainer,
// against a fake local parameter server: what the join tells it, what each
// push carries, that the answered weights are what the model holds
// afterwards, and the final checksum check.
#include "worker/lps_protocol.h"

#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "common/captured_log.h"
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

// `num_elements` fp32 RAW values `value` on the wire.
void FillFp32(size_t num_elements, float value, tern::v1::Payload* wire) {
  const std::vector<float> values(num_elements, value);
  kernels::Payload payload;
  payload.codec = kernels::CodecId::kFp32;
  payload.layout = kernels::Layout::kRaw;
  payload.num_elements = values.size();
  payload.data.assign(reinterpret_cast<const char*>(values.data()),
                      values.size() * sizeof(float));
  core::PayloadToWire(payload, wire);
}

uint64_t ChecksumOfFloats(const std::vector<float>& values) {
  return ChecksumOf(values.data(), values.size() * sizeof(float));
}

// A restart of the fake LPS from a state behind the worker.
struct Restart {
  // The pushes of this step are refused with `code` (OUT_OF_RANGE: as an
  // LPS restarted from its state refuses a worker that has not rejoined).
  uint64_t refused_step = 0;
  absl::StatusCode code = absl::StatusCode::kOutOfRange;
  // How many of those pushes are refused before the fake answers them.
  int refusals = 1;
  // The answer to a rejoin: its next step, its weights (every element) and
  // what is added to their checksum (to make it disagree).
  uint64_t next_step = 0;
  float weight = 0.25f;
  uint64_t checksum_error = 0;
};

struct FakeLpsOptions {
  uint64_t steps = 3;
  // Added to the final step's checksum, to make it disagree.
  uint64_t checksum_error = 0;
  std::optional<Restart> restart;
  // Called with each push before it is answered, on a gRPC thread while
  // the worker waits for the answer.
  std::function<void(const tern::v1::PushPullRequest&)> on_push;
};

// One LPS for one worker: records the joins and the pushes, answers the
// first join at step 0, each push with WeightOf(step) in fp32 and the last
// step with its checksum. With a restart, refuses the pushes of one step
// and answers the rejoins that follow as a restored LPS does.
class FakeLps final : public tern::v1::ParameterServer::Service {
 public:
  explicit FakeLps(FakeLpsOptions options) : options_(std::move(options)) {
    if (options_.restart.has_value()) {
      refusals_left_ = options_.restart->refusals;
    }
  }

  grpc::Status Join(grpc::ServerContext*, const tern::v1::JoinRequest* req,
                    tern::v1::JoinResponse* resp) override {
    absl::MutexLock lock(&mu_);
    joins_.push_back(*req);
    // The chunks are those of worker 0's start at its first join.
    const tern::v1::JoinRequest& first = joins_.front();
    for (int i = 0; i < first.initial_weights_size(); ++i) {
      resp->add_chunk_keys(i);
    }
    if (joins_.size() == 1 || !options_.restart.has_value()) {
      resp->set_next_step(0);
      return grpc::Status::OK;
    }
    // A rejoin: the restored weights in fp32, key order, with checksum.
    const Restart& restart = *options_.restart;
    resp->set_next_step(restart.next_step);
    std::vector<float> all;
    for (const tern::v1::ChunkPayload& start : first.initial_weights()) {
      tern::v1::ChunkPayload* weights = resp->add_initial_weights();
      weights->set_chunk_key(start.chunk_key());
      const size_t n = start.payload().num_elements();
      FillFp32(n, restart.weight, weights->mutable_payload());
      all.insert(all.end(), n, restart.weight);
    }
    resp->set_param_checksum(ChecksumOfFloats(all) + restart.checksum_error);
    return grpc::Status::OK;
  }

  grpc::Status PushPull(grpc::ServerContext*,
                        const tern::v1::PushPullRequest* req,
                        tern::v1::PushPullResponse* resp) override {
    if (options_.on_push) options_.on_push(*req);
    absl::MutexLock lock(&mu_);
    pushes_.push_back(*req);
    if (options_.restart.has_value() &&
        req->step() == options_.restart->refused_step && refusals_left_ > 0) {
      --refusals_left_;
      return grpc::Status(
          static_cast<grpc::StatusCode>(options_.restart->code),
          absl::StrCat("the LPS restarted from its state at local step ",
                       options_.restart->next_step, "; rejoin (worker ",
                       req->worker_id(), " resumes at step ",
                       options_.restart->next_step, ")"));
    }
    resp->set_step(req->step());
    std::vector<float> all;
    for (const tern::v1::ChunkPayload& pushed : req->chunks()) {
      const size_t n = pushed.payload().num_elements();
      tern::v1::ChunkPayload* answer = resp->add_chunks();
      answer->set_chunk_key(pushed.chunk_key());
      FillFp32(n, WeightOf(req->step()), answer->mutable_payload());
      all.insert(all.end(), n, WeightOf(req->step()));
    }
    if (req->step() + 1 == options_.steps) {
      resp->set_param_checksum(ChecksumOfFloats(all) + options_.checksum_error);
    }
    return grpc::Status::OK;
  }

  std::vector<tern::v1::JoinRequest> joins() const {
    absl::MutexLock lock(&mu_);
    return joins_;
  }
  std::vector<uint64_t> pushed_steps() const {
    absl::MutexLock lock(&mu_);
    std::vector<uint64_t> steps;
    for (const auto& push : pushes_) steps.push_back(push.step());
    return steps;
  }
  std::vector<tern::v1::PushPullRequest> pushes() const {
    absl::MutexLock lock(&mu_);
    return pushes_;
  }

 private:
  const FakeLpsOptions options_;
  mutable absl::Mutex mu_;
  std::vector<tern::v1::JoinRequest> joins_ ABSL_GUARDED_BY(mu_);
  std::vector<tern::v1::PushPullRequest> pushes_ ABSL_GUARDED_BY(mu_);
  int refusals_left_ ABSL_GUARDED_BY(mu_) = 0;
};

struct LpsRun {
  TrainMode mode;
  kernels::CodecId codec;
  tern::v1::Mode wire_mode;
  tern::v1::Codec pushed;
};

class LpsProtocolTest : public ::testing::TestWithParam<LpsRun> {
 protected:
  // Trains lps.steps steps of worker 0 against a FakeLps, writing its
  // records to metrics_path_.
  absl::Status Train(FakeLpsOptions lps) {
    const uint64_t steps = lps.steps;
    lps_ = std::make_unique<FakeLps>(std::move(lps));
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
    options.steps = steps;
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
        Trainer::Create(options, *model, *std::move(data), log_.logger());
    if (!trainer.ok()) return trainer.status();
    trainer_ = *std::move(trainer);
    PsClientOptions client_options;
    client_options.rpc_timeout = absl::Seconds(20);
    client_options.join_timeout = absl::Seconds(20);
    client_options.server_loss_timeout = absl::Seconds(5);
    client_options.max_message_bytes = trainer_->max_message_bytes();
    absl::StatusOr<std::unique_ptr<PsClient>> client =
        PsClient::Connect(options.ps, client_options, MakeNullLogger());
    if (!client.ok()) return client.status();
    absl::StatusOr<std::unique_ptr<MetricsWriter>> metrics =
        MetricsWriter::Open(metrics_path_);
    if (!metrics.ok()) return metrics.status();
    const absl::Status run = trainer_->Run(**client, metrics->get());
    server_->Shutdown(absl::ZeroDuration());
    return run;
  }

  // The steps of the records written, in order.
  std::vector<uint64_t> RecordedSteps() const {
    std::vector<uint64_t> steps;
    std::ifstream in(metrics_path_);
    const std::regex step_field("\"step\":([0-9]+)");
    for (std::string line; std::getline(in, line);) {
      std::smatch match;
      if (std::regex_search(line, match, step_field)) {
        steps.push_back(std::stoull(match[1]));
      }
    }
    return steps;
  }

  // The model's parameters now, flat.
  std::vector<float> Loaded() const {
    std::vector<float> loaded(trainer_->params().total_elements());
    trainer_->params().GatherParameters(absl::MakeSpan(loaded));
    return loaded;
  }

  static constexpr uint64_t kSteps = 3;
  const std::string metrics_path_ = absl::StrCat(
      ::testing::TempDir(), "/lps_protocol_test_",
      absl::StrReplaceAll(
          ::testing::UnitTest::GetInstance()->current_test_info()->name(),
          {{"/", "_"}}),
      ".jsonl");
  CapturedLog log_;
  std::unique_ptr<FakeLps> lps_;
  std::unique_ptr<net::Server> server_;
  std::unique_ptr<Trainer> trainer_;
};

TEST_P(LpsProtocolTest, JoinsPushesAndLoadsTheLpsWeights) {
  ASSERT_TRUE(Train(FakeLpsOptions()).ok());
  const size_t num_chunks = trainer_->plan().partition.chunks().size();

  // The join names the mode and the optimizer the LPS runs, and worker 0
  // sends its weights in fp32, one payload per chunk.
  ASSERT_EQ(lps_->joins().size(), 1u);
  const tern::v1::JoinRequest join = lps_->joins().front();
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
  FakeLpsOptions lps;
  lps.checksum_error = 1;
  const absl::Status status = Train(lps);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  EXPECT_NE(status.message().find("the LPS reports"), std::string::npos)
      << status;
  EXPECT_NE(status.message().find(absl::StrCat("step ", kSteps - 1)),
            std::string::npos)
      << status;
}

// The restart tests train kRestartSteps steps; the LPS refuses the push of
// kRefused as if it had restarted from its state at an earlier step.
constexpr uint64_t kRestartSteps = 6;
constexpr uint64_t kRefused = 4;

FakeLpsOptions RestartAt(uint64_t next_step) {
  FakeLpsOptions lps;
  lps.steps = kRestartSteps;
  lps.restart.emplace();
  lps.restart->refused_step = kRefused;
  lps.restart->next_step = next_step;
  return lps;
}

TEST_P(LpsProtocolTest, RejoinsARestartedLpsAndRedoesTheStepsItLost) {
  FakeLpsOptions lps = RestartAt(/*next_step=*/2);
  // The parameters the worker holds when it pushes step 2 again: what the
  // rejoin loaded (the worker waits for the answer meanwhile).
  std::optional<std::vector<float>> at_redo;
  int pushes_of_2 = 0;
  lps.on_push = [&](const tern::v1::PushPullRequest& push) {
    if (push.step() == 2 && ++pushes_of_2 == 2) at_redo = Loaded();
  };
  const absl::Status status = Train(lps);
  ASSERT_TRUE(status.ok()) << status;

  // The rejoin is the first join without worker 0's start.
  const std::vector<tern::v1::JoinRequest> joins = lps_->joins();
  ASSERT_EQ(joins.size(), 2u);
  EXPECT_GT(joins[0].initial_weights_size(), 0);
  EXPECT_EQ(joins[1].initial_weights_size(), 0);
  tern::v1::JoinRequest first = joins[0];
  first.clear_initial_weights();
  EXPECT_TRUE(joins[1].SerializeAsString() == first.SerializeAsString())
      << "the rejoin is not the first join without its start";

  // The worker loaded the restored weights and trained on from step 2.
  ASSERT_TRUE(at_redo.has_value());
  for (const float w : *at_redo) ASSERT_EQ(w, 0.25f);
  EXPECT_EQ(lps_->pushed_steps(),
            (std::vector<uint64_t>{0, 1, 2, 3, 4, 2, 3, 4, 5}));
  // Steps 2 and 3 were recorded twice; the refused step 4 once.
  EXPECT_EQ(RecordedSteps(), (std::vector<uint64_t>{0, 1, 2, 3, 2, 3, 4, 5}));
  for (const float w : Loaded()) ASSERT_EQ(w, WeightOf(kRestartSteps - 1));
  EXPECT_EQ(trainer_->final_checksum(), ChecksumOfFloats(Loaded()));

  const std::vector<std::string> warnings = log_.Lines(spdlog::level::warn);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("restarted from its state: rejoined at step 2 "
                             "(redoing 3 step(s) from step 2)"),
            std::string::npos)
      << warnings[0];
}

TEST_P(LpsProtocolTest, ARejoinAtTheStepAfterTheRefusedOneCompletesIt) {
  // The LPS's state holds the last step: the rejoin's weights are the
  // final model, and nothing is redone.
  FakeLpsOptions lps = RestartAt(/*next_step=*/kRestartSteps);
  lps.restart->refused_step = kRestartSteps - 1;
  const absl::Status status = Train(lps);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(lps_->joins().size(), 2u);
  EXPECT_EQ(lps_->pushed_steps(), (std::vector<uint64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(RecordedSteps(), (std::vector<uint64_t>{0, 1, 2, 3, 4, 5}));
  for (const float w : Loaded()) ASSERT_EQ(w, 0.25f);
  EXPECT_EQ(trainer_->final_checksum(), ChecksumOfFloats(Loaded()));
  EXPECT_TRUE(trainer_->final_evaluation().has_value());
  const std::vector<std::string> warnings = log_.Lines(spdlog::level::warn);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find(absl::StrCat("rejoined at step ", kRestartSteps,
                                          " (its state holds step ",
                                          kRestartSteps - 1, ")")),
            std::string::npos)
      << warnings[0];
}

TEST_P(LpsProtocolTest, RejoinWeightsThatDisagreeWithTheirChecksumAreAnError) {
  FakeLpsOptions lps = RestartAt(/*next_step=*/2);
  lps.restart->checksum_error = 1;
  const absl::Status status = Train(lps);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_NE(status.message().find(absl::StrCat("step ", kRefused, ":")),
            std::string::npos)
      << status;
  // Named for what they are, not for a --broadcast_start.
  EXPECT_NE(status.message().find("checksum"), std::string::npos) << status;
  EXPECT_NE(status.message().find("the restarted LPS's are"), std::string::npos)
      << status;
  EXPECT_EQ(status.message().find("worker 0"), std::string::npos) << status;
  EXPECT_EQ(lps_->pushed_steps().back(), kRefused);
}

TEST_P(LpsProtocolTest, ARejoinPastTheStepAfterTheRefusedOneIsAnError) {
  const absl::Status status = Train(RestartAt(/*next_step=*/kRefused + 2));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_NE(status.message().find(absl::StrCat("step ", kRefused, ":")),
            std::string::npos)
      << status;
  EXPECT_NE(status.message().find(absl::StrCat("at step ", kRefused + 2)),
            std::string::npos)
      << status;
  EXPECT_EQ(lps_->pushed_steps().back(), kRefused);
}

TEST_P(LpsProtocolTest, AnLpsThatRefusesEveryRejoinedStepEndsTheRun) {
  FakeLpsOptions lps = RestartAt(/*next_step=*/kRefused);
  lps.restart->refusals = 1000;
  const absl::Status status = Train(lps);
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange) << status;
  EXPECT_NE(status.message().find("10 recoveries in a row"), std::string::npos)
      << status;
  // The first join and ten rejoins, each followed by the refused push.
  EXPECT_EQ(lps_->joins().size(), 11u);
  EXPECT_EQ(lps_->pushed_steps().size(), kRefused + 11);
}

TEST_P(LpsProtocolTest, OtherRefusalsEndTheRunWithoutARejoin) {
  FakeLpsOptions lps = RestartAt(/*next_step=*/2);
  lps.restart->code = absl::StatusCode::kFailedPrecondition;
  const absl::Status status = Train(lps);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_NE(status.message().find(absl::StrCat("step ", kRefused, ":")),
            std::string::npos)
      << status;
  EXPECT_EQ(lps_->joins().size(), 1u);
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
