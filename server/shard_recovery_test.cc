// A shard with a state file (--state_dir) killed at any point of a step and
// started again answers every worker exactly as a shard that was never
// killed: the same scalers and the same pull bytes at every step, for a
// summing codec (terngrad), one with a residual on the shard (onebit) and
// fp32. A "kill" drops the Aggregator: the calls it held are lost (answered
// UNAVAILABLE, as a broken connection would be) and the workers retry them
// against the new one.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/codec_registry.h"
#include "kernels/codec_test_util.h"
#include "server/aggregator.h"
#include "server/model_cut.h"
#include "server/shard_state.h"
#include "server/wire.h"

namespace tern::server {
namespace {

using kernels::CodecId;
using kernels::Layout;

constexpr uint32_t kWorkers = 2;
constexpr uint64_t kSteps = 4;
constexpr uint64_t kSeed = 11;

RunConfig Config(CodecId codec) {
  RunConfig config;
  config.run_id = "recovery";
  config.num_workers = kWorkers;
  config.num_shards = 1;
  config.partition_bytes = 64;
  config.seed = kSeed;
  config.codec = codec;
  config.push_layout = config.pull_layout =
      codec == CodecId::kOneBit ? Layout::kSignBits : Layout::kRaw;
  if (codec == CodecId::kTernGrad) {
    config.push_layout = Layout::kTernary2Bit;
    config.pull_layout = Layout::kSumBits;
  }
  return config;
}

JoinRequest Join(uint32_t worker, CodecId codec) {
  JoinRequest join;
  join.worker_id = worker;
  join.config = Config(codec);
  join.tensors = {TensorSpec{"w", {4, 9}}, TensorSpec{"b", {5}}};
  join.param_spec_hash = 0x5bec;
  join.param_checksum = 0xc0ffee;
  return join;
}

std::vector<float> Gradient(uint32_t worker, uint64_t step, uint32_t key,
                            uint64_t elements) {
  return kernels::codec_test::Gaussian(
      elements, static_cast<uint32_t>(worker * 7919 + step * 31 + key));
}

// One worker's calls, made as a worker makes them: the scalers (terngrad),
// then the push encoded with the shared scalers.
class Worker {
 public:
  Worker(uint32_t id, CodecId codec)
      : id_(id),
        codec_impl_(*kernels::MakeCodec(RunCodecOptions(Config(codec)))) {}

  ScalerRequest Scalers(uint64_t step, const JoinReply& joined,
                        const std::vector<uint64_t>& elements) const {
    ScalerRequest request{id_, step, {}};
    for (const uint32_t key : joined.chunk_keys) {
      float max = 0;
      for (float value : Gradient(id_, step, key, elements[key])) {
        max = std::max(max, std::abs(value));
      }
      request.scalers.push_back(ChunkScaler{key, max});
    }
    return request;
  }

  PushRequest Push(uint64_t step, const JoinReply& joined,
                   const std::vector<uint64_t>& elements,
                   const ScalerReply* shared) const {
    PushRequest request{id_, step, {}};
    for (const uint32_t key : joined.chunk_keys) {
      kernels::EncodeContext context;
      context.stream =
          RandomStream{kSeed, static_cast<uint32_t>(step), key, id_};
      if (shared != nullptr) {
        for (const ChunkScaler& scaler : shared->scalers) {
          if (scaler.chunk_key == key) context.scaler = scaler.scaler;
        }
      }
      request.chunks.push_back(ChunkPayload{
          key, *codec_impl_->Encode(Gradient(id_, step, key, elements[key]),
                                    context)});
    }
    return request;
  }

 private:
  uint32_t id_;
  std::unique_ptr<kernels::Codec> codec_impl_;
};

template <typename T>
struct Pending {
  std::shared_ptr<std::optional<absl::StatusOr<T>>> result =
      std::make_shared<std::optional<absl::StatusOr<T>>>();
  bool ok() const { return result->has_value() && (*result)->ok(); }
};

// A run of kSteps steps in which the shard is killed after its
// `kill_at`-th call (never when 0) and started again from its state file.
// Returns every worker's pull bytes of every step, in order.
class RecoveryRun {
 public:
  RecoveryRun(CodecId codec, std::string state_path, int kill_at)
      : codec_(codec), state_path_(std::move(state_path)), kill_at_(kill_at) {}

