#include "server/aggregator.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/captured_log.h"
#include "common/partitioner.h"
#include "common/test_dir.h"
#include "core/barrier.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/codec_registry.h"
#include "kernels/codec_test_util.h"
#include "kernels/float_aggregation.h"

namespace tern::server {
namespace {

using kernels::CodecId;
using kernels::Layout;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The test model: "w" of 3x5 and "b" of 7 elements, cut into chunks of at
// most 8 elements (partition_bytes 32): chunk 0 = w[0..8), chunk 1 =
// w[8..15), chunk 2 = b.
constexpr uint64_t kPartitionBytes = 32;
const std::vector<uint64_t> kChunkElements = {8, 7, 7};
constexpr uint64_t kSpecHash = 0x5bec;
constexpr uint64_t kChecksum = 0xc0ffee;
constexpr uint64_t kSeed = 7;

// The result of one asynchronous call, once its callback ran.
template <typename T>
struct Call {
  std::optional<absl::StatusOr<T>> result;
  bool done() const { return result.has_value(); }
  const absl::Status status() const { return result->status(); }
  const T& value() const { return **result; }
};

template <typename T>
Callback<T> Into(std::shared_ptr<Call<T>> call) {
  return [call](absl::StatusOr<T> result) {
    ASSERT_FALSE(call->done()) << "a callback ran twice";
    call->result = std::move(result);
  };
}

RunConfig MakeConfig(uint32_t num_workers, CodecId codec) {
  RunConfig config;
  config.run_id = "test";
  config.num_workers = num_workers;
  config.num_shards = 1;
  config.partition_bytes = kPartitionBytes;
  config.seed = kSeed;
  config.codec = codec;
  const bool terngrad = codec == CodecId::kTernGrad;
  config.push_layout = terngrad ? Layout::kTernary2Bit : Layout::kRaw;
  config.pull_layout = terngrad ? Layout::kSumBits : Layout::kRaw;
  config.clip = 0;
  return config;
}

JoinRequest MakeJoin(uint32_t worker, const RunConfig& config) {
  JoinRequest join;
  join.worker_id = worker;
  join.shard_index = 0;
  join.config = config;
  join.tensors = {TensorSpec{"w", {3, 5}}, TensorSpec{"b", {7}}};
  join.param_spec_hash = kSpecHash;
  join.param_checksum = kChecksum;
  return join;
}

// A deterministic gradient of worker `worker` for chunk `key` at `step`.
std::vector<float> Gradient(uint32_t worker, uint64_t step, uint32_t key,
                            uint64_t elements) {
  return kernels::codec_test::Gaussian(
      elements, static_cast<uint32_t>(worker * 1000003 + step * 101 + key));
}

float MaxAbs(const std::vector<float>& values) {
  float max = 0;
  for (const float value : values) max = std::max(max, std::fabs(value));
  return max;
}

std::unique_ptr<kernels::Codec> Codec(CodecId id) {
  const bool terngrad = id == CodecId::kTernGrad;
  kernels::CodecOptions options;
  options.id = id;
  options.clip = 0.0f;
  options.push_layout = terngrad ? Layout::kTernary2Bit : Layout::kRaw;
  options.pull_layout = terngrad ? Layout::kSumBits : Layout::kRaw;
  absl::StatusOr<std::unique_ptr<kernels::Codec>> codec =
      kernels::MakeCodec(options);
  EXPECT_TRUE(codec.ok()) << codec.status();
  return *std::move(codec);
}

class AggregatorTest : public ::testing::Test {
 protected:
  AggregatorOptions Options(uint32_t num_workers) {
    AggregatorOptions options;
    options.num_workers = num_workers;
    options.barrier_timeout = absl::Seconds(50);
    options.join_timeout = absl::Seconds(300);
    options.clock = [this] { return now_; };
    return options;
  }

  // --on_worker_loss=shrink with a state file in a fresh directory.
  AggregatorOptions ShrinkWithState(uint32_t num_workers) {
    AggregatorOptions options = Options(num_workers);
    options.on_worker_loss = WorkerLossPolicy::kShrink;
    options.state_path = FreshTestDir() + "/shard.state";
    return options;
  }

  std::unique_ptr<Aggregator> Make(AggregatorOptions options,
                                   Logger logger = MakeNullLogger()) {
    absl::StatusOr<std::unique_ptr<Aggregator>> aggregator =
        Aggregator::Create(std::move(options), std::move(logger));
    EXPECT_TRUE(aggregator.ok()) << aggregator.status();
    return *std::move(aggregator);
  }

  std::shared_ptr<Call<JoinReply>> Join(Aggregator& aggregator,
                                        const JoinRequest& request) {
    auto call = std::make_shared<Call<JoinReply>>();
    aggregator.Join(request, Into(call));
    return call;
  }

  // Joins workers 0..N-1 with `config`; all must succeed.
  void JoinAll(Aggregator& aggregator, const RunConfig& config) {
    std::vector<std::shared_ptr<Call<JoinReply>>> calls;
    for (uint32_t w = 0; w < config.num_workers; ++w) {
      calls.push_back(Join(aggregator, MakeJoin(w, config)));
    }
    for (const auto& call : calls) {
      ASSERT_TRUE(call->done());
      ASSERT_TRUE(call->status().ok()) << call->status();
    }
  }

  std::shared_ptr<Call<ScalerAnswer>> Share(Aggregator& aggregator,
                                            ScalerRequest request) {
    auto call = std::make_shared<Call<ScalerAnswer>>();
    aggregator.ShareScalers(request, Into(call));
    return call;
  }

  std::shared_ptr<Call<PushAnswer>> Push(Aggregator& aggregator,
                                         const PushRequest& request) {
    auto call = std::make_shared<Call<PushAnswer>>();
    aggregator.PushPull(request, Into(call));
    return call;
  }

  // Worker `worker`'s local scalers (max|g|: clip 0) of the chunks `keys`.
  static ScalerRequest LocalScalers(uint32_t worker, uint64_t step,
                                    const std::vector<uint32_t>& keys) {
    ScalerRequest request{worker, step, {}};
    for (const uint32_t key : keys) {
      request.scalers.push_back(ChunkScaler{
          key, MaxAbs(Gradient(worker, step, key, kChunkElements[key]))});
    }
    return request;
  }

  // Worker `worker`'s push of every chunk: chunks in `fp32_keys` in fp32,
  // the others with `codec` and the shared scaler of `shared` (if any).
  static PushRequest MakePush(uint32_t worker, uint64_t step, CodecId codec,
                              const std::vector<ChunkScaler>& shared,
                              const std::vector<uint32_t>& fp32_keys = {}) {
    const std::unique_ptr<kernels::Codec> run_codec = Codec(codec);
    const std::unique_ptr<kernels::Codec> fp32_codec = Codec(CodecId::kFp32);
    PushRequest request{worker, step, {}};
    for (uint32_t key = 0; key < kChunkElements.size(); ++key) {
      const bool fp32 = std::count(fp32_keys.begin(), fp32_keys.end(), key) > 0;
      kernels::EncodeContext context;
      context.stream =
          RandomStream{kSeed, static_cast<uint32_t>(step), key, worker};
      for (const ChunkScaler& scaler : shared) {
        if (scaler.chunk_key == key) context.scaler = scaler.scaler;
      }
      const std::vector<float> gradient =
          Gradient(worker, step, key, kChunkElements[key]);
      absl::StatusOr<kernels::Payload> payload =
          (fp32 ? fp32_codec : run_codec)->Encode(gradient, context);
      EXPECT_TRUE(payload.ok()) << payload.status();
      request.chunks.push_back(ChunkPayload{key, *std::move(payload)});
    }
    return request;
  }

  // What a push stands for, decoded (s * q for TernGrad).
  static std::vector<float> Decoded(const kernels::Codec& codec,
                                    const kernels::Payload& payload) {
    std::vector<float> values(payload.num_elements);
    const absl::Status status = codec.Decode(payload, absl::MakeSpan(values));
    EXPECT_TRUE(status.ok()) << status;
    return values;
  }

  // Runs one full step for workers 0..N-1 and checks that every worker got
  // the same answer and that it decodes to the average of the pushes.
  void RunStepAndCheck(Aggregator& aggregator, uint32_t num_workers,
                       uint64_t step, CodecId codec,
                       const std::vector<uint32_t>& fp32_keys = {}) {
    std::vector<uint32_t> scaler_keys;
    if (codec == CodecId::kTernGrad) {
      for (uint32_t key = 0; key < kChunkElements.size(); ++key) {
        if (std::count(fp32_keys.begin(), fp32_keys.end(), key) == 0) {
          scaler_keys.push_back(key);
        }
      }
    }
    std::vector<ChunkScaler> shared;
    if (!scaler_keys.empty()) {
      std::vector<std::shared_ptr<Call<ScalerAnswer>>> calls;
      for (uint32_t w = 0; w < num_workers; ++w) {
        calls.push_back(Share(aggregator, LocalScalers(w, step, scaler_keys)));
        EXPECT_EQ(calls.back()->done(), w + 1 == num_workers);
      }
      for (const auto& call : calls) {
        ASSERT_TRUE(call->done());
        ASSERT_TRUE(call->status().ok()) << call->status();
        EXPECT_EQ(call->value(), calls[0]->value());
      }
      shared = calls[0]->value()->scalers;
      ASSERT_EQ(shared.size(), scaler_keys.size());
      for (size_t i = 0; i < shared.size(); ++i) {
        float expected = 0;
        for (uint32_t w = 0; w < num_workers; ++w) {
          expected = std::max(expected,
                              MaxAbs(Gradient(w, step, scaler_keys[i],
                                              kChunkElements[scaler_keys[i]])));
        }
        EXPECT_EQ(shared[i].chunk_key, scaler_keys[i]);
        EXPECT_EQ(shared[i].scaler, expected) << "s_k = max_i s_ik";
      }
    }

    std::vector<PushRequest> pushes;
    std::vector<std::shared_ptr<Call<PushAnswer>>> calls;
    for (uint32_t w = 0; w < num_workers; ++w) {
      pushes.push_back(MakePush(w, step, codec, shared, fp32_keys));
      calls.push_back(Push(aggregator, pushes.back()));
      EXPECT_EQ(calls.back()->done(), w + 1 == num_workers);
    }
    for (const auto& call : calls) {
      ASSERT_TRUE(call->done());
      ASSERT_TRUE(call->status().ok()) << call->status();
      EXPECT_EQ(call->value(), calls[0]->value()) << "one answer for all";
    }
    const PushReply& reply = *calls[0]->value();
    EXPECT_EQ(reply.step, step);
    ASSERT_EQ(reply.chunks.size(), kChunkElements.size());
    const std::unique_ptr<kernels::Codec> run_codec = Codec(codec);
    const std::unique_ptr<kernels::Codec> fp32_codec = Codec(CodecId::kFp32);
    for (uint32_t key = 0; key < kChunkElements.size(); ++key) {
      const bool fp32 = std::count(fp32_keys.begin(), fp32_keys.end(), key) > 0;
      const kernels::Codec& chunk_codec = fp32 ? *fp32_codec : *run_codec;
      const kernels::Payload& pull = reply.chunks[key].payload;
      EXPECT_EQ(reply.chunks[key].chunk_key, key);
      EXPECT_EQ(pull.codec, chunk_codec.id());
      EXPECT_EQ(pull.num_elements, kChunkElements[key]);
      // The exact average of what was pushed.
      std::vector<double> sum(kChunkElements[key], 0.0);
      for (const PushRequest& push : pushes) {
        const std::vector<float> values =
            Decoded(chunk_codec, push.chunks[key].payload);
        for (size_t j = 0; j < values.size(); ++j) sum[j] += values[j];
      }
      const std::vector<float> average = Decoded(chunk_codec, pull);
      // fp16 pulls are rounded to binary16 (11 significant bits).
      const double tolerance = codec == CodecId::kFp16 && !fp32 ? 1e-3 : 1e-5;
      for (size_t j = 0; j < average.size(); ++j) {
        const double expected = sum[j] / num_workers;
        EXPECT_NEAR(average[j], expected, tolerance * (1 + std::fabs(expected)))
            << "chunk " << key << " element " << j;
      }
    }
    EXPECT_EQ(aggregator.step(), step + 1);
  }

