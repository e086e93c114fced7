// The plain-C++ twins of the tern.v1 parameter-server messages
// (proto/tern/v1/parameter_server.proto documents every field). The
// aggregator works on these; server/wire.h converts them from and to
// protobuf, so the aggregator is tested without protobuf or gRPC (STYLE.md,
// habit 7).
#ifndef TERN_SERVER_MESSAGES_H_
#define TERN_SERVER_MESSAGES_H_

#include <cstdint>
#include <string>
#include <vector>

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
  bool drop_quantize = kernels::CodecOptions{}.drop_quantize;
  uint32_t qsgd_levels = kernels::CodecOptions{}.qsgd_levels;
  uint32_t qsgd_bucket = kernels::CodecOptions{}.qsgd_bucket;
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
  options.drop_quantize = params.drop_quantize;
  options.qsgd_levels = params.qsgd_levels;
  options.qsgd_bucket = params.qsgd_bucket;
  return options;
}

// One trainable tensor; only float32 tensors exist (wire.h refuses others).
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
};

struct JoinRequest {
  uint32_t worker_id = 0;
  uint32_t shard_index = 0;
  RunConfig config;
  std::vector<TensorSpec> tensors;  // the ParamSpec
  uint64_t param_spec_hash = 0;
  uint64_t param_checksum = 0;
};

struct JoinReply {
  uint32_t shard_index = 0;
  // The step the worker runs next.
  uint64_t next_step = 0;
  // The chunks this shard owns, ascending.
  std::vector<uint32_t> chunk_keys;
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

struct ChunkPayload {
  uint32_t chunk_key = 0;
  kernels::Payload payload;
};

struct PushRequest {
  uint32_t worker_id = 0;
  uint64_t step = 0;
  std::vector<ChunkPayload> chunks;
};

struct PushReply {
  uint64_t step = 0;
  // The aggregate of every chunk of the shard, in key order.
  std::vector<ChunkPayload> chunks;
};

}  // namespace tern::server

#endif  // TERN_SERVER_MESSAGES_H_