  std::vector<std::string> Pulls() {
    Start();
    std::vector<JoinReply> joined = JoinAll();
    // Each chunk's size, as the shard cuts the model.
    absl::StatusOr<Partition> partition =
        CutModel(Join(0, codec_), ModelLimits{1, 64 << 20, ""});
    EXPECT_TRUE(partition.ok()) << partition.status();
    std::vector<uint64_t> elements;
    for (const Chunk& chunk : partition->chunks()) {
      elements.push_back(chunk.num_elements);
    }
    std::vector<Worker> workers;
    for (uint32_t w = 0; w < kWorkers; ++w) workers.emplace_back(w, codec_);
    std::vector<std::string> pulls;
    for (uint64_t step = 0; step < kSteps; ++step) {
      ScalerAnswer shared;
      if (codec_ == CodecId::kTernGrad)
        shared = ShareAll(step, workers, joined, elements);
      std::vector<PushRequest> pushes;
      std::vector<Pending<PushAnswer>> calls(kWorkers);
      for (uint32_t w = 0; w < kWorkers; ++w) {
        pushes.push_back(
            workers[w].Push(step, joined[w], elements, shared.get()));
      }
      for (uint32_t w = 0; w < kWorkers; ++w) {
        Call(&Aggregator::PushPull, pushes[w], &calls[w]);
        Retry(&Aggregator::PushPull, pushes, &calls);
      }
      Retry(&Aggregator::PushPull, pushes, &calls);
      for (uint32_t w = 0; w < kWorkers; ++w) {
        EXPECT_TRUE(calls[w].ok()) << "worker " << w << " step " << step;
        if (!calls[w].ok()) return pulls;
        pulls.push_back(Bytes(***calls[w].result));
      }
    }
    return pulls;
  }

  int calls() const { return calls_; }

 private:
  void Start() {
    AggregatorOptions options;
    options.num_workers = kWorkers;
    options.state_path = state_path_;
    absl::StatusOr<std::unique_ptr<Aggregator>> made =
        Aggregator::Create(options, nullptr);
    ASSERT_TRUE(made.ok()) << made.status();
    shard_ = *std::move(made);
  }

  std::vector<JoinReply> JoinAll() {
    std::vector<Pending<JoinReply>> calls(kWorkers);
    std::vector<JoinRequest> joins;
    for (uint32_t w = 0; w < kWorkers; ++w) joins.push_back(Join(w, codec_));
    for (uint32_t w = 0; w < kWorkers; ++w) {
      Call(&Aggregator::Join, joins[w], &calls[w]);
      Retry(&Aggregator::Join, joins, &calls);
    }
    std::vector<JoinReply> replies;
    for (auto& call : calls) {
      EXPECT_TRUE(call.ok());
      replies.push_back(call.ok() ? ***call.result : JoinReply{});
    }
    return replies;
  }

  ScalerAnswer ShareAll(uint64_t step, const std::vector<Worker>& workers,
                        const std::vector<JoinReply>& joined,
                        const std::vector<uint64_t>& elements) {
    std::vector<ScalerRequest> requests;
    for (uint32_t w = 0; w < kWorkers; ++w) {
      requests.push_back(workers[w].Scalers(step, joined[w], elements));
    }
    std::vector<Pending<ScalerAnswer>> calls(kWorkers);
    for (uint32_t w = 0; w < kWorkers; ++w) {
      Call(&Aggregator::ShareScalers, requests[w], &calls[w]);
      Retry(&Aggregator::ShareScalers, requests, &calls);
    }
    EXPECT_TRUE(calls[0].ok() && calls[1].ok());
    if (!calls[0].ok() || !calls[1].ok()) return nullptr;
    EXPECT_EQ((***calls[0].result)->scalers.size(),
              (***calls[1].result)->scalers.size());
    return ***calls[0].result;
  }

  // One call; the shard is killed and restarted after the kill_at-th.
  template <typename Request, typename T>
  void Call(void (Aggregator::*method)(const Request&, Callback<T>),
            const Request& request, Pending<T>* call) {
    call->result->reset();
    auto result = call->result;
    (shard_.get()->*method)(request, [result](absl::StatusOr<T> answer) {
      *result = std::move(answer);
    });
    if (++calls_ == kill_at_) {
      // The calls the shard held get UNAVAILABLE, lost with the process;
      // so does this call's answer, had it one: the hard case of a step
      // answered to some workers and not to others.
      shard_.reset();
      *call->result = absl::UnavailableError("lost with the shard");
      Start();
    }
  }

