// Runs whole workers as threads against in-process shards reached over real
// gRPC on loopback: a minimal fake of the ParameterServer service below (the
// two barriers of DESIGN section 3, aggregating with the kernels' own
// Aggregation), which pins the worker's side of the protocol down on its
// own, and the real shard of server/ (a test-only dependency), which checks
// that the two roles agree.
#include "worker/trainer.h"

#include <atomic>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/net/server.h"
#include "core/wire.h"
#include "grpc/grpc.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/codec_registry.h"
#include "kernels/terngrad.h"
#include "tests/support/in_process_shard.h"
#include "torch/cuda.h"
#include "worker/device_encoder.h"

namespace tern::worker {
namespace {

constexpr absl::Duration kBarrierTimeout = absl::Seconds(20);

::testing::Environment* const kGrpcEnvironment =
    ::testing::AddGlobalTestEnvironment(new GrpcEnvironment);

// One shard: Join fixes the run from the first joiner; ShareScalers and
// PushPull wait for all N workers of a step; CheckParams compares each
// step's checksums.
class FakeShard final : public tern::v1::ParameterServer::Service {
 public:
  explicit FakeShard(uint32_t num_workers) : num_workers_(num_workers) {}

  int pushes() const {
    absl::MutexLock lock(&mu_);
    return pushes_;
  }
  int scaler_calls() const {
    absl::MutexLock lock(&mu_);
    return scaler_calls_;
  }
  // Worker 0's push of step 0: chunk key -> (codec, elements, data bytes).
  struct Pushed {
    tern::v1::Codec codec;
    uint64_t num_elements;
    size_t data_bytes;
  };
  std::map<uint32_t, Pushed> first_push() const {
    absl::MutexLock lock(&mu_);
    return first_push_;
  }

  grpc::Status Join(grpc::ServerContext*, const tern::v1::JoinRequest* req,
                    tern::v1::JoinResponse* resp) override {
    absl::MutexLock lock(&mu_);
    if (!configured_) {
      std::vector<uint64_t> elements;
      for (const auto& tensor : req->param_spec().tensors()) {
        uint64_t n = 1;
        for (const int64_t dim : tensor.shape()) n *= dim;
        elements.push_back(n);
      }
      const auto& config = req->config();
      // The values of ShardAssignment are the proto's (server/wire.cc).
      auto partition = Partition::Create(
          elements, config.partition_bytes(), config.num_shards(),
          static_cast<ShardAssignment>(config.shard_assignment()));
      if (!partition.ok()) return Error(partition.status());
      keys_ = partition->ChunksOfShard(req->shard_index());
      kernels::CodecOptions run;
      run.id = static_cast<kernels::CodecId>(config.codec());
      run.clip = config.clip();
      run.push_layout = static_cast<kernels::Layout>(config.push_layout());
      run.pull_layout = static_cast<kernels::Layout>(config.pull_layout());
      auto run_codec = kernels::MakeCodec(run);
      if (!run_codec.ok()) return Error(run_codec.status());
      run_codec_ = *std::move(run_codec);
      kernels::CodecOptions fp32;
      fp32.id = kernels::CodecId::kFp32;
      fp32.push_layout = fp32.pull_layout = kernels::Layout::kRaw;
      fp32_codec_ = *kernels::MakeCodec(fp32);
      fp32_keys_.insert(config.fp32_chunk_keys().begin(),
                        config.fp32_chunk_keys().end());
      checksum_ = req->param_checksum();
      configured_ = true;
    } else if (req->param_checksum() != checksum_) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "initial parameters differ");
    }
    resp->set_shard_index(req->shard_index());
    for (const uint32_t key : keys_) resp->add_chunk_keys(key);
    return grpc::Status::OK;
  }

  grpc::Status ShareScalers(grpc::ServerContext*,
                            const tern::v1::ShareScalersRequest* req,
                            tern::v1::ShareScalersResponse* resp) override {
    absl::MutexLock lock(&mu_);
    ++scaler_calls_;
    ScalerRound& round = scaler_rounds_[req->step()];
    for (const auto& s : req->scalers()) {
      round.max[s.chunk_key()] = std::max(round.max[s.chunk_key()], s.scaler());
    }
    ++round.arrived;
    if (!Await(&round.arrived)) return Timeout();
    resp->set_step(req->step());
    for (const auto& [key, scaler] : round.max) {
      auto* out = resp->add_scalers();
      out->set_chunk_key(key);
      out->set_scaler(scaler);
    }
    return grpc::Status::OK;
  }

  grpc::Status PushPull(grpc::ServerContext*,
                        const tern::v1::PushPullRequest* req,
                        tern::v1::PushPullResponse* resp) override {
    absl::MutexLock lock(&mu_);
    ++pushes_;
    PushRound& round = push_rounds_[req->step()];
    for (const auto& chunk : req->chunks()) {
      if (req->step() == 0 && req->worker_id() == 0) {
        first_push_[chunk.chunk_key()] =
            Pushed{chunk.payload().codec(), chunk.payload().num_elements(),
                   chunk.payload().data().size()};
      }
      auto payload = core::PayloadFromWire(chunk.payload());
      if (!payload.ok()) return Error(payload.status());
      auto& aggregation = round.aggregations[chunk.chunk_key()];
      if (aggregation == nullptr) {
        const kernels::Codec& codec =
            fp32_keys_.count(chunk.chunk_key()) ? *fp32_codec_ : *run_codec_;
        aggregation = codec.NewAggregation(payload->num_elements, num_workers_);
      }
      const absl::Status added = aggregation->Add(req->worker_id(), *payload);
      if (!added.ok()) return Error(added);
    }
    if (++round.arrived == num_workers_) {
      round.answer.set_step(req->step());
      for (auto& [key, aggregation] : round.aggregations) {
        auto sum = aggregation->Finish();
        if (!sum.ok()) return Error(sum.status());
        auto* out = round.answer.add_chunks();
        out->set_chunk_key(key);
        core::PayloadToWire(*std::move(sum), out->mutable_payload());
      }
    }
    if (!Await(&round.arrived)) return Timeout();
    *resp = round.answer;
    return grpc::Status::OK;
  }

