// The plain-C++ twins of the tern.v1 parameter-server messages
// (proto/tern/v1/parameter_server.proto documents every field). The
// aggregator works on these; server/wire.h converts them from and to
// protobuf, so the aggregator is tested without protobuf or gRPC (STYLE.md,
// habit 7).
#ifndef TERN_SERVER_MESSAGES_H_
#define TERN_SERVER_MESSAGES_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/partitioner.h"
#include "kernels/codec_options.h"
#include "kernels/payload.h"

namespace tern::server {

// RunConfig.codec_params: the compressors' own options (kernels/
// codec_options.h documents each), with its defaults. wire.h turns a zero or
// absent field into the default, so a worker that sends none (an older one)
// still joins a run that uses the defaults.
struct CodecParams {
  uint32_t sample_size = kernels::CodecOptions{}.sample_size;
  bool sampled_means = kernels::CodecOptions{}.sampled_means;
  float tau = kernels::CodecOptions{}.tau;
  float proportion = kernels::CodecOptions{}.proportion;
  float drop_ratio = kernels::CodecOptions{}.drop_ratio;
  kernels::DropScope drop_scope = kernels::CodecOptions{}.drop_scope;
  kernels::DropSurvivors drop_survivors =
      kernels::CodecOptions{}.drop_survivors;
  uint32_t qsgd_levels = kernels::CodecOptions{}.qsgd_levels;
  uint32_t qsgd_bucket = kernels::CodecOptions{}.qsgd_bucket;
};

// RunConfig.mode: how the shard trains (DESIGN sections 3 and 4). The
// values are the wire's (tern.v1.Mode).
enum class RunMode : uint32_t {
  kTernGrad = 0,
  kWeightGrad = 1,
  kGaia = 2,
};

// "terngrad", "weightgrad" or "gaia".
inline const char* RunModeName(RunMode mode) {
  switch (mode) {
    case RunMode::kTernGrad:
      return "terngrad";
    case RunMode::kWeightGrad:
      return "weightgrad";
    case RunMode::kGaia:
      return "gaia";
  }
  return "unknown";
}

// RunConfig.optimizer: the LPS's momentum SGD in the weightgrad and gaia
// modes (proto/tern/v1/parameter_server.proto).
struct OptimizerConfig {
  double lr = 0;
  double momentum = 0;
  double weight_decay = 0;
  std::string lr_schedule;
  uint64_t lr_step_every = 0;
  double lr_gamma = 0;
  uint64_t steps = 0;
  // Local steps per epoch (0: not known); proto/tern/v1/parameter_server.proto.
  uint64_t steps_per_epoch = 0;
};

// What every worker and shard must agree on before step 0.
struct RunConfig {
  std::string run_id;
  uint32_t num_workers = 0;
  uint32_t num_shards = 0;
  uint64_t partition_bytes = 0;
  uint64_t seed = 0;
  kernels::CodecId codec = kernels::CodecId::kUnspecified;
  kernels::Layout push_layout = kernels::Layout::kUnspecified;
  kernels::Layout pull_layout = kernels::Layout::kUnspecified;
  // TernGrad's clipping constant c (0 = no clipping).
  float clip = 0;
  // Chunks that travel in fp32 whatever `codec` is.
  std::vector<uint32_t> fp32_chunk_keys;
  CodecParams codec_params;
  RunMode mode = RunMode::kTernGrad;
  OptimizerConfig optimizer;
  // Every worker starts from worker 0's parameters, handed out at the join.
  bool broadcast_start = false;
  ShardAssignment shard_assignment = ShardAssignment::kBalanced;
};

// The options the run's codec is made with, the same as the workers':
// `codec`, `clip`, the layouts and `codec_params`. The compressors write one
// layout each (chosen by their parameters) and refuse any other they are
// named, so a join whose layouts do not fit its codec fails at once.
inline kernels::CodecOptions RunCodecOptions(const RunConfig& config) {
  kernels::CodecOptions options;
  options.id = config.codec;
  options.clip = config.clip;
  options.push_layout = config.push_layout;
  options.pull_layout = config.pull_layout;
  const CodecParams& params = config.codec_params;
  options.sample_size = params.sample_size;
  options.sampled_means = params.sampled_means;
  options.tau = params.tau;
  options.proportion = params.proportion;
  options.drop_ratio = params.drop_ratio;
  options.drop_scope = params.drop_scope;
  options.drop_survivors = params.drop_survivors;
  options.qsgd_levels = params.qsgd_levels;
  options.qsgd_bucket = params.qsgd_bucket;
  return options;
}

// One trainable tensor; only float32 tensors exist (wire.h refuses others).
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
};

struct ChunkPayload {
  uint32_t chunk_key = 0;
  kernels::Payload payload;
};

struct JoinRequest {
  uint32_t worker_id = 0;
  uint32_t shard_index = 0;
  RunConfig config;
  std::vector<TensorSpec> tensors;  // the ParamSpec
  uint64_t param_spec_hash = 0;
  uint64_t param_checksum = 0;
  // Weightgrad and gaia: worker 0's initial weights of the shard's chunks
  // (fp32 RAW, key order); empty otherwise.
  std::vector<ChunkPayload> initial_weights;
};

struct JoinReply {
  uint32_t shard_index = 0;
  // The step the worker runs next.
  uint64_t next_step = 0;
  // The chunks this shard owns, ascending.
  std::vector<uint32_t> chunk_keys;
  // broadcast_start: worker 0's initial weights of those chunks (shared by
  // every answer; null otherwise) and its checksum of all its parameters.
  std::shared_ptr<const std::vector<ChunkPayload>> initial_weights;
  uint64_t param_checksum = 0;
  // TernGrad shards (none from the LPS): the oldest step whose answer the
  // shard will still have when the joining worker asks for it, and the
  // first step whose push it counts from that worker: next_step, or for a
  // dropped worker let in again the step after the open one (its pushes of
  // earlier steps get the kept answers).
  std::optional<uint64_t> oldest_kept_step;
  std::optional<uint64_t> live_from_step;
};

struct ChunkScaler {
  uint32_t chunk_key = 0;
  float scaler = 0;
};

struct ScalerRequest {
  uint32_t worker_id = 0;
  uint64_t step = 0;
  std::vector<ChunkScaler> scalers;
};

struct ScalerReply {
  uint64_t step = 0;
  // s_k = max_i s_ik for every TernGrad chunk of the shard, in key order.
  std::vector<ChunkScaler> scalers;
};

struct PushRequest {
  uint32_t worker_id = 0;
  uint64_t step = 0;
  std::vector<ChunkPayload> chunks;
  // LPS only: answer with fp32 weights (PushPullRequest.fp32_weights).
  bool fp32_weights = false;
};

struct PushReply {
  uint64_t step = 0;
  // The aggregate of every chunk of the shard, in key order (weightgrad
  // and gaia: its current weights).
  std::vector<ChunkPayload> chunks;
  // Weightgrad and gaia, on the answer to the run's last step: the LPS's
  // weight checksum after the final synchronization; 0 otherwise.
  uint64_t param_checksum = 0;
};

// A step's answer, shared by every call it answers (a shard's workers, a
// duplicate push), never copied.
using PushAnswer = std::shared_ptr<const PushReply>;

}  // namespace tern::server

#endif  // TERN_SERVER_MESSAGES_H_