  // The workers retry every call that has failed (a lost connection).
  template <typename Request, typename T>
  void Retry(void (Aggregator::*method)(const Request&, Callback<T>),
             const std::vector<Request>& requests,
             std::vector<Pending<T>>* calls) {
    for (size_t w = 0; w < calls->size(); ++w) {
      Pending<T>& call = (*calls)[w];
      if (call.result->has_value() && !(*call.result)->ok()) {
        EXPECT_EQ((*call.result)->status().code(),
                  absl::StatusCode::kUnavailable)
            << (*call.result)->status();
        Call(method, requests[w], &call);
      }
    }
  }

  static std::string Bytes(const PushAnswer& answer) {
    std::string bytes;
    for (const ChunkPayload& chunk : answer->chunks) {
      bytes +=
          absl::StrCat(chunk.chunk_key, ":", chunk.payload.data.size(), ":");
      bytes += chunk.payload.data;
      for (float scaler : chunk.payload.scalers)
        bytes += absl::StrCat(scaler, ",");
    }
    return bytes;
  }

  CodecId codec_;
  std::string state_path_;
  int kill_at_;
  int calls_ = 0;
  std::unique_ptr<Aggregator> shard_;
};

std::string StatePath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path =
      ShardStatePath(dir != nullptr ? dir : "/tmp", 0) + "." + name;
  std::remove(path.c_str());
  return path;
}

class ShardRecoveryTest : public ::testing::TestWithParam<CodecId> {};

TEST_P(ShardRecoveryTest, AKillAfterAnyCallChangesNoAnswer) {
  const CodecId codec = GetParam();
  RecoveryRun reference(codec, StatePath("reference"), /*kill_at=*/0);
  const std::vector<std::string> expected = reference.Pulls();
  ASSERT_EQ(expected.size(), kWorkers * kSteps);
  for (int kill_at = 1; kill_at <= reference.calls(); ++kill_at) {
    SCOPED_TRACE(absl::StrCat("killed after call ", kill_at));
    RecoveryRun killed(codec, StatePath(absl::StrCat("kill", kill_at)),
                       kill_at);
    EXPECT_EQ(killed.Pulls(), expected);
  }
}

INSTANTIATE_TEST_SUITE_P(Codecs, ShardRecoveryTest,
                         ::testing::Values(CodecId::kTernGrad, CodecId::kOneBit,
                                           CodecId::kFp32),
                         [](const auto& info) {
                           return std::string(kernels::CodecName(info.param));
                         });

TEST(ShardStateTest, JoinRequestRoundTripsThroughTheWire) {
  JoinRequest join = Join(1, CodecId::kOneBit);
  join.config.codec_params.tau = 0.25f;
  join.config.fp32_chunk_keys = {2, 3};
  join.config.mode = RunMode::kWeightGrad;
  join.config.optimizer.lr = 0.1;
  join.config.optimizer.lr_schedule = "step";
  tern::v1::JoinRequest wire;
  JoinToWire(join, &wire);
  absl::StatusOr<JoinRequest> back = JoinFromWire(wire);
  ASSERT_TRUE(back.ok()) << back.status();
  tern::v1::JoinRequest again;
  JoinToWire(*back, &again);
  EXPECT_EQ(wire.SerializeAsString(), again.SerializeAsString());
  EXPECT_EQ(back->config.codec_params.tau, 0.25f);
  EXPECT_EQ(back->config.optimizer.lr_schedule, "step");
  EXPECT_EQ(back->tensors.size(), 2u);
}

TEST(ShardStateTest, AStateOfOtherFlagsOrDamagedIsRefused) {
  const std::string path = StatePath("flags");
  {
    RecoveryRun run(CodecId::kFp32, path, 0);
    ASSERT_EQ(run.Pulls().size(), kWorkers * kSteps);
  }
  AggregatorOptions options;
  options.num_workers = kWorkers + 1;
  options.state_path = path;
  absl::StatusOr<std::unique_ptr<Aggregator>> other =
      Aggregator::Create(options, nullptr);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(other.status().message().find("--num_workers=2"), std::string::npos)
      << other.status();
  FILE* file = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(file, nullptr);
  std::fseek(file, 40, SEEK_SET);
  std::fputc(0x5a, file);
  std::fclose(file);
  options.num_workers = kWorkers;
  absl::StatusOr<std::unique_ptr<Aggregator>> damaged =
      Aggregator::Create(options, nullptr);
  EXPECT_EQ(damaged.status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace tern::server