  grpc::Status CheckParams(grpc::ServerContext*,
                           const tern::v1::CheckParamsRequest* req,
                           tern::v1::CheckParamsResponse*) override {
    absl::MutexLock lock(&mu_);
    const auto [it, first] =
        checks_.emplace(req->step(), req->param_checksum());
    if (!first && it->second != req->param_checksum()) {
      return grpc::Status(
          grpc::StatusCode::FAILED_PRECONDITION,
          absl::StrCat("step ", req->step(), ": checksums differ"));
    }
    return grpc::Status::OK;
  }

 private:
  struct ScalerRound {
    uint32_t arrived = 0;
    std::map<uint32_t, float> max;
  };
  struct PushRound {
    uint32_t arrived = 0;
    std::map<uint32_t, std::unique_ptr<kernels::Aggregation>> aggregations;
    tern::v1::PushPullResponse answer;
  };

  static grpc::Status Error(const absl::Status& status) {
    return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                        std::string(status.message()));
  }
  static grpc::Status Timeout() {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "barrier timeout");
  }
  // Waits until all workers arrived; false on timeout.
  bool Await(uint32_t* arrived) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const uint32_t n = num_workers_;
    const auto all = [arrived, n] { return *arrived >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&all), kBarrierTimeout);
  }

  const uint32_t num_workers_;
  mutable absl::Mutex mu_;
  bool configured_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<uint32_t> keys_ ABSL_GUARDED_BY(mu_);
  std::set<uint32_t> fp32_keys_ ABSL_GUARDED_BY(mu_);
  uint64_t checksum_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<kernels::Codec> run_codec_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<kernels::Codec> fp32_codec_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, ScalerRound> scaler_rounds_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, PushRound> push_rounds_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, uint64_t> checks_ ABSL_GUARDED_BY(mu_);
  int pushes_ ABSL_GUARDED_BY(mu_) = 0;
  int scaler_calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint32_t, Pushed> first_push_ ABSL_GUARDED_BY(mu_);
};

// kReal: server/'s shard (tests/support/in_process_shard.h).
enum class ShardKind { kFake, kReal };

struct WorkerResult {
  absl::Status status;
  uint64_t checksum = 0;
  std::optional<Evaluation> evaluation;
  std::vector<std::string> lines;  // the JSONL records
};

// A cluster of `num_shards` fake shards and `options.num_workers` workers
// training in threads. `tamper(worker, data, model)` may change a worker's
// inputs before it starts.
class Cluster {
 public:
  Cluster(const WorkerOptions& options, uint32_t num_shards,
          ShardKind kind = ShardKind::kFake,
          absl::Duration barrier_timeout = absl::Seconds(20))
      : options_(options) {
    for (uint32_t s = 0; kind == ShardKind::kReal && s < num_shards; ++s) {
      real_shards_.push_back(std::make_unique<InProcessShard>(
          s, num_shards, options.num_workers, barrier_timeout));
      options_.ps.push_back(
          absl::StrCat("127.0.0.1:", real_shards_.back()->port()));
    }
    for (uint32_t s = 0; kind == ShardKind::kFake && s < num_shards; ++s) {
      shards_.push_back(std::make_unique<FakeShard>(options.num_workers));
      net::ServerOptions server_options;
      server_options.listen = "127.0.0.1:0";
      server_options.max_message_bytes = 64 << 20;
      servers_.push_back(*net::Server::Start(
          server_options, {{shards_.back().get(), "tern.v1.ParameterServer"}}));
      options_.ps.push_back(absl::StrCat("127.0.0.1:", servers_.back()->port()));
    }
  }
  ~Cluster() {
    for (auto& server : servers_) server->Shutdown(absl::ZeroDuration());
  }

  // Client timeouts of the workers.
  absl::Duration rpc_timeout = absl::Seconds(30);
  // A TernGrad encoder for worker w, as if it trained on a GPU (null: none).
  std::function<std::unique_ptr<DeviceEncoder>(uint32_t)> encoder_for;
  absl::Duration join_timeout = absl::Seconds(30);

  const WorkerOptions& options() const { return options_; }
  FakeShard& shard(int s) { return *shards_[s]; }