  absl::Time now_ = absl::FromUnixSeconds(1'700'000'000);
};

// --- options and Join ---

TEST_F(AggregatorTest, CreateRefusesOptionsThatCannotWork) {
  AggregatorOptions no_workers = Options(0);
  EXPECT_EQ(Aggregator::Create(no_workers, MakeNullLogger()).status().code(),
            absl::StatusCode::kInvalidArgument);
  AggregatorOptions bad_shard = Options(2);
  bad_shard.shard_index = 1;
  bad_shard.num_shards = 1;
  EXPECT_EQ(Aggregator::Create(bad_shard, MakeNullLogger()).status().code(),
            absl::StatusCode::kInvalidArgument);
  AggregatorOptions no_timeout = Options(2);
  no_timeout.barrier_timeout = absl::ZeroDuration();
  EXPECT_EQ(Aggregator::Create(no_timeout, MakeNullLogger()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(AggregatorTest, JoinIsABarrierAndAnswersTheShardsChunks) {
  auto aggregator = Make(Options(3));
  const RunConfig config = MakeConfig(3, CodecId::kTernGrad);
  auto first = Join(*aggregator, MakeJoin(0, config));
  auto second = Join(*aggregator, MakeJoin(2, config));
  EXPECT_FALSE(first->done());
  EXPECT_FALSE(second->done());
  EXPECT_FALSE(aggregator->all_joined());
  auto third = Join(*aggregator, MakeJoin(1, config));
  for (const auto& call : {first, second, third}) {
    ASSERT_TRUE(call->done());
    ASSERT_TRUE(call->status().ok()) << call->status();
    EXPECT_EQ(call->value().next_step, 0u);
    EXPECT_EQ(call->value().shard_index, 0u);
    EXPECT_THAT(call->value().chunk_keys, ElementsAre(0, 1, 2));
  }
  EXPECT_TRUE(aggregator->all_joined());
}

// Each shard owns its chunks of the partition, cut by the join's
// shard_assignment: in backward order and even shard 0 owns the last key
// (balanced, shard 0 takes the largest chunk, key 0).
TEST_F(AggregatorTest, EachShardAnswersThePartitionsChunksOfIt) {
  for (const ShardAssignment assignment :
       {ShardAssignment::kBalanced, ShardAssignment::kBackwardOrder,
        ShardAssignment::kEven}) {
    const absl::StatusOr<Partition> partition =
        Partition::Create({15, 7}, kPartitionBytes, 2, assignment);
    ASSERT_TRUE(partition.ok());
    const bool last_first = assignment != ShardAssignment::kBalanced;
    EXPECT_EQ(partition->chunks().back().shard, last_first ? 0u : 1u);
    for (uint32_t shard = 0; shard < 2; ++shard) {
      AggregatorOptions options = Options(1);
      options.shard_index = shard;
      options.num_shards = 2;
      auto aggregator = Make(options);
      RunConfig config = MakeConfig(1, CodecId::kFp32);
      config.num_shards = 2;
      config.shard_assignment = assignment;
      JoinRequest join = MakeJoin(0, config);
      join.shard_index = shard;
      auto call = Join(*aggregator, join);
      ASSERT_TRUE(call->done());
      ASSERT_TRUE(call->status().ok()) << call->status();
      EXPECT_EQ(call->value().chunk_keys, partition->ChunksOfShard(shard))
          << ShardAssignmentName(assignment) << ", shard " << shard;
      EXPECT_FALSE(call->value().chunk_keys.empty());
    }
  }
}

TEST_F(AggregatorTest, JoinRefusesRequestsThatDoNotFitTheShard) {
  auto aggregator = Make(Options(2));
  const RunConfig config = MakeConfig(2, CodecId::kTernGrad);

  auto unknown = Join(*aggregator, MakeJoin(2, config));
  EXPECT_EQ(unknown->status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown->status().message(), HasSubstr("worker_id 2"));

  RunConfig three_workers = config;
  three_workers.num_workers = 3;
  auto workers = Join(*aggregator, MakeJoin(0, three_workers));
  EXPECT_EQ(workers->status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(workers->status().message(), HasSubstr("--num_workers=2"));

  RunConfig two_shards = config;
  two_shards.num_shards = 2;
  auto shards = Join(*aggregator, MakeJoin(0, two_shards));
  EXPECT_EQ(shards->status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(shards->status().message(), HasSubstr("--num_shards=1"));

  JoinRequest wrong_shard = MakeJoin(0, config);
  wrong_shard.shard_index = 1;
  auto index = Join(*aggregator, wrong_shard);
  EXPECT_EQ(index->status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(index->status().message(), HasSubstr("shard 1 to shard 0"));

  JoinRequest negative = MakeJoin(0, config);
  negative.tensors[0].shape = {3, -5};
  EXPECT_EQ(Join(*aggregator, negative)->status().code(),
            absl::StatusCode::kInvalidArgument);

  RunConfig bad_codec = config;
  bad_codec.codec = CodecId::kUnspecified;
  EXPECT_FALSE(Join(*aggregator, MakeJoin(0, bad_codec))->status().ok());

  // None of these fixed the run: a good join still configures it.
  auto good = Join(*aggregator, MakeJoin(0, config));
  EXPECT_FALSE(good->done());  // waits for worker 1
  auto other = Join(*aggregator, MakeJoin(1, config));
  ASSERT_TRUE(good->done());
  EXPECT_TRUE(good->status().ok()) << good->status();
}

TEST_F(AggregatorTest, JoinRefusesAModelTooLargeForTheMessageLimit) {
  AggregatorOptions options = Options(1);
  options.max_message_bytes = 1 << 20;  // less than the 1 MiB of slack
  auto aggregator = Make(options);
  auto call = Join(*aggregator, MakeJoin(0, MakeConfig(1, CodecId::kFp32)));
  EXPECT_EQ(call->status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(call->status().message(), HasSubstr("--max_message_mb"));
  EXPECT_GT(Fp32MessageBytes(22, 3), uint64_t{1} << 20);
}

// Issue 14 at the join: a ParamSpec of a few bytes declaring 2^31 chunks
// is refused before the shard makes anything for it, and fixes nothing: a
// worker with a model that fits still joins after it.
TEST_F(AggregatorTest, AJoinDeclaringTwoToThe31ChunksIsRefusedAndFixesNothing) {
  auto aggregator = Make(Options(1));
  RunConfig config = MakeConfig(1, CodecId::kFp32);
  JoinRequest attack = MakeJoin(0, config);
  attack.config.partition_bytes = 4;
  attack.tensors = {TensorSpec{"w", {int64_t{1} << 31}}};
  const absl::Time start = absl::Now();
  auto refused = Join(*aggregator, attack);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << "counted, not cut";
  ASSERT_TRUE(refused->done());
  EXPECT_EQ(refused->status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused->status().message(),
              HasSubstr("2147483648 chunks take 283467841536 bytes in fp32, "
                        "more than 1 shard with a limit of 64 MiB "
                        "(--max_message_mb) can carry"));
  EXPECT_FALSE(aggregator->all_joined());

  // Large but fitting: 15 Mi elements (60 MiB in fp32) in 4 MiB chunks,
  // within the 63 MiB a 64 MiB message carries besides its slack.
  config.partition_bytes = 4 << 20;
  JoinRequest large = MakeJoin(0, config);
  large.tensors = {TensorSpec{"w", {15 << 20}}};
  auto joined = Join(*aggregator, large);
  ASSERT_TRUE(joined->done());
  ASSERT_TRUE(joined->status().ok()) << joined->status();
  EXPECT_EQ(joined->value().chunk_keys.size(), 15u);
}

struct Mismatch {
  std::string name;
  std::function<void(JoinRequest*)> change;
  std::string expected;  // in the message
};

void PrintTo(const Mismatch& mismatch, std::ostream* os) {
  *os << mismatch.name;
}

class JoinMismatchTest : public AggregatorTest,
                         public ::testing::WithParamInterface<Mismatch> {};

TEST_P(JoinMismatchTest, ALaterJoinerMustMatchTheFirst) {
  auto aggregator = Make(Options(3));
  const RunConfig config = MakeConfig(3, CodecId::kTernGrad);
  auto first = Join(*aggregator, MakeJoin(0, config));
  JoinRequest other = MakeJoin(2, config);
  GetParam().change(&other);
  auto call = Join(*aggregator, other);
  ASSERT_TRUE(call->done());
  EXPECT_EQ(call->status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(call->status().message(), HasSubstr(GetParam().expected));
  EXPECT_THAT(call->status().message(), HasSubstr("of worker 2"));
  EXPECT_THAT(call->status().message(), HasSubstr("of worker 0"));
  // The refused worker has not joined: its good join still completes.
  auto fixed = Join(*aggregator, MakeJoin(2, config));
  auto last = Join(*aggregator, MakeJoin(1, config));
  EXPECT_TRUE(first->done());
  EXPECT_TRUE(fixed->status().ok()) << fixed->status();
}

INSTANTIATE_TEST_SUITE_P(
    Fields, JoinMismatchTest,
    ::testing::Values(
        Mismatch{"RunId", [](JoinRequest* j) { j->config.run_id = "other"; },
                 "run_id 'other' of worker 2 differs from 'test'"},
        Mismatch{"Seed", [](JoinRequest* j) { j->config.seed = 8; },
                 "seed 8 of worker 2 differs from 7"},
        Mismatch{"Codec",
                 [](JoinRequest* j) {
                   j->config.codec = CodecId::kFp32;
                   j->config.push_layout = Layout::kRaw;
                   j->config.pull_layout = Layout::kRaw;
                 },
                 "codec fp32 of worker 2 differs from terngrad"},
        Mismatch{"PushLayout",
                 [](JoinRequest* j) {
                   j->config.push_layout = Layout::kTernaryBase3;
                 },
                 "push layout"},
        Mismatch{"PartitionBytes",
                 [](JoinRequest* j) { j->config.partition_bytes = 64; },
                 "partition_bytes 64"},
        Mismatch{"Fp32Keys",
                 [](JoinRequest* j) { j->config.fp32_chunk_keys = {2}; },
                 "fp32 chunk keys [2]"},
        Mismatch{"Clip", [](JoinRequest* j) { j->config.clip = 2.5f; },
                 "clip 2.5"},
        Mismatch{"Tau",
                 [](JoinRequest* j) { j->config.codec_params.tau = 0.5f; },
                 "codec parameter tau 0.5 of worker 2 differs from "},
        Mismatch{"DropScope",
                 [](JoinRequest* j) {
                   j->config.codec_params.drop_scope =
                       kernels::DropScope::kPerTensor;
                 },
                 "codec parameter drop_scope tensor of worker 2 differs from "
                 "global of worker 0: every worker must run with the same "
                 "flags"},
        Mismatch{"DropSurvivors",
                 [](JoinRequest* j) {
                   j->config.codec_params.drop_survivors =
                       kernels::DropSurvivors::k2Bit;
                 },
                 "codec parameter drop_survivors 2bit of worker 2 differs "
                 "from values"},
        Mismatch{"QsgdLevels",
                 [](JoinRequest* j) { j->config.codec_params.qsgd_levels = 3; },
                 "codec parameter qsgd_levels 3 of worker 2"},
        Mismatch{"SampleSize",
                 [](JoinRequest* j) { j->config.codec_params.sample_size = 9; },
                 "codec parameter sample_size 9 of worker 2"},
        Mismatch{"ShardAssignment",
                 [](JoinRequest* j) {
                   j->config.shard_assignment = ShardAssignment::kEven;
                 },
                 "shard assignment even of worker 2 differs from "
                 "balanced of worker 0: every worker must run with the same "
                 "--shard_assignment"},
        Mismatch{"SpecHash", [](JoinRequest* j) { j->param_spec_hash = 1; },
                 "param spec hash 0x0000000000000001 of worker 2 differs "
                 "from 0x0000000000005bec"},
        Mismatch{"Shape", [](JoinRequest* j) { j->tensors[1].shape = {8}; },
                 "tensor 1 'b' [8] of worker 2 differs from 'b' [7]"},
        Mismatch{"Checksum", [](JoinRequest* j) { j->param_checksum = 2; },
                 "param checksum 0x0000000000000002 of worker 2 differs "
                 "from 0x0000000000c0ffee of worker 0: workers must start "
                 "from the same parameters"}),
    [](const ::testing::TestParamInfo<Mismatch>& info) {
      return info.param.name;
    });

TEST_F(AggregatorTest, ARejoinGetsTheStepTheShardIsAt) {
  auto aggregator = Make(Options(1));
  const RunConfig config = MakeConfig(1, CodecId::kTernGrad);
  JoinAll(*aggregator, config);
  RunStepAndCheck(*aggregator, 1, 0, CodecId::kTernGrad);
  RunStepAndCheck(*aggregator, 1, 1, CodecId::kTernGrad);
  // A restarted worker: its parameters moved since step 0, so the initial
  // checksum is not compared any more.
  JoinRequest rejoin = MakeJoin(0, config);
  rejoin.param_checksum = 0x1234;
  auto call = Join(*aggregator, rejoin);
  ASSERT_TRUE(call->done());
  ASSERT_TRUE(call->status().ok()) << call->status();
  EXPECT_EQ(call->value().next_step, 2u);
  RunStepAndCheck(*aggregator, 1, 2, CodecId::kTernGrad);
}

// --- the step, end to end ---

class AggregatorStepTest
    : public AggregatorTest,
      public ::testing::WithParamInterface<std::tuple<CodecId, uint32_t>> {};

TEST_P(AggregatorStepTest, EveryWorkerPullsTheAverageOfThePushes) {
  const auto [codec, num_workers] = GetParam();
  auto aggregator = Make(Options(num_workers));
  JoinAll(*aggregator, MakeConfig(num_workers, codec));
  for (uint64_t step = 0; step < 3; ++step) {
    RunStepAndCheck(*aggregator, num_workers, step, codec);
  }
}

INSTANTIATE_TEST_SUITE_P(
    CodecsAndWorkers, AggregatorStepTest,
    ::testing::Combine(::testing::Values(CodecId::kTernGrad, CodecId::kFp32,
                                         CodecId::kFp16),
                       ::testing::Values(1u, 2u, 3u)),
    [](const auto& info) {
      const CodecId codec = std::get<0>(info.param);
      return absl::StrCat(codec == CodecId::kTernGrad ? "TernGrad"
                          : codec == CodecId::kFp32   ? "Fp32"
                                                      : "Fp16",
                          std::get<1>(info.param), "Workers");
    });

TEST_F(AggregatorTest, Fp32ChunksOfATernGradRunShareNoScaler) {
  auto aggregator = Make(Options(3));
  RunConfig config = MakeConfig(3, CodecId::kTernGrad);
  config.fp32_chunk_keys = {2};
  JoinAll(*aggregator, config);
  for (uint64_t step = 0; step < 2; ++step) {
    RunStepAndCheck(*aggregator, 3, step, CodecId::kTernGrad, {2});
  }
}

TEST_F(AggregatorTest, ATernGradPullIsTheSumOfTheCodes) {
  // Two workers push the same gradient: every nonzero code doubles.
  auto aggregator = Make(Options(2));
  JoinAll(*aggregator, MakeConfig(2, CodecId::kTernGrad));
  auto s0 = Share(*aggregator, LocalScalers(0, 0, {0, 1, 2}));
  auto s1 = Share(*aggregator, LocalScalers(1, 0, {0, 1, 2}));
  ASSERT_TRUE(s1->status().ok());
  const PushRequest push =
      MakePush(0, 0, CodecId::kTernGrad, s1->value()->scalers);
  PushRequest same = push;
  same.worker_id = 1;
  auto p0 = Push(*aggregator, push);
  auto p1 = Push(*aggregator, same);
  ASSERT_TRUE(p1->status().ok()) << p1->status();
  const auto codec = Codec(CodecId::kTernGrad);
  for (uint32_t key = 0; key < 3; ++key) {
    const kernels::Payload& pull = p1->value()->chunks[key].payload;
    EXPECT_EQ(pull.num_summands, 2u);
    EXPECT_EQ(pull.layout, Layout::kSumBits);
    EXPECT_EQ(Decoded(*codec, pull), Decoded(*codec, push.chunks[key].payload))
        << "the average of two equal pushes is the push";
  }
}

// --- idempotence ---

TEST_F(AggregatorTest, ADuplicatePushIsCountedOnceAndAnswered) {
  auto aggregator = Make(Options(2));
  JoinAll(*aggregator, MakeConfig(2, CodecId::kFp32));
  const PushRequest push0 = MakePush(0, 0, CodecId::kFp32, {});
  const PushRequest push1 = MakePush(1, 0, CodecId::kFp32, {});
  auto first = Push(*aggregator, push0);
  EXPECT_EQ(aggregator->waiting_pushes(), 1u);
  // The duplicate's request is a temporary that dies as soon as the call
  // returns (as the service's does): the aggregator keeps nothing of it
  // and waits with its callback alone (a sanitizer run would see a use
  // after free otherwise).
  auto duplicate = Push(*aggregator, PushRequest(push0));
  EXPECT_FALSE(first->done());
  EXPECT_FALSE(duplicate->done()) << "a duplicate must not complete the step";
  EXPECT_EQ(aggregator->waiting_pushes(), 2u) << "a waiting call of its own";
  auto last = Push(*aggregator, push1);
  EXPECT_EQ(aggregator->waiting_pushes(), 0u);
  for (const auto& call : {first, duplicate, last}) {
    ASSERT_TRUE(call->done());
    ASSERT_TRUE(call->status().ok()) << call->status();
    EXPECT_EQ(call->value(), last->value());
  }
  const auto codec = Codec(CodecId::kFp32);
  for (uint32_t key = 0; key < 3; ++key) {
    const std::vector<float> a = Decoded(*codec, push0.chunks[key].payload);
    const std::vector<float> b = Decoded(*codec, push1.chunks[key].payload);
    const std::vector<float> pull =
        Decoded(*codec, last->value()->chunks[key].payload);
    for (size_t j = 0; j < pull.size(); ++j) {
      EXPECT_FLOAT_EQ(pull[j], (a[j] + b[j]) / 2);
    }
  }
}

TEST_F(AggregatorTest, ARetryOfTheCompletedStepGetsTheCachedAnswer) {
  auto aggregator = Make(Options(2));
  JoinAll(*aggregator, MakeConfig(2, CodecId::kTernGrad));
  auto s0 = Share(*aggregator, LocalScalers(0, 0, {0, 1, 2}));
  auto s1 = Share(*aggregator, LocalScalers(1, 0, {0, 1, 2}));
  ASSERT_TRUE(s1->status().ok());
  const auto shared = s1->value()->scalers;
  auto p0 = Push(*aggregator, MakePush(0, 0, CodecId::kTernGrad, shared));
  auto p1 = Push(*aggregator, MakePush(1, 0, CodecId::kTernGrad, shared));
  ASSERT_TRUE(p1->status().ok());
  ASSERT_EQ(aggregator->step(), 1u);

  auto retry = Push(*aggregator, MakePush(0, 0, CodecId::kTernGrad, shared));
  ASSERT_TRUE(retry->done());
  ASSERT_TRUE(retry->status().ok()) << retry->status();
  EXPECT_EQ(retry->value(), p1->value());
  auto scaler_retry = Share(*aggregator, LocalScalers(1, 0, {0, 1, 2}));
  ASSERT_TRUE(scaler_retry->done());
  ASSERT_TRUE(scaler_retry->status().ok());
  EXPECT_EQ(scaler_retry->value(), s1->value());
  EXPECT_EQ(aggregator->step(), 1u) << "a retry does not move the shard";
}

TEST_F(AggregatorTest, ADuplicateScalerShareIsCountedOnce) {
  auto aggregator = Make(Options(2));
  JoinAll(*aggregator, MakeConfig(2, CodecId::kTernGrad));
  ScalerRequest large = LocalScalers(0, 0, {0, 1, 2});
  auto first = Share(*aggregator, large);
  for (ChunkScaler& s : large.scalers) s.scaler = 1000;
  auto duplicate = Share(*aggregator, large);
  EXPECT_FALSE(duplicate->done()) << "a duplicate must not complete sharing";
  auto last = Share(*aggregator, LocalScalers(1, 0, {0, 1, 2}));
  ASSERT_TRUE(duplicate->done());
  ASSERT_TRUE(duplicate->status().ok());
  for (const ChunkScaler& s : duplicate->value()->scalers) {
    EXPECT_LT(s.scaler, 1000) << "the first values stay";
  }
}

// --- the waiting calls of one worker are bounded ---

TEST_F(AggregatorTest, DuplicatePushesBeyondTheCapAreRefusedAtOnce) {
  auto aggregator = Make(Options(2));
  JoinAll(*aggregator, MakeConfig(2, CodecId::kFp32));
  const PushRequest push0 = MakePush(0, 0, CodecId::kFp32, {});
  // The first push and its duplicates wait, up to the cap.
  std::vector<std::shared_ptr<Call<PushAnswer>>> held;
  for (size_t i = 0; i < core::kMaxWaitsPerMember; ++i) {
    held.push_back(Push(*aggregator, push0));
    EXPECT_FALSE(held.back()->done());
  }
  ASSERT_EQ(aggregator->waiting_pushes(), core::kMaxWaitsPerMember);
  auto beyond = Push(*aggregator, push0);
  ASSERT_TRUE(beyond->done()) << "answered at once";
  EXPECT_EQ(beyond->status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(beyond->status().message(),
            "worker 0 already has 5 calls waiting for step 0; this one is "
            "refused (retries never need more at once)");
  EXPECT_EQ(aggregator->waiting_pushes(), core::kMaxWaitsPerMember) << "nothing of it kept";
  // The other worker's push completes the step for all the held calls.
  auto last = Push(*aggregator, MakePush(1, 0, CodecId::kFp32, {}));
  ASSERT_TRUE(last->done());
  ASSERT_TRUE(last->status().ok()) << last->status();
  for (const auto& call : held) {
    ASSERT_TRUE(call->done());
    ASSERT_TRUE(call->status().ok()) << call->status();
    EXPECT_EQ(call->value(), last->value());
  }
  EXPECT_EQ(aggregator->step(), 1u);
  EXPECT_EQ(aggregator->waiting_pushes(), 0u);
}

TEST_F(AggregatorTest, DuplicateJoinsAndSharesBeyondTheCapAreRefused) {
  auto aggregator = Make(Options(2));
  const RunConfig config = MakeConfig(2, CodecId::kTernGrad);
  std::vector<std::shared_ptr<Call<JoinReply>>> joins;
  for (size_t i = 0; i < core::kMaxWaitsPerMember; ++i) {
    joins.push_back(Join(*aggregator, MakeJoin(0, config)));
  }
  auto join_beyond = Join(*aggregator, MakeJoin(0, config));
  ASSERT_TRUE(join_beyond->done());
  EXPECT_EQ(join_beyond->status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(join_beyond->status().message(),
            "worker 0 already has 5 calls waiting for the join; this one is "
            "refused (retries never need more at once)");
  auto join1 = Join(*aggregator, MakeJoin(1, config));
  for (const auto& call : joins) {
    ASSERT_TRUE(call->done());
    EXPECT_TRUE(call->status().ok()) << call->status();
  }

  std::vector<std::shared_ptr<Call<ScalerAnswer>>> shares;
  for (size_t i = 0; i < core::kMaxWaitsPerMember; ++i) {
    shares.push_back(Share(*aggregator, LocalScalers(0, 0, {0, 1, 2})));
  }
  auto share_beyond = Share(*aggregator, LocalScalers(0, 0, {0, 1, 2}));
  ASSERT_TRUE(share_beyond->done());
  EXPECT_EQ(share_beyond->status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(share_beyond->status().message(),
              HasSubstr("worker 0 already has 5 calls waiting for step 0"));
  auto share1 = Share(*aggregator, LocalScalers(1, 0, {0, 1, 2}));
  ASSERT_TRUE(share1->status().ok()) << share1->status();
  for (const auto& call : shares) {
    ASSERT_TRUE(call->done());
    ASSERT_TRUE(call->status().ok()) << call->status();
    EXPECT_EQ(call->value(), share1->value());
  }
}

// --- refusals are logged at a bounded rate ---

TEST_F(AggregatorTest, AThousandRefusedCallsLogABoundedNumberOfLines) {
  CapturedLog log;
  auto aggregator = Make(Options(2), log.logger());
  JoinAll(*aggregator, MakeConfig(2, CodecId::kFp32));
  const size_t before = log.Lines().size();
  // One worker's future step, and made-up worker ids, 1000 times each.
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(Push(*aggregator, MakePush(0, 9, CodecId::kFp32, {}))
                  ->status()
                  .code(),
              absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(Push(*aggregator, PushRequest{static_cast<uint32_t>(100 + i),
                                            0, {}})
                  ->status()
                  .code(),
              absl::StatusCode::kInvalidArgument);
  }
  std::vector<std::string> lines = log.Lines();
  ASSERT_EQ(lines.size() - before, 10u) << "5 lines per worker and reason";
  EXPECT_EQ(lines[before],
            "push of worker 0 for step 9 refused: step 9 is in the future: "
            "shard 0 is at step 0");
  now_ += absl::Seconds(60);
  ASSERT_TRUE(aggregator->ExpireWaits(now_).ok());
  lines = log.Lines();
  ASSERT_EQ(lines.size() - before, 12u);
  EXPECT_THAT(std::vector<std::string>(lines.end() - 2, lines.end()),
              ElementsAre("995 more refusals of push INVALID_ARGUMENT from an "
                          "unknown worker in the last 60 s were not logged",
                          "995 more refusals of push FAILED_PRECONDITION from "
                          "worker 0 in the last 60 s were not logged"));
}

// --- broadcast_start: every worker gets worker 0's initial weights ---

// Worker 0's weights of every chunk, fp32 RAW, value = key + i / 100.
std::vector<ChunkPayload> StartWeights() {
  std::vector<ChunkPayload> weights;
  for (uint32_t key = 0; key < kChunkElements.size(); ++key) {
    std::vector<float> values(kChunkElements[key]);
    for (size_t i = 0; i < values.size(); ++i) values[i] = key + i / 100.0f;
    weights.push_back(
        ChunkPayload{key, *Codec(CodecId::kFp32)->Encode(values, {})});
  }
  return weights;
}

TEST_F(AggregatorTest, BroadcastStartHandsWorkerZerosWeightsToEveryone) {
  auto aggregator = Make(Options(2));
  RunConfig config = MakeConfig(2, CodecId::kTernGrad);
  config.broadcast_start = true;
  JoinRequest one = MakeJoin(1, config);
  one.param_checksum = 0x1111;  // its own start: not compared
  auto first = Join(*aggregator, one);
  EXPECT_FALSE(first->done());
  JoinRequest zero = MakeJoin(0, config);
  zero.initial_weights = StartWeights();
  auto second = Join(*aggregator, zero);
  for (const auto& call : {first, second}) {
    ASSERT_TRUE(call->done());
    ASSERT_TRUE(call->status().ok()) << call->status();
    const JoinReply& reply = call->value();
    EXPECT_EQ(reply.param_checksum, kChecksum);
    ASSERT_NE(reply.initial_weights, nullptr);
    ASSERT_EQ(reply.initial_weights->size(), kChunkElements.size());
    EXPECT_EQ((*reply.initial_weights)[2].payload.data,
              zero.initial_weights[2].payload.data);
  }
}

TEST_F(AggregatorTest, BroadcastStartRefusesWeightsThatWillNotDo) {
  auto aggregator = Make(Options(2));
  RunConfig config = MakeConfig(2, CodecId::kTernGrad);
  config.broadcast_start = true;
  auto expect_refused = [&](JoinRequest join, absl::string_view message) {
    auto call = Join(*aggregator, join);
    ASSERT_TRUE(call->done());
    EXPECT_EQ(call->status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(call->status().message(), HasSubstr(message));
  };
  expect_refused(MakeJoin(0, config), "worker 0 sent no initial weights");
  JoinRequest missing = MakeJoin(0, config);
  missing.initial_weights = StartWeights();
  missing.initial_weights.pop_back();
  expect_refused(missing, "the initial weights of 2 chunks; this shard owns 3");
  JoinRequest nan = MakeJoin(0, config);
  nan.initial_weights = StartWeights();
  std::vector<float> bad(kChunkElements[1], 0.0f);
  bad[3] = std::nanf("");
  nan.initial_weights[1].payload = *Codec(CodecId::kFp32)->Encode(bad, {});
  expect_refused(nan, "initial weights of chunk 1: element 3 is nan");
  JoinRequest other = MakeJoin(1, config);
  other.initial_weights = StartWeights();
  expect_refused(other, "worker 1 sent initial weights");
  // Another worker without broadcast_start: the configs differ.
  JoinRequest unlike = MakeJoin(1, MakeConfig(2, CodecId::kTernGrad));
  auto call = Join(*aggregator, unlike);
  ASSERT_TRUE(call->done());
  EXPECT_EQ(call->status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(call->status().message(), HasSubstr("broadcast_start"));
}

// A shard restarted after step 0 whose run worker 1 configured holds no
// start weights: worker 0, resuming from its checkpoint, rejoins without
// them and is let in (nobody loads a start after step 0).
TEST_F(AggregatorTest, BroadcastStartLetsWorkerZeroRejoinARestartedShard) {
  const char* dir = std::getenv("TEST_TMPDIR");
  ASSERT_NE(dir, nullptr);
  AggregatorOptions options = Options(2);
  options.state_path = absl::StrCat(dir, "/broadcast.state");
  std::remove(options.state_path.c_str());
  RunConfig config = MakeConfig(2, CodecId::kFp32);
  config.broadcast_start = true;
  {
    auto aggregator = Make(options);
    auto one = Join(*aggregator, MakeJoin(1, config));
    JoinRequest zero = MakeJoin(0, config);
    zero.initial_weights = StartWeights();
    auto first = Join(*aggregator, zero);
    ASSERT_TRUE(one->done() && one->status().ok()) << one->status();
    RunStepAndCheck(*aggregator, 2, 0, CodecId::kFp32);
  }
  auto restarted = Make(options);
  ASSERT_EQ(restarted->step(), 1u);
  auto rejoin = Join(*restarted, MakeJoin(0, config));
  ASSERT_TRUE(rejoin->done());
  ASSERT_TRUE(rejoin->status().ok()) << rejoin->status();
  EXPECT_EQ(rejoin->value().next_step, 1u);
}

// --- stragglers are named before any timeout ---

TEST_F(AggregatorTest, AStepWaitingLongNamesTheWorkersItWaitsFor) {
  CapturedLog log;
  AggregatorOptions options = Options(3);
  options.straggler_warn = absl::Seconds(10);
  auto aggregator = Make(options, log.logger());
  JoinAll(*aggregator, MakeConfig(3, CodecId::kFp32));
  EXPECT_EQ(aggregator->WaitingFor().waiting_for, "");  // nobody came yet
  // Worker 0 shares its (empty) scalers, then workers 0 and 1 push step 0.
  auto share = Share(*aggregator, ScalerRequest{0, 0, {}});
  auto push0 = Push(*aggregator, MakePush(0, 0, CodecId::kFp32, {}));
  now_ += absl::Seconds(4);
  auto push1 = Push(*aggregator, MakePush(1, 0, CodecId::kFp32, {}));
  const size_t before = log.Lines().size();
  now_ += absl::Seconds(5);  // 9 s after the first push: not yet
  ASSERT_TRUE(aggregator->ExpireWaits(now_).ok());
  EXPECT_EQ(log.Lines().size(), before);
  now_ += absl::Seconds(1);
  ASSERT_TRUE(aggregator->ExpireWaits(now_).ok());
  std::vector<std::string> lines = log.Lines(spdlog::level::warn);
  ASSERT_GE(lines.size(), 2u);
  EXPECT_THAT(lines, ::testing::Contains(
                         "step 0: still waiting for workers 1,2 to share "
                         "scalers, 10s after the first worker did (a "
                         "straggler? --straggler_warn_s)"));
  EXPECT_THAT(lines, ::testing::Contains(
                         "step 0: still waiting for worker 2 to push, 10s "
                         "after the first worker did (a straggler? "
                         "--straggler_warn_s)"));
  // What a worker's Waiting call reads: the same names.
  const Aggregator::Waiting waiting = aggregator->WaitingFor();
  EXPECT_EQ(waiting.step, 0u);
  EXPECT_EQ(waiting.waiting_for, "workers 1,2 to share scalers");
  EXPECT_EQ(waiting.waited, absl::Seconds(10));
  now_ += absl::Seconds(10);  // once per step
  ASSERT_TRUE(aggregator->ExpireWaits(now_).ok());
  EXPECT_EQ(log.Lines(spdlog::level::warn).size(), lines.size());
  EXPECT_FALSE(push0->done());
  EXPECT_FALSE(push1->done());
  EXPECT_FALSE(share->done());
}

// --- refusals: nothing is added, and the shard keeps serving ---

struct BadPush {
  std::string name;
  std::function<void(PushRequest*)> change;
  absl::StatusCode code;
  std::string expected;
};

void PrintTo(const BadPush& bad, std::ostream* os) { *os << bad.name; }

class BadPushTest : public AggregatorTest,
                    public ::testing::WithParamInterface<BadPush> {};

TEST_P(BadPushTest, IsRefusedAndTheStepStillCompletesCorrectly) {
  auto aggregator = Make(Options(2));
  JoinAll(*aggregator, MakeConfig(2, CodecId::kTernGrad));
  auto s0 = Share(*aggregator, LocalScalers(0, 0, {0, 1, 2}));
  auto s1 = Share(*aggregator, LocalScalers(1, 0, {0, 1, 2}));
  ASSERT_TRUE(s1->status().ok());
  const auto shared = s1->value()->scalers;

  PushRequest bad = MakePush(0, 0, CodecId::kTernGrad, shared);
  GetParam().change(&bad);
  auto refused = Push(*aggregator, bad);
  ASSERT_TRUE(refused->done());
  EXPECT_EQ(refused->status().code(), GetParam().code) << refused->status();
  EXPECT_THAT(refused->status().message(), HasSubstr(GetParam().expected));

  // The good pushes of both workers complete the step with the right sum:
  // nothing of the refused push was added.
  const PushRequest good0 = MakePush(0, 0, CodecId::kTernGrad, shared);
  const PushRequest good1 = MakePush(1, 0, CodecId::kTernGrad, shared);
  auto p0 = Push(*aggregator, good0);
  EXPECT_FALSE(p0->done()) << "the refused push must not count";
  auto p1 = Push(*aggregator, good1);
  ASSERT_TRUE(p0->done());
  ASSERT_TRUE(p0->status().ok()) << p0->status();
  const auto codec = Codec(CodecId::kTernGrad);
  for (uint32_t key = 0; key < 3; ++key) {
    const std::vector<float> a = Decoded(*codec, good0.chunks[key].payload);
    const std::vector<float> b = Decoded(*codec, good1.chunks[key].payload);
    const std::vector<float> pull =
        Decoded(*codec, p0->value()->chunks[key].payload);
    for (size_t j = 0; j < pull.size(); ++j) {
      EXPECT_FLOAT_EQ(pull[j], (a[j] + b[j]) / 2) << key << "/" << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Refusals, BadPushTest,
    ::testing::Values(
        BadPush{"WrongSize",
                [](PushRequest* p) { p->chunks[1].payload.num_elements = 9; },
                absl::StatusCode::kInvalidArgument,
                "step 0: chunk 1 of worker 0: 9 elements, but the chunk has 7"},
        BadPush{"WrongCodec",
                [](PushRequest* p) {
                  p->chunks[2].payload =
                      *Codec(CodecId::kFp32)
                           ->Encode(std::vector<float>(7, 0.5f), {});
                },
                absl::StatusCode::kInvalidArgument,
                "chunk 2 of worker 0: codec fp32"},
        BadPush{"WrongLayout",
                [](PushRequest* p) {
                  p->chunks[0].payload.layout = Layout::kTernaryBase3;
                },
                absl::StatusCode::kInvalidArgument, "chunk 0 of worker 0"},
        BadPush{"CorruptLastChunk",  // chunks 0 and 1 are fine
                [](PushRequest* p) {
                  // 0b11 is no ternary code (payload.proto).
                  p->chunks[2].payload.data[0] = static_cast<char>(0xff);
                },
                absl::StatusCode::kInvalidArgument, "chunk 2 of worker 0"},
        BadPush{"TruncatedData",
                [](PushRequest* p) { p->chunks[1].payload.data.pop_back(); },
                absl::StatusCode::kInvalidArgument, "chunk 1 of worker 0"},
        BadPush{"FutureFormat",
                [](PushRequest* p) { p->chunks[0].payload.format_version = 2; },
                absl::StatusCode::kInvalidArgument, "format version 2"},
        BadPush{"ASum",
                [](PushRequest* p) { p->chunks[0].payload.num_summands = 2; },
                absl::StatusCode::kInvalidArgument, "num_summands 2"},
        BadPush{"UnknownChunk",
                [](PushRequest* p) { p->chunks[1].chunk_key = 99; },
                absl::StatusCode::kInvalidArgument,
                "step 0: chunk 99 of worker 0 is not a chunk of shard 0"},
        BadPush{"DuplicateChunk",
                [](PushRequest* p) { p->chunks[2] = p->chunks[0]; },
                absl::StatusCode::kInvalidArgument,
                "chunk 0 of worker 0 appears twice"},
        BadPush{"TooManyChunks",
                [](PushRequest* p) { p->chunks.push_back(p->chunks[0]); },
                absl::StatusCode::kInvalidArgument,
                "step 0: worker 0 pushed 4 chunks; shard 0 owns 3"},
        BadPush{"MissingChunk", [](PushRequest* p) { p->chunks.pop_back(); },
                absl::StatusCode::kInvalidArgument,
                "worker 0 pushed no chunk 2"},
        BadPush{"WrongScaler",
                [](PushRequest* p) { p->chunks[1].payload.scalers[0] *= 0.5f; },
                absl::StatusCode::kInvalidArgument,
                "differs from the shared scaler"},
        BadPush{"NanScaler",
                [](PushRequest* p) {
                  p->chunks[0].payload.scalers[0] =
                      std::numeric_limits<float>::quiet_NaN();
                },
                absl::StatusCode::kInvalidArgument,
                "step 0: chunk 0 of worker 0: scaler nan is not finite"},
        BadPush{"UnknownWorker", [](PushRequest* p) { p->worker_id = 5; },
                absl::StatusCode::kInvalidArgument, "unknown worker 5"},
        BadPush{"FutureStep", [](PushRequest* p) { p->step = 1; },
                absl::StatusCode::kFailedPrecondition,
                "step 1 is in the future: shard 0 is at step 0"}),
    [](const ::testing::TestParamInfo<BadPush>& info) {
      return info.param.name;
    });

TEST_F(AggregatorTest, NonFiniteFp32ValuesAreRefused) {
  auto aggregator = Make(Options(1));
  JoinAll(*aggregator, MakeConfig(1, CodecId::kFp32));
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity()}) {
    PushRequest push = MakePush(0, 0, CodecId::kFp32, {});
    // Raw little-endian float32 (payload.proto): element 3 at byte 12.
    std::string& data = push.chunks[1].payload.data;
    ASSERT_EQ(data.size(), 7 * sizeof(float));
    std::memcpy(&data[3 * sizeof(float)], &bad, sizeof(float));
    auto call = Push(*aggregator, push);
    ASSERT_TRUE(call->done());
    EXPECT_EQ(call->status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(call->status().message(),
                HasSubstr("step 0: chunk 1 of worker 0: element 3 is"));
  }
  EXPECT_EQ(aggregator->step(), 0u);
  RunStepAndCheck(*aggregator, 1, 0, CodecId::kFp32);
}

TEST_F(AggregatorTest, BadScalersAreRefusedNamingChunkAndStep) {
  auto aggregator = Make(Options(2));
  JoinAll(*aggregator, MakeConfig(2, CodecId::kTernGrad));
  struct Case {
    std::function<void(ScalerRequest*)> change;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {[](ScalerRequest* r) {
         r->scalers[1].scaler = std::numeric_limits<float>::quiet_NaN();
       },
       "step 0: chunk 1: scaler nan of worker 0 is not finite"},
      {[](ScalerRequest* r) {
         r->scalers[2].scaler = std::numeric_limits<float>::infinity();
       },
       "step 0: chunk 2: scaler inf of worker 0 is not finite"},
      {[](ScalerRequest* r) { r->scalers[0].scaler = -1; }, "is negative"},
      {[](ScalerRequest* r) { r->scalers[1].scaler = 3e38f; },
       "step 0: chunk 1: scaler of worker 0 is 3e+38, beyond 1e+30 (the "
       "magnitude rule"},
      {[](ScalerRequest* r) { r->scalers[0].chunk_key = 42; },
       "chunk 42 in the scalers of worker 0 is not a chunk of shard 0"},
      {[](ScalerRequest* r) { r->scalers[1].chunk_key = 0; },
       "chunk 0 appears twice"},
      {[](ScalerRequest* r) { r->scalers.pop_back(); },
       "worker 0 sent no scaler for chunk 2"},
      {[](ScalerRequest* r) { r->worker_id = 9; }, "unknown worker 9"},
  };
  for (const Case& c : cases) {
    ScalerRequest request = LocalScalers(0, 0, {0, 1, 2});
    c.change(&request);
    auto call = Share(*aggregator, request);
    ASSERT_TRUE(call->done());
    EXPECT_EQ(call->status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(call->status().message(), HasSubstr(c.expected));
  }
  // Nothing counted: both workers still have to share.
  auto s0 = Share(*aggregator, LocalScalers(0, 0, {0, 1, 2}));
  EXPECT_FALSE(s0->done());
  auto s1 = Share(*aggregator, LocalScalers(1, 0, {0, 1, 2}));
  ASSERT_TRUE(s0->done());
  EXPECT_TRUE(s0->status().ok());
}

TEST_F(AggregatorTest, Fp32ChunksSendNoScaler) {
  auto aggregator = Make(Options(1));
  RunConfig config = MakeConfig(1, CodecId::kTernGrad);
  config.fp32_chunk_keys = {2};
  JoinAll(*aggregator, config);
  auto call = Share(*aggregator, LocalScalers(0, 0, {0, 1, 2}));
  EXPECT_EQ(call->status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(call->status().message(), HasSubstr("chunk 2"));
  EXPECT_THAT(call->status().message(), HasSubstr("shares no scaler"));
}

TEST_F(AggregatorTest, APushBeforeScalerSharingIsRefused) {
  auto aggregator = Make(Options(2));
  JoinAll(*aggregator, MakeConfig(2, CodecId::kTernGrad));
  auto s0 = Share(*aggregator, LocalScalers(0, 0, {0, 1, 2}));
  auto call = Push(*aggregator, MakePush(0, 0, CodecId::kTernGrad, {}));
  EXPECT_EQ(call->status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(call->status().message(),
              HasSubstr("before the scalers of the step were shared "
                        "(missing: worker 1)"));
}

TEST_F(AggregatorTest, CallsBeforeJoiningAreRefused) {
  auto aggregator = Make(Options(2));
  auto share = Share(*aggregator, LocalScalers(0, 0, {0, 1, 2}));
  EXPECT_EQ(share->status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(share->status().message(), HasSubstr("worker 0 has not joined"));
  const RunConfig config = MakeConfig(2, CodecId::kFp32);
  auto join = Join(*aggregator, MakeJoin(1, config));
  auto push = Push(*aggregator, MakePush(0, 0, CodecId::kFp32, {}));
  EXPECT_EQ(push->status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(aggregator->CheckParams(0, 0, kChecksum).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(AggregatorTest, StaleAndFutureStepsAreRefused) {
  AggregatorOptions options = Options(1);
  options.catch_up_bytes = 0;  // the last step's answer only
  auto aggregator = Make(options);
  JoinAll(*aggregator, MakeConfig(1, CodecId::kTernGrad));
  for (uint64_t step = 0; step < 3; ++step) {
    RunStepAndCheck(*aggregator, 1, step, CodecId::kTernGrad);
  }
  auto stale = Push(*aggregator, MakePush(0, 1, CodecId::kTernGrad, {}));
  EXPECT_EQ(stale->status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(stale->status().message(), "step 1 is stale: shard 0 is at step 3");
  auto future = Push(*aggregator, MakePush(0, 4, CodecId::kTernGrad, {}));
  EXPECT_EQ(future->status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(future->status().message(),
            "step 4 is in the future: shard 0 is at step 3");
  auto stale_scalers = Share(*aggregator, LocalScalers(0, 0, {0, 1, 2}));
  EXPECT_THAT(stale_scalers->status().message(), HasSubstr("is stale"));
  auto future_scalers = Share(*aggregator, LocalScalers(0, 5, {0, 1, 2}));
  EXPECT_THAT(future_scalers->status().message(), HasSubstr("in the future"));
  // The retry of step 2 is not stale: it gets the cached answer.
  auto retry = Share(*aggregator, LocalScalers(0, 2, {0, 1, 2}));
  EXPECT_TRUE(retry->status().ok());
  RunStepAndCheck(*aggregator, 1, 3, CodecId::kTernGrad);
}

// --- --on_worker_loss ---

TEST_F(AggregatorTest, StopFailsTheRunNamingTheLostWorkerAndTheStep) {
  auto aggregator = Make(Options(3));  // stop, after the barrier timeout
  JoinAll(*aggregator, MakeConfig(3, CodecId::kFp32));
  auto p0 = Push(*aggregator, MakePush(0, 0, CodecId::kFp32, {}));
  now_ += absl::Seconds(10);
  auto p2 = Push(*aggregator, MakePush(2, 0, CodecId::kFp32, {}));
  now_ += absl::Seconds(39);
  EXPECT_TRUE(aggregator->ExpireWaits(now_).ok());
  EXPECT_FALSE(p0->done());
  now_ += absl::Seconds(1);
  EXPECT_TRUE(aggregator->ExpireWaits(now_).ok());
  const std::string lost =
      "step 0: worker 1 lost: no push within 50s of the first worker's "
      "(--worker_loss_timeout_s); the run stops (--on_worker_loss=stop)";
  for (const auto& call : {p0, p2}) {
    ASSERT_TRUE(call->done());
    EXPECT_EQ(call->status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(call->status().message(), lost);
  }
  auto late = Push(*aggregator, MakePush(1, 0, CodecId::kFp32, {}));
  EXPECT_EQ(late->status().message(), lost);
  EXPECT_EQ(aggregator->run_status().message(), lost);
}

// Shrink while the scalers are shared: the step goes on with the scalers of
// those who sent, and its answer averages over the remaining workers.
TEST_F(AggregatorTest, ShrinkSharesTheScalersOfTheRemainingWorkers) {
  AggregatorOptions options = Options(3);
  options.on_worker_loss = WorkerLossPolicy::kShrink;
  options.worker_loss_timeout = absl::Seconds(20);
  auto aggregator = Make(options);
  JoinAll(*aggregator, MakeConfig(3, CodecId::kTernGrad));
  RunStepAndCheck(*aggregator, 3, 0, CodecId::kTernGrad);

  auto s0 = Share(*aggregator, LocalScalers(0, 1, {0, 1, 2}));
  auto s1 = Share(*aggregator, LocalScalers(1, 1, {0, 1, 2}));
  now_ += absl::Seconds(19);
  EXPECT_TRUE(aggregator->ExpireWaits(now_).ok());
  EXPECT_FALSE(s0->done());
  now_ += absl::Seconds(1);
  EXPECT_TRUE(aggregator->ExpireWaits(now_).ok());
  ASSERT_TRUE(s0->done() && s1->done());
  ASSERT_TRUE(s0->status().ok()) << s0->status();
  const std::vector<ChunkScaler>& shared = s0->value()->scalers;
  for (const ChunkScaler& scaler : shared) {
    EXPECT_EQ(scaler.scaler,
              std::max(MaxAbs(Gradient(0, 1, scaler.chunk_key,
                                       kChunkElements[scaler.chunk_key])),
                       MaxAbs(Gradient(1, 1, scaler.chunk_key,
                                       kChunkElements[scaler.chunk_key]))));
  }
  const PushRequest push0 = MakePush(0, 1, CodecId::kTernGrad, shared);
  const PushRequest push1 = MakePush(1, 1, CodecId::kTernGrad, shared);
  auto p0 = Push(*aggregator, push0);
  EXPECT_FALSE(p0->done());
  auto p1 = Push(*aggregator, push1);
  ASSERT_TRUE(p1->done());
  ASSERT_TRUE(p1->status().ok()) << p1->status();
  const std::unique_ptr<kernels::Codec> codec = Codec(CodecId::kTernGrad);
  for (uint32_t key = 0; key < kChunkElements.size(); ++key) {
    const kernels::Payload& pull = p1->value()->chunks[key].payload;
    EXPECT_EQ(pull.num_summands, 2u);
    const std::vector<float> a = Decoded(*codec, push0.chunks[key].payload);
    const std::vector<float> b = Decoded(*codec, push1.chunks[key].payload);
    const std::vector<float> average = Decoded(*codec, pull);
    for (size_t j = 0; j < average.size(); ++j) {
      EXPECT_NEAR(average[j], (a[j] + b[j]) / 2, 1e-5) << key << " " << j;
    }
  }
  // The lost worker's calls are refused until it joins again; then it is
  // let in at the step after the open one, and the others go on as two
  // until then.
  EXPECT_EQ(
      Share(*aggregator, LocalScalers(2, 2, {0, 1, 2}))->status().message(),
      "worker 2 was dropped from the run at step 1 (--on_worker_loss=shrink); "
      "restart it from its checkpoint (--checkpoint_dir) to let it in again");
  auto rejoin =
      Join(*aggregator, MakeJoin(2, MakeConfig(3, CodecId::kTernGrad)));
  ASSERT_TRUE(rejoin->status().ok()) << rejoin->status();
  EXPECT_EQ(rejoin->value().next_step, 2u);
  EXPECT_EQ(rejoin->value().live_from_step, 3u);
  RunStepAndCheck(*aggregator, 2, 2, CodecId::kTernGrad);
  RunStepAndCheck(*aggregator, 3, 3, CodecId::kTernGrad);
}

// A dropped worker that comes back from its checkpoint (issue 16): its
// pushes of completed steps, with no chunks, get the answers the others
// got; its push of the open step waits for that step's answer without
// being counted; from the next step on it is one of the workers again.
TEST_F(AggregatorTest, ADroppedWorkerCatchesUpAndIsLetInAtAStepBoundary) {
  AggregatorOptions options = Options(3);
  options.on_worker_loss = WorkerLossPolicy::kShrink;
  auto aggregator = Make(options);
  JoinAll(*aggregator, MakeConfig(3, CodecId::kFp32));
  RunStepAndCheck(*aggregator, 3, 0, CodecId::kFp32);
  auto lost0 = Push(*aggregator, MakePush(0, 1, CodecId::kFp32, {}));
  auto lost1 = Push(*aggregator, MakePush(1, 1, CodecId::kFp32, {}));
  now_ += absl::Seconds(50);
  EXPECT_TRUE(aggregator->ExpireWaits(now_).ok());
  EXPECT_EQ(lost0->status().code(), absl::StatusCode::kAborted);
  auto step1 = Push(*aggregator, MakePush(0, 1, CodecId::kFp32, {}));
  Push(*aggregator, MakePush(1, 1, CodecId::kFp32, {}));
  ASSERT_TRUE(step1->status().ok()) << step1->status();
  RunStepAndCheck(*aggregator, 2, 2, CodecId::kFp32);

  auto rejoin = Join(*aggregator, MakeJoin(2, MakeConfig(3, CodecId::kFp32)));
  ASSERT_TRUE(rejoin->status().ok()) << rejoin->status();
  EXPECT_EQ(rejoin->value().next_step, 3u);
  EXPECT_EQ(rejoin->value().oldest_kept_step, 0u);
  EXPECT_EQ(rejoin->value().live_from_step, 4u);
  const PushRequest empty1{2, 1, {}};
  auto caught1 = Push(*aggregator, empty1);
  ASSERT_TRUE(caught1->done());
  ASSERT_TRUE(caught1->status().ok()) << caught1->status();
  EXPECT_EQ(caught1->value(), step1->value());  // the same bytes

  // Step 3: worker 2 waits for the answer of workers 0 and 1.
  auto caught3 = Push(*aggregator, PushRequest{2, 3, {}});
  EXPECT_FALSE(caught3->done());
  const PushRequest push0 = MakePush(0, 3, CodecId::kFp32, {});
  auto p0 = Push(*aggregator, push0);
  auto p1 = Push(*aggregator, MakePush(1, 3, CodecId::kFp32, {}));
  ASSERT_TRUE(caught3->done() && p0->done());
  ASSERT_TRUE(caught3->status().ok()) << caught3->status();
  EXPECT_EQ(caught3->value(), p0->value());
  EXPECT_EQ(p0->value()->chunks[0].payload.num_summands, 2u);

  // Step 4 waits for worker 2 and averages over three.
  auto q0 = Push(*aggregator, MakePush(0, 4, CodecId::kFp32, {}));
  auto q1 = Push(*aggregator, MakePush(1, 4, CodecId::kFp32, {}));
  EXPECT_FALSE(q0->done());
  auto q2 = Push(*aggregator, MakePush(2, 4, CodecId::kFp32, {}));
  ASSERT_TRUE(q0->done() && q2->done());
  ASSERT_TRUE(q2->status().ok()) << q2->status();
  EXPECT_EQ(q2->value()->chunks[0].payload.num_summands, 3u);
  EXPECT_EQ(aggregator->step(), 5u);
}

// --catch_up_mb bounds the kept answers: a step evicted from them is
// stale, and a join says which is the oldest still kept.
TEST_F(AggregatorTest, TheKeptAnswersFitCatchUpBytes) {
  AggregatorOptions options = Options(2);
  // fp32 answers of the test's chunks: 2 of them fit.
  uint64_t answer_bytes = 1;
  for (const uint32_t elements : kChunkElements) {
    answer_bytes += sizeof(float) * elements;
  }
  options.catch_up_bytes = 2 * answer_bytes + 1;
  auto aggregator = Make(options);
  JoinAll(*aggregator, MakeConfig(2, CodecId::kFp32));
  for (uint64_t step = 0; step < 4; ++step) {
    RunStepAndCheck(*aggregator, 2, step, CodecId::kFp32);
  }
  auto old = Push(*aggregator, PushRequest{1, 1, {}});
  EXPECT_EQ(old->status().message(), "step 1 is stale: shard 0 is at step 4");
  auto kept = Push(*aggregator, PushRequest{1, 2, {}});
  ASSERT_TRUE(kept->status().ok()) << kept->status();
  EXPECT_EQ(kept->value()->step, 2u);
  auto rejoin = Join(*aggregator, MakeJoin(1, MakeConfig(2, CodecId::kFp32)));
  ASSERT_TRUE(rejoin->status().ok()) << rejoin->status();
  // Step 2 is kept now, but the open step's completion would evict it.
  EXPECT_EQ(rejoin->value().oldest_kept_step, 3u);
  EXPECT_EQ(rejoin->value().live_from_step, 4u);
}

// Shrink while pushes are added: those pushes cannot be taken out of the
// sums, so their workers are asked to push again (ABORTED), and the step
// completes over the remaining workers, in worker order.
TEST_F(AggregatorTest, ShrinkAsksTheRemainingWorkersToPushTheStepAgain) {
  AggregatorOptions options = Options(3);
  options.on_worker_loss = WorkerLossPolicy::kShrink;
  options.worker_loss_timeout = absl::Seconds(20);
  auto aggregator = Make(options);
  JoinAll(*aggregator, MakeConfig(3, CodecId::kFp32));
  const PushRequest push0 = MakePush(0, 0, CodecId::kFp32, {});
  const PushRequest push2 = MakePush(2, 0, CodecId::kFp32, {});
  auto p0 = Push(*aggregator, push0);
  auto p2 = Push(*aggregator, push2);
  now_ += absl::Seconds(20);
  EXPECT_TRUE(aggregator->ExpireWaits(now_).ok());
  for (const auto& call : {p0, p2}) {
    ASSERT_TRUE(call->done());
    EXPECT_EQ(call->status().code(), absl::StatusCode::kAborted);
    EXPECT_EQ(call->status().message(),
              "step 0: worker 1 dropped (--on_worker_loss=shrink); push step 0 "
              "again");
  }
  auto again2 = Push(*aggregator, push2);
  EXPECT_FALSE(again2->done());
  auto again0 = Push(*aggregator, push0);
  ASSERT_TRUE(again0->done() && again2->done());
  ASSERT_TRUE(again0->status().ok()) << again0->status();
  EXPECT_EQ(again0->value(), again2->value());
  const std::unique_ptr<kernels::Codec> codec = Codec(CodecId::kFp32);
  for (uint32_t key = 0; key < kChunkElements.size(); ++key) {
    const std::vector<float> a = Decoded(*codec, push0.chunks[key].payload);
    const std::vector<float> b = Decoded(*codec, push2.chunks[key].payload);
    const std::vector<float> average =
        Decoded(*codec, again0->value()->chunks[key].payload);
    for (size_t j = 0; j < average.size(); ++j) {
      EXPECT_EQ(average[j], (a[j] + b[j]) / 2) << key << " " << j;
    }
  }
  EXPECT_EQ(aggregator->step(), 1u);
}

TEST_F(AggregatorTest, ShrinkGoesOnWithASingleWorker) {
  AggregatorOptions options = Options(2);
  options.on_worker_loss = WorkerLossPolicy::kShrink;
  auto aggregator = Make(options);
  JoinAll(*aggregator, MakeConfig(2, CodecId::kFp32));
  RunStepAndCheck(*aggregator, 2, 0, CodecId::kFp32);
  // Worker 0 drops out: worker 1 alone goes on.
  auto p1 = Push(*aggregator, MakePush(1, 1, CodecId::kFp32, {}));
  now_ += absl::Seconds(50);
  EXPECT_TRUE(aggregator->ExpireWaits(now_).ok());
  EXPECT_EQ(p1->status().code(), absl::StatusCode::kAborted);
  auto again = Push(*aggregator, MakePush(1, 1, CodecId::kFp32, {}));
  ASSERT_TRUE(again->done());
  ASSERT_TRUE(again->status().ok()) << again->status();
  const std::unique_ptr<kernels::Codec> codec = Codec(CodecId::kFp32);
  EXPECT_EQ(Decoded(*codec, again->value()->chunks[0].payload),
            Gradient(1, 1, 0, kChunkElements[0]));
  EXPECT_TRUE(aggregator->run_status().ok());
}

// A restarted shard (--state_dir) still knows whom it dropped.
TEST_F(AggregatorTest, ShrinkIsKeptInTheShardState) {
  const AggregatorOptions options = ShrinkWithState(3);
  auto aggregator = Make(options);
  JoinAll(*aggregator, MakeConfig(3, CodecId::kFp32));
  auto p0 = Push(*aggregator, MakePush(0, 0, CodecId::kFp32, {}));
  auto p2 = Push(*aggregator, MakePush(2, 0, CodecId::kFp32, {}));
  now_ += absl::Seconds(50);
  EXPECT_TRUE(aggregator->ExpireWaits(now_).ok());
  EXPECT_EQ(p0->status().code(), absl::StatusCode::kAborted);
  aggregator.reset();  // a kill: the pushes of step 0 are lost with it

  auto restarted = Make(options);
  EXPECT_EQ(
      Push(*restarted, MakePush(1, 0, CodecId::kFp32, {}))->status().code(),
      absl::StatusCode::kFailedPrecondition);
  const PushRequest push0 = MakePush(0, 0, CodecId::kFp32, {});
  const PushRequest push2 = MakePush(2, 0, CodecId::kFp32, {});
  auto again0 = Push(*restarted, push0);
  EXPECT_FALSE(again0->done());  // waits for worker 2 only
  auto again2 = Push(*restarted, push2);
  ASSERT_TRUE(again0->done());
  ASSERT_TRUE(again0->status().ok()) << again0->status();
  const std::unique_ptr<kernels::Codec> codec = Codec(CodecId::kFp32);
  const std::vector<float> a = Decoded(*codec, push0.chunks[0].payload);
  const std::vector<float> b = Decoded(*codec, push2.chunks[0].payload);
  const std::vector<float> average =
      Decoded(*codec, again0->value()->chunks[0].payload);
  for (size_t j = 0; j < average.size(); ++j) {
    EXPECT_EQ(average[j], (a[j] + b[j]) / 2) << j;
  }
  EXPECT_EQ(restarted->step(), 1u);
}

// A worker let in again stays in after a restart of the shard.
TEST_F(AggregatorTest, AReadmittedWorkerIsKeptInTheShardState) {
  const AggregatorOptions options = ShrinkWithState(3);
  auto aggregator = Make(options);
  JoinAll(*aggregator, MakeConfig(3, CodecId::kFp32));
  Push(*aggregator, MakePush(0, 0, CodecId::kFp32, {}));
  Push(*aggregator, MakePush(1, 0, CodecId::kFp32, {}));
  now_ += absl::Seconds(50);
  EXPECT_TRUE(aggregator->ExpireWaits(now_).ok());  // worker 2 dropped
  RunStepAndCheck(*aggregator, 2, 0, CodecId::kFp32);
  auto rejoin = Join(*aggregator, MakeJoin(2, MakeConfig(3, CodecId::kFp32)));
  ASSERT_TRUE(rejoin->status().ok()) << rejoin->status();
  EXPECT_EQ(rejoin->value().live_from_step, 2u);
  auto caught1 = Push(*aggregator, PushRequest{2, 1, {}});
  RunStepAndCheck(*aggregator, 2, 1, CodecId::kFp32);
  ASSERT_TRUE(caught1->status().ok()) << caught1->status();
  aggregator.reset();  // a kill after step 1, which let worker 2 in

  auto restarted = Make(options);
  ASSERT_EQ(restarted->step(), 2u);
  auto p0 = Push(*restarted, MakePush(0, 2, CodecId::kFp32, {}));
  auto p1 = Push(*restarted, MakePush(1, 2, CodecId::kFp32, {}));
  EXPECT_FALSE(p0->done());  // waits for worker 2
  auto p2 = Push(*restarted, MakePush(2, 2, CodecId::kFp32, {}));
  ASSERT_TRUE(p2->done());
  ASSERT_TRUE(p2->status().ok()) << p2->status();
  EXPECT_EQ(p2->value()->chunks[0].payload.num_summands, 3u);
}

// --- timeouts ---

// The expiry rule alone (core/barrier.h): no --on_worker_loss policy fires.
TEST_F(AggregatorTest, PendingPushesExpireNamingTheMissingWorkers) {
  AggregatorOptions options = Options(4);
  options.worker_loss_timeout = absl::InfiniteDuration();
  auto aggregator = Make(options);
  JoinAll(*aggregator, MakeConfig(4, CodecId::kFp32));
  auto p0 = Push(*aggregator, MakePush(0, 0, CodecId::kFp32, {}));
  now_ += absl::Seconds(10);
  auto p1 = Push(*aggregator, MakePush(1, 0, CodecId::kFp32, {}));
  now_ += absl::Seconds(40);  // p0's deadline, not p1's
  EXPECT_TRUE(aggregator->ExpireWaits(now_).ok());
  ASSERT_TRUE(p0->done());
  EXPECT_FALSE(p1->done());
  EXPECT_EQ(p0->status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(p0->status().message(),
            "step 0: workers 2,3 did not push within 50s");
  now_ += absl::Seconds(10);
  EXPECT_TRUE(aggregator->ExpireWaits(now_).ok());
  ASSERT_TRUE(p1->done());
  EXPECT_EQ(p1->status().code(), absl::StatusCode::kDeadlineExceeded);

  // The step stays open: the late workers complete it, and a worker that
  // retries gets the answer.
  auto p2 = Push(*aggregator, MakePush(2, 0, CodecId::kFp32, {}));
  auto retry0 = Push(*aggregator, MakePush(0, 0, CodecId::kFp32, {}));
  auto p3 = Push(*aggregator, MakePush(3, 0, CodecId::kFp32, {}));
  ASSERT_TRUE(retry0->done());
  ASSERT_TRUE(retry0->status().ok()) << retry0->status();
  EXPECT_EQ(retry0->value(), p3->value());
  EXPECT_EQ(aggregator->step(), 1u);
}

TEST_F(AggregatorTest, PendingScalersAndJoinsExpireToo) {
  AggregatorOptions options = Options(2);
  options.worker_loss_timeout = absl::InfiniteDuration();
  auto aggregator = Make(options);
  const RunConfig config = MakeConfig(2, CodecId::kTernGrad);
  auto j0 = Join(*aggregator, MakeJoin(0, config));
  now_ += absl::Seconds(50);
  EXPECT_TRUE(aggregator->ExpireWaits(now_).ok());
  ASSERT_TRUE(j0->done());
  EXPECT_EQ(j0->status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(j0->status().message(), "worker 1 did not join shard 0 within 50s");

  auto j0_again = Join(*aggregator, MakeJoin(0, config));
  auto j1 = Join(*aggregator, MakeJoin(1, config));
  ASSERT_TRUE(j0_again->status().ok());
  auto s1 = Share(*aggregator, LocalScalers(1, 0, {0, 1, 2}));
  now_ += absl::Seconds(49);
  EXPECT_TRUE(aggregator->ExpireWaits(now_).ok());
  EXPECT_FALSE(s1->done());
  now_ += absl::Seconds(1);
  EXPECT_TRUE(aggregator->ExpireWaits(now_).ok());
  ASSERT_TRUE(s1->done());
  EXPECT_EQ(s1->status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(s1->status().message(),
            "step 0: worker 0 did not share scalers within 50s");
}

TEST_F(AggregatorTest, TheShardGivesUpWhenWorkersDoNotJoinInTime) {
  auto aggregator = Make(Options(3));
  auto j1 = Join(*aggregator, MakeJoin(1, MakeConfig(3, CodecId::kFp32)));
  EXPECT_TRUE(aggregator->ExpireWaits(now_ + absl::Seconds(299)).ok());
  const absl::Status status =
      aggregator->ExpireWaits(now_ + absl::Seconds(300));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(status.message(),
            "workers 0,2 of 3 did not join shard 0 within 300s "
            "(--join_timeout_s)");

  auto complete = Make(Options(1));
  JoinAll(*complete, MakeConfig(1, CodecId::kFp32));
  EXPECT_TRUE(complete->ExpireWaits(now_ + absl::Hours(10)).ok());
}

// --- CheckParams, Close ---

TEST_F(AggregatorTest, DivergedReplicasFailTheRunForEveryone) {
  auto aggregator = Make(Options(3));
  JoinAll(*aggregator, MakeConfig(3, CodecId::kFp32));
  EXPECT_TRUE(aggregator->CheckParams(0, 0, 0xaa).ok());
  EXPECT_TRUE(aggregator->CheckParams(1, 0, 0xaa).ok());
  auto pending = Push(*aggregator, MakePush(0, 0, CodecId::kFp32, {}));
  EXPECT_FALSE(pending->done());

  const absl::Status diverged = aggregator->CheckParams(2, 0, 0xbb);
  EXPECT_EQ(diverged.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(diverged.message(),
            "step 0: param checksum 0x00000000000000bb of worker 2 differs "
            "from 0x00000000000000aa of worker 0: the replicas diverged");
  ASSERT_TRUE(pending->done());
  EXPECT_EQ(pending->status(), diverged);
  EXPECT_EQ(aggregator->run_status(), diverged);
  auto later = Push(*aggregator, MakePush(1, 0, CodecId::kFp32, {}));
  EXPECT_EQ(later->status(), diverged);
  EXPECT_EQ(aggregator->CheckParams(0, 0, 0xaa), diverged);
  EXPECT_EQ(
      Join(*aggregator, MakeJoin(0, MakeConfig(3, CodecId::kFp32)))->status(),
      diverged);
}

TEST_F(AggregatorTest, CloseAnswersPendingAndLaterCalls) {
  auto aggregator = Make(Options(2));
  JoinAll(*aggregator, MakeConfig(2, CodecId::kFp32));
  auto pending = Push(*aggregator, MakePush(0, 0, CodecId::kFp32, {}));
  aggregator->Close(absl::UnavailableError("shard 0 is shutting down"));
  ASSERT_TRUE(pending->done());
  EXPECT_EQ(pending->status().code(), absl::StatusCode::kUnavailable);
  auto later = Push(*aggregator, MakePush(1, 0, CodecId::kFp32, {}));
  EXPECT_EQ(later->status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(AggregatorTest, DestroyingTheAggregatorAnswersPendingCalls) {
  auto aggregator = Make(Options(2));
  auto pending = Join(*aggregator, MakeJoin(0, MakeConfig(2, CodecId::kFp32)));
  aggregator.reset();
  ASSERT_TRUE(pending->done());
  EXPECT_EQ(pending->status().code(), absl::StatusCode::kUnavailable);
}

// --- error feedback on the shard ---

// A codec with error feedback whose rounding the test can follow exactly:
// a push or pull is the values rounded to integers, as raw floats. Its
// scalers record the context the pull was encoded with: (seed, step,
// chunk, group size, 1 if the stream is the shard's), so the test sees what
// the shard passed in.
class RoundingCodec final : public kernels::Codec {
 public:
  CodecId id() const override { return CodecId::kThreshold; }
  std::string name() const override { return "rounding"; }
  bool Summable() const override { return false; }
  bool UsesErrorFeedback() const override { return true; }

  absl::StatusOr<kernels::Payload> Encode(
      absl::Span<const float> values,
      const kernels::EncodeContext& context) const override {
    kernels::Payload payload;
    payload.codec = id();
    payload.layout = Layout::kRaw;
    payload.num_elements = values.size();
    payload.scalers = {
        static_cast<float>(context.stream.seed),
        static_cast<float>(context.stream.step),
        static_cast<float>(context.stream.chunk),
        static_cast<float>(context.group_size),
        context.stream.worker == kernels::kShardStreamWorker ? 1.0f : 0.0f};
    payload.data.resize(values.size() * sizeof(float));
    for (size_t i = 0; i < values.size(); ++i) {
      const float rounded = std::round(values[i]);
      std::memcpy(&payload.data[i * sizeof(float)], &rounded, sizeof(float));
    }
    return payload;
  }

  absl::Status Decode(const kernels::Payload& payload,
                      absl::Span<float> out) const override {
    if (payload.codec != id() || payload.layout != Layout::kRaw ||
        payload.num_elements != out.size() ||
        payload.data.size() != out.size() * sizeof(float) ||
        payload.scalers.size() != 5) {
      return absl::InvalidArgumentError("not a rounding payload");
    }
    if (!out.empty()) {
      std::memcpy(out.data(), payload.data.data(), payload.data.size());
    }
    return absl::OkStatus();
  }

  using Codec::NewAggregation;
  std::unique_ptr<kernels::Aggregation> NewAggregation(
      uint64_t num_elements, uint32_t num_workers,
      const kernels::AggregationContext& context) const override {
    return kernels::NewReencodingAggregation(*this, num_elements, num_workers,
                                             context);
  }
};

// Worker `worker`'s values for chunk `key` at `step`: multiples of 1/4, so
// the average of two workers and every residual are exact in float.
std::vector<float> QuarterGradient(uint32_t worker, uint64_t step, uint32_t key,
                                   uint64_t elements) {
  std::vector<float> values(elements);
  for (uint64_t j = 0; j < elements; ++j) {
    const uint64_t k = (worker + 1) * 7 + step * 5 + key * 3 + j * 11;
    values[j] = static_cast<float>(static_cast<int64_t>(k % 13) - 6) * 0.25f;
  }
  return values;
}

PushRequest RoundingPush(uint32_t worker, uint64_t step) {
  const RoundingCodec codec;
  PushRequest request{worker, step, {}};
  for (uint32_t key = 0; key < kChunkElements.size(); ++key) {
    // The worker's own error feedback is not what this test is about: it
    // pushes its values exactly (whole quarters survive the raw floats).
    kernels::Payload payload;
    payload.codec = codec.id();
    payload.layout = Layout::kRaw;
    payload.num_elements = kChunkElements[key];
    payload.scalers.assign(5, 0.0f);
    const std::vector<float> values =
        QuarterGradient(worker, step, key, kChunkElements[key]);
    payload.data.assign(reinterpret_cast<const char*>(values.data()),
                        values.size() * sizeof(float));
    request.chunks.push_back(ChunkPayload{key, std::move(payload)});
  }
  return request;
}

TEST_F(AggregatorTest, TheShardKeepsAResidualPerChunkAcrossSteps) {
  constexpr uint32_t kWorkers = 2;
  AggregatorOptions options = Options(kWorkers);
  std::vector<kernels::CodecOptions> made;
  options.make_codec = [&made](const kernels::CodecOptions& codec_options)
      -> absl::StatusOr<std::unique_ptr<kernels::Codec>> {
    made.push_back(codec_options);
    return std::unique_ptr<kernels::Codec>(std::make_unique<RoundingCodec>());
  };
  auto aggregator = Make(options);
  RunConfig config = MakeConfig(kWorkers, CodecId::kThreshold);
  config.push_layout = config.pull_layout = Layout::kRaw;
  config.codec_params.tau = 0.5f;
  JoinAll(*aggregator, config);
  ASSERT_EQ(made.size(), 1u) << "one run codec for the shard";
  EXPECT_EQ(made[0].id, CodecId::kThreshold);
  EXPECT_EQ(made[0].tau, 0.5f) << "the codec gets the run's codec_params";
  EXPECT_EQ(made[0].push_layout, Layout::kRaw);

  // The model of the shard: residual r = 0; per step, target = average +
  // r, pull = round(target), r = target - pull.
  std::vector<std::vector<float>> residual;
  for (const uint64_t elements : kChunkElements) {
    residual.emplace_back(elements, 0.0f);
  }
  // Group sizes: chunks 0 and 1 are rows of "w" (3x5), chunk 2 is "b".
  const std::vector<float> group_size = {5, 5, 0};
  bool carried = false;  // some pull carried a residual of an earlier step
  for (uint64_t step = 0; step < 5; ++step) {
    auto p0 = Push(*aggregator, RoundingPush(0, step));
    // A duplicate of worker 0 while the step is open: counted once.
    auto dup = Push(*aggregator, RoundingPush(0, step));
    EXPECT_FALSE(dup->done());
    auto p1 = Push(*aggregator, RoundingPush(1, step));
    ASSERT_TRUE(p1->done());
    ASSERT_TRUE(p1->status().ok()) << p1->status();
    ASSERT_TRUE(dup->done());
    EXPECT_EQ(dup->value(), p1->value());
    // Retries of the completed step, from both workers: the cached answer,
    // which leaves the residual alone.
    for (uint32_t w = 0; w < kWorkers; ++w) {
      auto retry = Push(*aggregator, RoundingPush(w, step));
      ASSERT_TRUE(retry->done());
      ASSERT_TRUE(retry->status().ok()) << retry->status();
      EXPECT_EQ(retry->value(), p1->value());
    }

    const PushReply& reply = *p1->value();
    ASSERT_EQ(reply.chunks.size(), kChunkElements.size());
    for (uint32_t key = 0; key < kChunkElements.size(); ++key) {
      const kernels::Payload& pull = reply.chunks[key].payload;
      EXPECT_EQ(pull.num_summands, kWorkers);
      EXPECT_THAT(
          pull.scalers,
          ElementsAre(static_cast<float>(kSeed), static_cast<float>(step),
                      static_cast<float>(key), group_size[key], 1.0f))
          << "the pull's stream is (seed, step, chunk, kShardStreamWorker)";
      const std::vector<float> a =
          QuarterGradient(0, step, key, kChunkElements[key]);
      const std::vector<float> b =
          QuarterGradient(1, step, key, kChunkElements[key]);
      std::vector<float> pulled(kChunkElements[key]);
      ASSERT_TRUE(RoundingCodec().Decode(pull, absl::MakeSpan(pulled)).ok());
      for (size_t j = 0; j < pulled.size(); ++j) {
        const float target = (a[j] + b[j]) / 2 + residual[key][j];
        const float expected = std::round(target);
        EXPECT_EQ(pulled[j], expected)
            << "step " << step << " chunk " << key << " element " << j;
        if (expected != std::round((a[j] + b[j]) / 2)) carried = true;
        residual[key][j] = target - expected;
      }
    }
  }
  EXPECT_TRUE(carried) << "the test data never exercised the residual";
}

TEST_F(AggregatorTest, Fp32ChunksOfAnErrorFeedbackRunKeepNoResidual) {
  constexpr uint32_t kWorkers = 2;
  AggregatorOptions options = Options(kWorkers);
  options.make_codec = [](const kernels::CodecOptions&)
      -> absl::StatusOr<std::unique_ptr<kernels::Codec>> {
    return std::unique_ptr<kernels::Codec>(std::make_unique<RoundingCodec>());
  };
  auto aggregator = Make(options);
  RunConfig config = MakeConfig(kWorkers, CodecId::kThreshold);
  config.push_layout = config.pull_layout = Layout::kRaw;
  config.fp32_chunk_keys = {2};
  JoinAll(*aggregator, config);
  const std::unique_ptr<kernels::Codec> fp32 = Codec(CodecId::kFp32);
  for (uint64_t step = 0; step < 3; ++step) {
    std::vector<PushRequest> pushes;
    for (uint32_t w = 0; w < kWorkers; ++w) {
      pushes.push_back(RoundingPush(w, step));
      kernels::EncodeContext context;
      absl::StatusOr<kernels::Payload> raw =
          fp32->Encode(QuarterGradient(w, step, 2, kChunkElements[2]), context);
      ASSERT_TRUE(raw.ok());
      pushes.back().chunks[2].payload = *std::move(raw);
    }
    Push(*aggregator, pushes[0]);
    auto last = Push(*aggregator, pushes[1]);
    ASSERT_TRUE(last->done());
    ASSERT_TRUE(last->status().ok()) << last->status();
    const kernels::Payload& pull = last->value()->chunks[2].payload;
    EXPECT_EQ(pull.codec, CodecId::kFp32);
    const std::vector<float> average = Decoded(*fp32, pull);
    const std::vector<float> a = QuarterGradient(0, step, 2, kChunkElements[2]);
    const std::vector<float> b = QuarterGradient(1, step, 2, kChunkElements[2]);
    for (size_t j = 0; j < average.size(); ++j) {
      EXPECT_EQ(average[j], (a[j] + b[j]) / 2) << "the plain average";
    }
  }
}

TEST_F(AggregatorTest, ALayoutTheCodecDoesNotWriteIsRefusedAtJoin) {
  auto aggregator = Make(Options(1));
  RunConfig config = MakeConfig(1, CodecId::kOneBit);  // layouts RAW
  auto call = Join(*aggregator, MakeJoin(0, config));
  ASSERT_TRUE(call->done());
  EXPECT_EQ(call->status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(call->status().message(), HasSubstr("run config: "));
  EXPECT_THAT(call->status().message(), HasSubstr("RAW"));
  config.push_layout = config.pull_layout = Layout::kSignBits;
  call = Join(*aggregator, MakeJoin(0, config));
  ASSERT_TRUE(call->done());
  EXPECT_TRUE(call->status().ok()) << call->status();
}

TEST_F(AggregatorTest, ACodecTheKernelsHaveNotBuiltIsARunConfigError) {
  AggregatorOptions options = Options(1);
  options.make_codec = [](const kernels::CodecOptions& codec_options)
      -> absl::StatusOr<std::unique_ptr<kernels::Codec>> {
    return absl::UnimplementedError(absl::StrCat(
        "codec ", kernels::CodecName(codec_options.id), " is not built yet"));
  };
  auto aggregator = Make(options);
  auto call = Join(*aggregator, MakeJoin(0, MakeConfig(1, CodecId::kQsgd)));
  ASSERT_TRUE(call->done());
  EXPECT_EQ(call->status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(call->status().message(),
              HasSubstr("run config: codec qsgd is not built yet"));
}

// --- threads ---

TEST_F(AggregatorTest, WorkersAsThreadsRunManySteps) {
  constexpr uint32_t kWorkers = 4;
  constexpr uint64_t kSteps = 20;
  AggregatorOptions options = Options(kWorkers);
  options.clock = [] { return absl::Now(); };
  auto aggregator = Make(options);
  const RunConfig config = MakeConfig(kWorkers, CodecId::kTernGrad);
  std::vector<std::vector<PushAnswer>> answers(kWorkers);
  std::vector<std::thread> threads;
  for (uint32_t w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      // Each barrier call blocks this thread on a notification that the
      // thread completing the barrier fires.
      absl::Notification joined;
      aggregator->Join(MakeJoin(w, config), [&](absl::StatusOr<JoinReply> r) {
        EXPECT_TRUE(r.ok()) << r.status();
        joined.Notify();
      });
      joined.WaitForNotification();
      for (uint64_t step = 0; step < kSteps; ++step) {
        absl::Notification shared_note;
        std::vector<ChunkScaler> shared;
        aggregator->ShareScalers(LocalScalers(w, step, {0, 1, 2}),
                                 [&](absl::StatusOr<ScalerAnswer> r) {
                                   EXPECT_TRUE(r.ok()) << r.status();
                                   if (r.ok()) shared = (*r)->scalers;
                                   shared_note.Notify();
                                 });
        shared_note.WaitForNotification();
        absl::Notification pushed;
        aggregator->PushPull(MakePush(w, step, CodecId::kTernGrad, shared),
                             [&](absl::StatusOr<PushAnswer> r) {
                               EXPECT_TRUE(r.ok()) << r.status();
                               if (r.ok()) answers[w].push_back(*r);
                               pushed.Notify();
                             });
        pushed.WaitForNotification();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(aggregator->step(), kSteps);
  for (uint32_t w = 0; w < kWorkers; ++w) {
    ASSERT_EQ(answers[w].size(), kSteps);
    for (uint64_t step = 0; step < kSteps; ++step) {
      EXPECT_EQ(answers[w][step], answers[0][step]);
      EXPECT_EQ(answers[w][step]->step, step);
    }
  }
}

}  // namespace
}  // namespace tern::server