  std::vector<WorkerResult> Train(
      const std::function<void(uint32_t, TrainTest*, Model*)>& tamper = {}) {
    const uint32_t n = options_.num_workers;
    std::vector<WorkerResult> results(n);
    std::vector<std::unique_ptr<Trainer>> trainers;
    std::vector<std::unique_ptr<PsClient>> clients;
    std::vector<std::unique_ptr<MetricsWriter>> writers;
    std::vector<std::string> paths;
    // Models are built one after the other: torch::manual_seed and the
    // initializers share libtorch's global generator.
    for (uint32_t w = 0; w < n; ++w) {
      WorkerOptions options = options_;
      options.worker_id = w;
      auto data = LoadDataset(options.dataset, "", options.seed);
      torch::manual_seed(options.seed);
      absl::StatusOr<std::unique_ptr<Trainer>> trainer =
          absl::UnknownError("not built");
      if (!data.ok()) {
        trainer = data.status();
      } else if (auto model = MakeModel(options.model, data->train.shape);
                 !model.ok()) {
        trainer = model.status();
      } else {
        if (tamper) tamper(w, &*data, model->get());
        trainer = Trainer::Create(options, *model, *std::move(data),
                                  MakeNullLogger(),
                                  encoder_for ? encoder_for(w) : nullptr);
      }
      if (!trainer.ok()) {
        ADD_FAILURE() << "worker " << w << ": " << trainer.status();
        results[w].status = trainer.status();
        return results;
      }
      PsClientOptions client_options;
      client_options.rpc_timeout = rpc_timeout;
      client_options.join_timeout = join_timeout;
      client_options.push_order = ParsePushOrder(options.push_order);
      client_options.max_message_bytes = (*trainer)->max_message_bytes();
      clients.push_back(
          *PsClient::Connect(options.ps, client_options, MakeNullLogger()));
      paths.push_back(absl::StrCat(std::getenv("TEST_TMPDIR"), "/worker", w,
                                   "_", reinterpret_cast<uintptr_t>(this),
                                   ".jsonl"));
      writers.push_back(*MetricsWriter::Open(paths.back()));
      trainers.push_back(*std::move(trainer));
    }
    std::vector<std::thread> threads;
    for (uint32_t w = 0; w < n; ++w) {
      threads.emplace_back([&, w] {
        results[w].status = trainers[w]->Run(*clients[w], writers[w].get());
        results[w].checksum = trainers[w]->final_checksum();
        results[w].evaluation = trainers[w]->final_evaluation();
      });
    }
    for (auto& thread : threads) thread.join();
    for (uint32_t w = 0; w < n; ++w) {
      writers[w].reset();
      std::ifstream in(paths[w]);
      for (std::string line; std::getline(in, line);) {
        results[w].lines.push_back(line);
      }
    }
    return results;
  }

 private:
  WorkerOptions options_;
  std::vector<std::unique_ptr<FakeShard>> shards_;
  std::vector<std::unique_ptr<net::Server>> servers_;
  std::vector<std::unique_ptr<InProcessShard>> real_shards_;
};

WorkerOptions SmallRun() {
  WorkerOptions options;
  options.num_workers = 2;
  options.model = "lenet";
  options.dataset = "synthetic";
  options.batch_size = 32;
  options.steps = 4;
  options.lr = 0.02;
  options.momentum = 0.9;
  options.weight_decay = 0;
  options.eval_every = 0;
  options.check_every = 2;
  options.seed = 5;
  // 256 KiB chunks: LeNet's 3136x1024 layer becomes a dozen chunks.
  options.partition_bytes = 256 << 10;
  return options;
}

// The value of a numeric field of a JSONL record.
double Field(const std::string& line, const std::string& name) {
  const std::string key = "\"" + name + "\":";
  const size_t at = line.find(key);
  if (at == std::string::npos) return NAN;
  return std::stod(line.substr(at + key.size()));
}

std::string ChecksumField(const std::string& line) {
  const std::string key = "\"param_checksum\":\"";
  const size_t at = line.find(key);
  if (at == std::string::npos) return "";
  return line.substr(at + key.size(), 18);
}

// Trains the cluster's n workers into *results; each must run every step.
void TrainAll(Cluster& cluster, size_t n, uint64_t steps,
              std::vector<WorkerResult>* results) {
  *results = cluster.Train();
  ASSERT_EQ(results->size(), n);
  for (const WorkerResult& r : *results) {
    ASSERT_TRUE(r.status.ok()) << r.status;
    ASSERT_EQ(r.lines.size(), steps);
  }
}

TEST(TrainerTest, TwoTernGradWorkersStayIdenticalAndLearn) {
  WorkerOptions options = SmallRun();
  options.steps = 24;
  options.eval_every = 12;
  options.check_every = 6;
  Cluster cluster(options, 2);
  std::vector<WorkerResult> results;
  ASSERT_NO_FATAL_FAILURE(TrainAll(cluster, 2, options.steps, &results));
  EXPECT_EQ(results[0].checksum, results[1].checksum);
  EXPECT_NE(results[0].checksum, 0u);

  // Every checked step has the same checksum in both workers' records.
  int checks = 0;
  for (size_t step = 0; step < options.steps; ++step) {
    const std::string a = ChecksumField(results[0].lines[step]);
    EXPECT_EQ(a, ChecksumField(results[1].lines[step])) << step;
    EXPECT_EQ(!a.empty(), (step + 1) % 6 == 0) << step;
    if (!a.empty()) ++checks;
  }
  EXPECT_EQ(checks, 4);

  // The loss goes down and the model beats chance (10 classes) clearly.
  double first = 0, last = 0;
  for (uint32_t w = 0; w < 2; ++w) {
    for (int i = 0; i < 4; ++i) {
      first += Field(results[w].lines[i], "loss");
      last += Field(results[w].lines[options.steps - 1 - i], "loss");
    }
  }
  EXPECT_LT(last, 0.5 * first) << "first " << first << " last " << last;
  ASSERT_TRUE(results[0].evaluation.has_value());
  EXPECT_GT(results[0].evaluation->accuracy, 0.6);
  EXPECT_EQ(results[0].evaluation->accuracy, results[1].evaluation->accuracy);

  // The record contract: TernGrad pushes about 1.6 bits an element (the
  // default base 3), a sum of two workers Huffman-coded in fewer bits than
  // radix 5's 2.4; evaluations where asked.
  const std::string& step0 = results[0].lines[0];
  const double fp32_bytes = Field(step0, "fp32_bytes");
  EXPECT_GT(fp32_bytes, 4e6);  // LeNet has more than a million parameters
  EXPECT_LT(Field(step0, "push_bytes"), fp32_bytes / 19);
  EXPECT_GT(Field(step0, "push_bytes"), fp32_bytes / 21);
  EXPECT_LT(Field(step0, "pull_bytes"), fp32_bytes / 13.5);
  EXPECT_GT(Field(step0, "push_msg_bytes"), Field(step0, "push_bytes"));
  EXPECT_GT(Field(step0, "pull_msg_bytes"), Field(step0, "pull_bytes"));
  EXPECT_EQ(Field(step0, "worker"), 0);
  EXPECT_EQ(Field(results[1].lines[3], "worker"), 1);
  EXPECT_EQ(Field(results[1].lines[3], "step"), 3);
  EXPECT_TRUE(std::isnan(Field(step0, "test_accuracy")));
  EXPECT_FALSE(std::isnan(Field(results[0].lines[11], "test_accuracy")));
  const std::string& final_line = results[1].lines.back();
  EXPECT_NE(final_line.find("\"final\":true"), std::string::npos);
  EXPECT_FALSE(std::isnan(Field(final_line, "test_accuracy")));
  EXPECT_FALSE(std::isnan(Field(final_line, "test_loss")));
  EXPECT_FALSE(ChecksumField(final_line).empty());
  EXPECT_GE(Field(final_line, "wall_s"), Field(results[1].lines[0], "wall_s"));
  EXPECT_EQ(cluster.shard(0).pushes(), 2 * 24);
  EXPECT_EQ(cluster.shard(0).scaler_calls(), 2 * 24);
}

// Runs 2 workers on 3 real shards with `options`, then with `changed`:
// both runs must end with the same parameters and move the same payload
// bytes at every step.
void ExpectTheSameRun(const WorkerOptions& options,
                      const WorkerOptions& changed, const std::string& what) {
  std::vector<WorkerResult> before, after;
  {
    Cluster cluster(options, 3, ShardKind::kReal);
    ASSERT_NO_FATAL_FAILURE(TrainAll(cluster, 2, options.steps, &before));
  }
  {
    Cluster cluster(changed, 3, ShardKind::kReal);
    ASSERT_NO_FATAL_FAILURE(TrainAll(cluster, 2, changed.steps, &after));
  }
  EXPECT_EQ(after[0].checksum, after[1].checksum) << what;
  EXPECT_EQ(after[0].checksum, before[0].checksum) << what;
  for (uint64_t step = 0; step < options.steps; ++step) {
    for (const char* field : {"push_bytes", "pull_bytes"}) {
      EXPECT_EQ(Field(after[0].lines[step], field),
                Field(before[0].lines[step], field))
          << what << " step " << step << " " << field;
    }
  }
}

// --overlap pushes each shard from the gradient hooks, with the shards in
// backward order; every chunk's bytes are those of the sequential step, so
// both runs end with the same parameters and move the same payload bytes.
TEST(TrainerTest, OverlapEndsWithTheSequentialStepsParameters) {
  for (const char* codec : {"terngrad", "fp32"}) {
    WorkerOptions options = SmallRun();
    options.steps = 6;
    options.codec = *kernels::ParseCodecName(codec);
    WorkerOptions overlapped = options;
    overlapped.overlap = true;
    ExpectTheSameRun(options, overlapped, codec);
  }
}

// --push_order=in_turn sends the shards' pushes one after another (each
// once the previous real shard has taken its push): only the order changes.
TEST(TrainerTest, PushesInTurnEndWithTheSameParameters) {
  WorkerOptions options = SmallRun();
  options.steps = 4;
  WorkerOptions in_turn = options;
  in_turn.push_order = "in_turn";
  ExpectTheSameRun(options, in_turn, "in_turn");
  // Every shard of this cluster is on loopback, so local_last finds them all
  // on this host and pushes at once (ps_client_test holds shards back).
  WorkerOptions local_last = options;
  local_last.push_order = "local_last";
  ExpectTheSameRun(options, local_last, "local_last");
}

// --overlap needs the gradient of each chunk alone: a codec whose error
// feedback takes every chunk at once is refused before the run starts.
TEST(TrainerTest, OverlapRefusesErrorFeedback) {
  WorkerOptions options = SmallRun();
  options.codec = *kernels::ParseCodecName("onebit");
  options.overlap = true;
  options.ps = {"127.0.0.1:1"};
  auto data = LoadDataset(options.dataset, "", options.seed);
  ASSERT_TRUE(data.ok());
  auto model = MakeModel(options.model, data->train.shape);
  ASSERT_TRUE(model.ok());
  auto trainer = Trainer::Create(options, *model, *std::move(data),
                                 MakeNullLogger(), nullptr);
  EXPECT_EQ(trainer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(trainer.status().message(), ::testing::HasSubstr("--overlap"));
}

// --final_eval=false: the last step is not evaluated (a benchmark times
// only steps), and is still final and checked.
TEST(TrainerTest, NoFinalEvaluationWhenTurnedOff) {
  WorkerOptions options = SmallRun();
  options.final_eval = false;
  Cluster cluster(options, 2);
  std::vector<WorkerResult> results;
  ASSERT_NO_FATAL_FAILURE(TrainAll(cluster, 2, options.steps, &results));
  for (const WorkerResult& r : results) {
    const std::string& final_line = r.lines.back();
    EXPECT_NE(final_line.find("\"final\":true"), std::string::npos);
    EXPECT_TRUE(std::isnan(Field(final_line, "test_accuracy")));
    EXPECT_EQ(Field(final_line, "eval_s"), 0);
    EXPECT_FALSE(ChecksumField(final_line).empty());
    EXPECT_FALSE(r.evaluation.has_value());
  }
  EXPECT_EQ(results[0].checksum, results[1].checksum);
}

struct Variant {
  const char* name;
  const char* codec;
  const char* packing;
  const char* sum_packing;
  std::vector<std::string> fp32_tensors;
  uint32_t num_shards;
};

class TrainerVariantTest : public ::testing::TestWithParam<Variant> {};

TEST_P(TrainerVariantTest, ReplicasEndBitIdentical) {
  const Variant& v = GetParam();
  WorkerOptions options = SmallRun();
  options.codec = *kernels::ParseCodecName(v.codec);
  options.packing = v.packing;
  options.sum_packing = v.sum_packing;
  options.fp32_tensors = v.fp32_tensors;
  Cluster cluster(options, v.num_shards);
  const std::vector<WorkerResult> results = cluster.Train();
  for (const WorkerResult& r : results) {
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.lines.size(), options.steps);
  }
  EXPECT_EQ(results[0].checksum, results[1].checksum);
  const double fp32_bytes = Field(results[0].lines[0], "fp32_bytes");
  const double push_bytes = Field(results[0].lines[0], "push_bytes");
  if (std::string(v.codec) == "fp32") {
    EXPECT_EQ(push_bytes, fp32_bytes);
  } else if (std::string(v.codec) == "fp16") {
    EXPECT_EQ(push_bytes, fp32_bytes / 2);
  } else {
    EXPECT_LT(push_bytes, fp32_bytes / 8);
  }
  // Only TernGrad shares scalers.
  int scaler_calls = 0;
  for (uint32_t s = 0; s < v.num_shards; ++s) {
    scaler_calls += cluster.shard(s).scaler_calls();
  }
  EXPECT_EQ(scaler_calls, std::string(v.codec) == "terngrad"
                              ? 2 * options.steps * v.num_shards
                              : 0);
}

INSTANTIATE_TEST_SUITE_P(
    Codecs, TrainerVariantTest,
    ::testing::Values(
        Variant{
            "base3_radix_last_fp32", "terngrad", "base3", "radix", {"last"}, 3},
        Variant{"fp32", "fp32", "2bit", "bits", {}, 2},
        Variant{"fp16_one_shard", "fp16", "2bit", "bits", {}, 1}),
    [](const auto& info) { return std::string(info.param.name); });

// AdaGrad replicas stay identical; --eval_ema_decay changes what is
// evaluated and nothing that is trained.
TEST(TrainerTest, AdaGradWithAnEvaluatedMovingAverage) {
  WorkerOptions options = SmallRun();
  options.optimizer = "adagrad";
  options.lr = 0.01;
  options.steps = 8;
  std::vector<WorkerResult> plain = Cluster(options, 2).Train();
  options.eval_ema_decay = 0.9999;
  std::vector<WorkerResult> averaged = Cluster(options, 2).Train();
  for (const auto* results : {&plain, &averaged}) {
    ASSERT_EQ(results->size(), 2u);
    for (const WorkerResult& r : *results) {
      ASSERT_TRUE(r.status.ok()) << r.status;
      ASSERT_TRUE(r.evaluation.has_value());
    }
    EXPECT_EQ((*results)[0].checksum, (*results)[1].checksum);
  }
  EXPECT_EQ(plain[0].checksum, averaged[0].checksum);
  EXPECT_NE(plain[0].evaluation->loss, averaged[0].evaluation->loss);
  EXPECT_EQ(averaged[0].evaluation->loss, averaged[1].evaluation->loss);
}

TEST(TrainerTest, ANonFiniteGradientStopsTheJobBeforeAnyPush) {
  WorkerOptions options = SmallRun();
  options.num_workers = 1;
  Cluster cluster(options, 1);
  const auto results = cluster.Train([](uint32_t, TrainTest* data, Model*) {
    data->train.images.fill_(std::numeric_limits<float>::quiet_NaN());
  });
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(results[0].status.message().find("step 0"), absl::string_view::npos)
      << results[0].status;
  EXPECT_NE(results[0].status.message().find("non-finite"),
            absl::string_view::npos);
  EXPECT_NE(results[0].status.message().find(".weight"),
            absl::string_view::npos);
  EXPECT_EQ(cluster.shard(0).pushes(), 0);
}

TEST(TrainerTest, DivergedReplicasStopWithTheStep) {
  WorkerOptions options = SmallRun();
  options.num_workers = 1;
  options.check_every = 2;
  // Two one-worker runs on one shard each would never diverge; instead one
  // worker checks against a shard that already holds another checksum for
  // step 1.
  Cluster cluster(options, 1);
  grpc::ServerContext context;
  tern::v1::CheckParamsRequest other;
  other.set_step(1);
  other.set_param_checksum(12345);
  tern::v1::CheckParamsResponse ignored;
  ASSERT_TRUE(cluster.shard(0).CheckParams(&context, &other, &ignored).ok());
  const auto results = cluster.Train();
  EXPECT_EQ(results[0].status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(results[0].status.message().find("step 1:"),
            absl::string_view::npos)
      << results[0].status;
  // The record of the step that disagreed carries the checksum.
  ASSERT_EQ(results[0].lines.size(), 2u);
  EXPECT_FALSE(ChecksumField(results[0].lines[1]).empty());
}

TEST(TrainerTest, RejectsOptionsThatDoNotFitTheModel) {
  WorkerOptions options = SmallRun();
  options.ps = {"127.0.0.1:1"};
  auto data = LoadDataset("synthetic", "", 1);
  ASSERT_TRUE(data.ok());
  torch::manual_seed(1);
  auto model = MakeModel("lenet", data->train.shape);
  ASSERT_TRUE(model.ok());

  options.fp32_tensors = {"no_such_tensor"};
  auto trainer = Trainer::Create(options, *model, *data, MakeNullLogger());
  ASSERT_FALSE(trainer.ok());
  EXPECT_NE(trainer.status().message().find("no_such_tensor"),
            absl::string_view::npos);

  options.fp32_tensors = {};
  options.batch_size = 100000;  // more than the synthetic set holds
  EXPECT_FALSE(Trainer::Create(options, *model, *data, MakeNullLogger()).ok());
}

// Debian's libtorch is CPU-only: --device=cuda must say so, not crash in
// libtorch or fall back to the CPU silently.
TEST(TrainerTest, ACudaDeviceWithoutCudaIsAClearError) {
  if (torch::cuda::is_available()) {
    GTEST_SKIP() << "this libtorch has CUDA: the error cannot happen here";
  }
  WorkerOptions options = SmallRun();
  options.ps = {"127.0.0.1:1"};
  options.device = "cuda";
  auto data = LoadDataset("synthetic", "", 1);
  ASSERT_TRUE(data.ok());
  torch::manual_seed(1);
  auto model = MakeModel("lenet", data->train.shape);
  ASSERT_TRUE(model.ok());
  auto trainer = Trainer::Create(options, *model, *data, MakeNullLogger());
  ASSERT_FALSE(trainer.ok());
  EXPECT_EQ(trainer.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(trainer.status().message()),
              ::testing::HasSubstr("--device=cuda: libtorch sees no CUDA"));
  // The model stayed where it was.
  EXPECT_TRUE((*model)->parameters().front().device().is_cpu());
}

TEST(TrainerTest, JoinRequestDescribesTheRun) {
  WorkerOptions options = SmallRun();
  options.ps = {"127.0.0.1:1", "127.0.0.1:2"};
  options.worker_id = 1;
  options.packing = "base3";
  options.sum_packing = "radix";
  options.fp32_tensors = {"last"};
  options.clip = 2.0;
  options.run_id = "run-7";
  auto data = LoadDataset("synthetic", "", 1);
  ASSERT_TRUE(data.ok());
  torch::manual_seed(options.seed);
  auto model = MakeModel("lenet", data->train.shape);
  ASSERT_TRUE(model.ok());
  auto trainer = Trainer::Create(options, *model, *data, MakeNullLogger());
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  const tern::v1::JoinRequest join = (*trainer)->MakeJoinRequest();
  EXPECT_EQ(join.worker_id(), 1u);
  EXPECT_EQ(join.config().run_id(), "run-7");
  EXPECT_EQ(join.config().num_workers(), 2u);
  EXPECT_EQ(join.config().num_shards(), 2u);
  EXPECT_EQ(join.config().partition_bytes(), 256u << 10);
  EXPECT_EQ(join.config().seed(), options.seed);
  EXPECT_EQ(join.config().codec(), tern::v1::CODEC_TERNGRAD);
  EXPECT_EQ(join.config().push_layout(), tern::v1::LAYOUT_TERNARY_BASE3);
  EXPECT_EQ(join.config().pull_layout(), tern::v1::LAYOUT_SUM_RADIX);
  EXPECT_EQ(join.config().clip(), 2.0f);
  // "last" is the classifier, named "logits" in every model: its weight
  // and bias are the last two tensors, one chunk each here.
  const auto& plan = (*trainer)->plan();
  const uint32_t num_chunks = plan.partition.chunks().size();
  ASSERT_EQ(join.config().fp32_chunk_keys_size(), 2);
  EXPECT_EQ(join.config().fp32_chunk_keys(0), num_chunks - 2);
  EXPECT_EQ(join.config().fp32_chunk_keys(1), num_chunks - 1);
  EXPECT_EQ(join.param_spec().tensors_size(),
            static_cast<int>((*trainer)->params().names().size()));
  EXPECT_EQ(join.param_spec_hash(), (*trainer)->params().spec_hash());
  EXPECT_EQ(join.param_checksum(), (*trainer)->params().Checksum());
}

TEST(TrainerWithRealShardsTest, TwoWorkersTwoShardsStayIdentical) {
  WorkerOptions options = SmallRun();
  options.steps = 6;
  options.check_every = 3;
  options.fp32_tensors = {"last"};
  Cluster cluster(options, 2, ShardKind::kReal);
  const std::vector<WorkerResult> results = cluster.Train();
  for (const WorkerResult& r : results) {
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.lines.size(), options.steps);
  }
  EXPECT_EQ(results[0].checksum, results[1].checksum);
  for (size_t step : {2, 5}) {
    EXPECT_EQ(ChecksumField(results[0].lines[step]),
              ChecksumField(results[1].lines[step]));
  }
}

// --broadcast_start: worker 1 builds another start (its parameters are
// shifted); without the flag the shards refuse it at join, with it worker 1
// loads worker 0's parameters from both shards and the replicas agree.
TEST(TrainerWithRealShardsTest, BroadcastStartGivesEveryoneWorkerZerosStart) {
  WorkerOptions options = SmallRun();
  options.steps = 4;
  options.check_every = 2;
  const auto shift_worker_one = [](uint32_t worker, TrainTest*, Model* model) {
    if (worker != 1) return;
    torch::NoGradGuard no_grad;
    for (torch::Tensor parameter : model->parameters()) {
      parameter.add_(0.25);
    }
  };
  {
    Cluster cluster(options, 2, ShardKind::kReal);
    cluster.join_timeout = absl::Seconds(5);
    const std::vector<WorkerResult> refused = cluster.Train(shift_worker_one);
    EXPECT_THAT(
        absl::StrCat(refused[0].status.message(), refused[1].status.message()),
        ::testing::HasSubstr("param checksum"));
  }
  options.broadcast_start = true;
  Cluster cluster(options, 2, ShardKind::kReal);
  const std::vector<WorkerResult> results = cluster.Train(shift_worker_one);
  for (const WorkerResult& r : results) {
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.lines.size(), options.steps);
  }
  EXPECT_EQ(results[0].checksum, results[1].checksum);
  EXPECT_EQ(ChecksumField(results[0].lines[1]),
            ChecksumField(results[1].lines[1]));
}

// The GPU path's bookkeeping (worker/device_encoder.h) without a GPU: an
// encoder that runs the CPU kernels on the "device" buffer, which on the
// CPU is host memory. Counts the chunks it encodes.
class HostEncoder final : public DeviceEncoder {
 public:
  explicit HostEncoder(std::atomic<int>* encoded) : encoded_(encoded) {}

  absl::StatusOr<std::vector<kernels::ChunkStats>> Stats(
      const float* gradients, uint64_t total,
      absl::Span<const Chunk> chunks) override {
    std::vector<kernels::ChunkStats> stats;
    for (const Chunk& chunk : chunks) {
      EXPECT_LE(chunk.flat_offset + chunk.num_elements, total);
      stats.push_back(kernels::ComputeStats(
          absl::MakeConstSpan(gradients + chunk.flat_offset,
                              chunk.num_elements)));
    }
    return stats;
  }

  absl::StatusOr<std::vector<kernels::Payload>> EncodeTernGrad(
      const float* gradients, uint64_t total, absl::Span<const Chunk> chunks,
      absl::Span<const float> scalers, absl::Span<const float> clip_bounds,
      const RandomStream& stream, kernels::Layout layout) override {
    std::vector<kernels::Payload> payloads;
    EXPECT_EQ(clip_bounds.size(), chunks.size());
    for (size_t i = 0; i < chunks.size(); ++i) {
      EXPECT_LE(chunks[i].flat_offset + chunks[i].num_elements, total);
      RandomStream chunk_stream = stream;
      chunk_stream.chunk = chunks[i].key;
      kernels::Payload payload;
      payload.codec = kernels::CodecId::kTernGrad;
      payload.layout = layout;
      payload.num_elements = chunks[i].num_elements;
      payload.scalers = {scalers[i]};
      payload.data.resize(
          kernels::PackedTernaryBytes(chunks[i].num_elements, layout));
      kernels::QuantizePack(
          absl::MakeConstSpan(gradients + chunks[i].flat_offset,
                              chunks[i].num_elements),
          clip_bounds[i], scalers[i], chunk_stream, layout,
          absl::MakeSpan(reinterpret_cast<uint8_t*>(payload.data.data()),
                         payload.data.size()));
      payloads.push_back(std::move(payload));
      ++*encoded_;
    }
    return payloads;
  }

 private:
  std::atomic<int>* encoded_;
};

// A worker whose gradients are encoded where they live trains in lockstep
// with one that encodes on the host, and both end where a cluster without
// the device path ends: the pushes are the same bytes.
TEST(TrainerWithRealShardsTest, DeviceEncodingGivesTheHostReplicas) {
  WorkerOptions options = SmallRun();
  options.steps = 4;
  options.fp32_tensors = {"last"};  // copied to the host on their own
  uint64_t host_checksum = 0;
  {
    Cluster cluster(options, 2, ShardKind::kReal);
    const std::vector<WorkerResult> results = cluster.Train();
    ASSERT_TRUE(results[0].status.ok()) << results[0].status;
    host_checksum = results[0].checksum;
  }
  for (const char* packing : {"2bit", "base3"}) {
    options.packing = packing;
    std::atomic<int> encoded{0};
    Cluster cluster(options, 2, ShardKind::kReal);
    cluster.encoder_for = [&](uint32_t worker) {
      return worker == 0 ? std::make_unique<HostEncoder>(&encoded) : nullptr;
    };
    const std::vector<WorkerResult> results = cluster.Train();
    for (const WorkerResult& r : results) ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(results[0].checksum, results[1].checksum) << packing;
    EXPECT_GT(encoded.load(), 0) << "the device path was not taken";
    if (std::string(packing) == "2bit") {
      EXPECT_EQ(results[0].checksum, host_checksum);
    }
  }
}

// The compressors against the real shards, which re-encode every pull with
// the run's codec_params and keep residuals, and refuse any chunk pushed
// with another codec or layout than the run's (an fp32 chunk must travel
// raw, unwrapped by error feedback).
struct CompressorRun {
  const char* name;
  const char* codec;
  std::vector<std::string> fp32_tensors;
  double max_push_fraction;  // of fp32's bytes
};

class TrainerCompressorTest : public ::testing::TestWithParam<CompressorRun> {};

TEST_P(TrainerCompressorTest, ReplicasStayIdenticalOnRealShards) {
  const CompressorRun& run = GetParam();
  WorkerOptions options = SmallRun();
  options.codec = *kernels::ParseCodecName(run.codec);
  options.fp32_tensors = run.fp32_tensors;
  options.steps = 4;
  Cluster cluster(options, 2, ShardKind::kReal);
  const std::vector<WorkerResult> results = cluster.Train();
  for (const WorkerResult& r : results) {
    ASSERT_TRUE(r.status.ok()) << r.status;
    ASSERT_EQ(r.lines.size(), options.steps);
  }
  EXPECT_EQ(results[0].checksum, results[1].checksum);
  for (size_t step : {1, 3}) {
    EXPECT_EQ(ChecksumField(results[0].lines[step]),
              ChecksumField(results[1].lines[step]));
  }
  for (const std::string& line : results[0].lines) {
    EXPECT_TRUE(std::isfinite(Field(line, "loss"))) << line;
    EXPECT_LT(Field(line, "push_bytes"),
              run.max_push_fraction * Field(line, "fp32_bytes"))
        << line;
    EXPECT_GT(Field(line, "pull_bytes"), 0) << line;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Codecs, TrainerCompressorTest,
    ::testing::Values(
        // 1 bit an element plus two values per row: ~1/31 of fp32; the last
        // layer (10x1024) in fp32 adds 1/320.
        CompressorRun{"onebit_last_fp32", "onebit", {"last"}, 1.0 / 25},
        // 1 % of the values at 8 bytes each: ~1/50 of fp32.
        CompressorRun{"dropping", "dropping", {}, 1.0 / 25},
        // 6 bits (33 levels) an element: ~1/5.3 of fp32.
        CompressorRun{"qsgd", "qsgd", {}, 1.0 / 5}),
    [](const auto& info) { return std::string(info.param.name); });

// Dropping's threshold over the whole gradient (Aji & Heafield 2017): one
// threshold for every chunk, so chunks with large gradients keep far more
// than 1 % and the large layer less; per tensor, every large chunk keeps
// about 1 %.
TEST(TrainerTest, DroppingSelectsOneThresholdOverTheWholeGradient) {
  std::map<std::string, std::map<uint32_t, FakeShard::Pushed>> pushed;
  for (const char* scope : {"global", "tensor"}) {
    WorkerOptions options = SmallRun();
    options.num_workers = 1;
    options.steps = 1;
    options.codec = kernels::CodecId::kDropping;
    options.drop_scope = scope;
    options.drop_ratio = 0.99f;
    options.fp32_tensors = {"last"};
    Cluster cluster(options, 1);
    const std::vector<WorkerResult> results = cluster.Train();
    ASSERT_TRUE(results[0].status.ok()) << results[0].status;
    pushed[scope] = cluster.shard(0).first_push();
  }
  // Kept fractions of the chunks of at least 5000 elements (the others are
  // too small for 1 % to be a count).
  auto kept = [](const FakeShard::Pushed& p) {
    return static_cast<double>(p.data_bytes / 8) / p.num_elements;
  };
  double global_max = 0;
  int large = 0;
  for (const auto& [key, p] : pushed["tensor"]) {
    const FakeShard::Pushed& g = pushed["global"].at(key);
    if (p.codec == tern::v1::CODEC_FP32) {
      EXPECT_EQ(g.codec, tern::v1::CODEC_FP32) << key;
      EXPECT_EQ(p.data_bytes, 4 * p.num_elements) << "fp32 travels whole";
      continue;
    }
    ASSERT_EQ(p.codec, tern::v1::CODEC_DROPPING);
    if (p.num_elements < 5000) continue;
    ++large;
    // A threshold from a sample of 4096 values: 1 % within a factor 2.
    EXPECT_GE(kept(p), 0.005) << "per tensor: chunk " << key;
    EXPECT_LE(kept(p), 0.02) << "per tensor: chunk " << key;
    global_max = std::max(global_max, kept(g));
  }
  EXPECT_GE(large, 3);
  // The convolution's gradients are larger than the big layer's, which
  // holds nearly all values and so sets the global threshold.
  EXPECT_GT(global_max, 0.05)
      << "one threshold for all chunks keeps far more of some";
}

TEST(TrainerTest, JoinRequestCarriesTheCompressorsParamsAndLayouts) {
  WorkerOptions options = SmallRun();
  options.ps = {"127.0.0.1:1"};
  options.codec = kernels::CodecId::kDropping;
  options.drop_scope = "tensor";
  options.drop_survivors = "2bit";
  options.drop_ratio = 0.9f;
  options.sample_size = 123;
  auto data = LoadDataset("synthetic", "", 1);
  ASSERT_TRUE(data.ok());
  torch::manual_seed(options.seed);
  auto model = MakeModel("lenet", data->train.shape);
  ASSERT_TRUE(model.ok());
  auto trainer = Trainer::Create(options, *model, *data, MakeNullLogger());
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  const tern::v1::RunConfig config = (*trainer)->MakeJoinRequest().config();
  EXPECT_EQ(config.codec(), tern::v1::CODEC_DROPPING);
  // Survivors as (index, sign, large) words with the buckets' means.
  EXPECT_EQ(config.push_layout(), tern::v1::LAYOUT_INDEX_2BIT);
  EXPECT_EQ(config.pull_layout(), tern::v1::LAYOUT_INDEX_2BIT);
  EXPECT_EQ(config.codec_params().drop_scope(), 1u);
  EXPECT_EQ(config.codec_params().drop_survivors(), 2u);
  EXPECT_EQ(config.codec_params().drop_ratio(), 0.9f);
  EXPECT_EQ(config.codec_params().sample_size(), 123u);
  EXPECT_EQ(config.codec_params().qsgd_levels(),
            kernels::CodecOptions{}.qsgd_levels);
}

TEST(TrainerWithRealShardsTest, DifferentInitialParametersAreRefused) {
  WorkerOptions options = SmallRun();
  Cluster cluster(options, 1, ShardKind::kReal, absl::Seconds(1));
  cluster.join_timeout = absl::Seconds(3);
  const auto results =
      cluster.Train([](uint32_t worker, TrainTest*, Model* model) {
        if (worker != 1) return;
        torch::NoGradGuard no_grad;
        model->parameters().front().add_(1.0f);
      });
  // Whichever worker joined second is refused, naming the checksums; the
  // other one's join never completes its barrier.
  int refused = 0;
  for (const WorkerResult& r : results) {
    EXPECT_FALSE(r.status.ok());
    if (absl::IsFailedPrecondition(r.status) &&
        r.status.message().find("checksum") != absl::string_view::npos) {
      ++refused;
    }
  }
  EXPECT_EQ(refused, 1) << results[0].status << " / " << results[1].status;
}

TEST(EvaluateTest, CountsCorrectPredictionsInBatches) {
  // A "model" that predicts class 0 always, on 2500 examples of which 1000
  // have label 0: accuracy 0.4 whatever the batch size.
  struct ConstantModel : Model {
    ConstantModel() { bias = register_parameter("bias", torch::zeros({3})); }
    torch::Tensor forward(torch::Tensor x) override {
      return torch::tensor({5.0f, 0.0f, 0.0f}).repeat({x.size(0), 1}) + bias;
    }
    torch::Tensor bias;
  } model;
  Dataset data;
  data.images = torch::zeros({2500, 1, 2, 2});
  data.labels = torch::cat({torch::zeros({1000}, torch::kInt64),
                            torch::ones({1500}, torch::kInt64)});
  for (const int64_t batch : {1000, 7, 5000}) {
    const Evaluation e = Evaluate(model, data, batch);
    EXPECT_DOUBLE_EQ(e.accuracy, 0.4) << batch;
    EXPECT_GT(e.loss, 0);
  }
  EXPECT_TRUE(model.is_training());
}

}  // namespace
}  // namespace tern::worker
