#include "server/wire.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "core/wire.h"

namespace tern::server {
namespace {

absl::Status Prefixed(const absl::Status& status, absl::string_view prefix) {
  return absl::Status(status.code(),
                      absl::StrCat(prefix, ": ", status.message()));
}

// A float field of CodecParams: 0 (absent) is `fallback`; anything else
// must be finite and in (low, high), or above low when `high` is NaN.
absl::StatusOr<float> FloatParam(float value, float fallback,
                                 absl::string_view field, float low,
                                 float high) {
  if (value == 0) return fallback;
  const bool bounded = !std::isnan(high);
  if (!std::isfinite(value) || !(value > low) || (bounded && !(value < high))) {
    return absl::InvalidArgumentError(
        absl::StrCat("codec_params.", field, " ", value, " is not ",
                     bounded ? absl::StrCat("in (", low, ", ", high, ")")
                             : absl::StrCat("a finite number > ", low)));
  }
  return value;
}

absl::StatusOr<RunConfig> ConfigFromWire(const tern::v1::RunConfig& wire) {
  RunConfig config;
  config.run_id = wire.run_id();
  config.num_workers = wire.num_workers();
  config.num_shards = wire.num_shards();
  config.partition_bytes = wire.partition_bytes();
  config.seed = wire.seed();
  TERN_ASSIGN_OR_RETURN(config.codec, core::CodecFromWire(wire.codec()));
  TERN_ASSIGN_OR_RETURN(config.push_layout,
                        core::LayoutFromWire(wire.push_layout()));
  TERN_ASSIGN_OR_RETURN(config.pull_layout,
                        core::LayoutFromWire(wire.pull_layout()));
  config.clip = wire.clip();
  config.fp32_chunk_keys.assign(wire.fp32_chunk_keys().begin(),
                                wire.fp32_chunk_keys().end());
  TERN_ASSIGN_OR_RETURN(config.codec_params,
                        CodecParamsFromWire(wire.codec_params()));
  switch (wire.mode()) {
    case tern::v1::MODE_TERNGRAD:
    case tern::v1::MODE_WEIGHTGRAD:
    case tern::v1::MODE_GAIA:
      config.mode = static_cast<RunMode>(wire.mode());
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("mode ", static_cast<int>(wire.mode()),
                       " is not MODE_TERNGRAD, MODE_WEIGHTGRAD or MODE_GAIA"));
  }
  const tern::v1::OptimizerConfig& optimizer = wire.optimizer();
  config.optimizer.lr = optimizer.lr();
  config.optimizer.momentum = optimizer.momentum();
  config.optimizer.weight_decay = optimizer.weight_decay();
  config.optimizer.lr_schedule = optimizer.lr_schedule();
  config.optimizer.lr_step_every = optimizer.lr_step_every();
  config.optimizer.lr_gamma = optimizer.lr_gamma();
  config.optimizer.steps = optimizer.steps();
  config.optimizer.steps_per_epoch = optimizer.steps_per_epoch();
  config.broadcast_start = wire.broadcast_start();
  switch (wire.shard_assignment()) {
    case tern::v1::SHARD_ASSIGNMENT_BALANCED:
      config.shard_assignment = ShardAssignment::kBalanced;
      break;
    case tern::v1::SHARD_ASSIGNMENT_BACKWARD_ORDER:
      config.shard_assignment = ShardAssignment::kBackwardOrder;
      break;
    case tern::v1::SHARD_ASSIGNMENT_EVEN:
      config.shard_assignment = ShardAssignment::kEven;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "shard_assignment ", static_cast<int>(wire.shard_assignment()),
          " is not SHARD_ASSIGNMENT_BALANCED, SHARD_ASSIGNMENT_BACKWARD_ORDER "
          "or SHARD_ASSIGNMENT_EVEN"));
  }
  return config;
}

// ShardAssignment's values are the proto's, so it crosses the wire by a cast
// (the worker's join does the same).
static_assert(static_cast<int>(ShardAssignment::kBalanced) ==
              tern::v1::SHARD_ASSIGNMENT_BALANCED);
static_assert(static_cast<int>(ShardAssignment::kBackwardOrder) ==
              tern::v1::SHARD_ASSIGNMENT_BACKWARD_ORDER);
static_assert(static_cast<int>(ShardAssignment::kEven) ==
              tern::v1::SHARD_ASSIGNMENT_EVEN);

void ConfigToWire(const RunConfig& config, tern::v1::RunConfig* out) {
  out->set_run_id(config.run_id);
  out->set_num_workers(config.num_workers);
  out->set_num_shards(config.num_shards);
  out->set_partition_bytes(config.partition_bytes);
  out->set_seed(config.seed);
  out->set_codec(static_cast<tern::v1::Codec>(config.codec));
  out->set_push_layout(static_cast<tern::v1::Layout>(config.push_layout));
  out->set_pull_layout(static_cast<tern::v1::Layout>(config.pull_layout));
  out->set_clip(config.clip);
  out->mutable_fp32_chunk_keys()->Assign(config.fp32_chunk_keys.begin(),
                                         config.fp32_chunk_keys.end());
  CodecParamsToWire(config.codec_params, out->mutable_codec_params());
  out->set_mode(static_cast<tern::v1::Mode>(config.mode));
  out->set_broadcast_start(config.broadcast_start);
  out->set_shard_assignment(
      static_cast<tern::v1::ShardAssignment>(config.shard_assignment));
  tern::v1::OptimizerConfig* optimizer = out->mutable_optimizer();
  optimizer->set_lr(config.optimizer.lr);
  optimizer->set_momentum(config.optimizer.momentum);
  optimizer->set_weight_decay(config.optimizer.weight_decay);
  optimizer->set_lr_schedule(config.optimizer.lr_schedule);
  optimizer->set_lr_step_every(config.optimizer.lr_step_every);
  optimizer->set_lr_gamma(config.optimizer.lr_gamma);
  optimizer->set_steps(config.optimizer.steps);
  optimizer->set_steps_per_epoch(config.optimizer.steps_per_epoch);
}

// A push without its chunks.
PushRequest PushHeaderFromWire(const tern::v1::PushPullRequest& wire) {
  PushRequest request;
  request.worker_id = wire.worker_id();
  request.step = wire.step();
  request.fp32_weights = wire.fp32_weights();
  return request;
}

absl::Status PushChunkError(const absl::Status& status,
                            const tern::v1::PushPullRequest& wire,
                            const tern::v1::ChunkPayload& chunk) {
  return Prefixed(
      status, absl::StrCat("step ", wire.step(), ": chunk ", chunk.chunk_key(),
                           " of worker ", wire.worker_id()));
}

}  // namespace

absl::StatusOr<CodecParams> CodecParamsFromWire(
    const tern::v1::CodecParams& wire) {
  const CodecParams defaults;
  const float kNoBound = std::numeric_limits<float>::quiet_NaN();
  CodecParams params;
  params.sample_size =
      wire.sample_size() == 0 ? defaults.sample_size : wire.sample_size();
  params.sampled_means = wire.sampled_means();
  TERN_ASSIGN_OR_RETURN(
      params.tau, FloatParam(wire.tau(), defaults.tau, "tau", 0, kNoBound));
  TERN_ASSIGN_OR_RETURN(
      params.proportion,
      FloatParam(wire.proportion(), defaults.proportion, "proportion", 0, 1));
  TERN_ASSIGN_OR_RETURN(
      params.drop_ratio,
      FloatParam(wire.drop_ratio(), defaults.drop_ratio, "drop_ratio", 0, 1));
  switch (wire.drop_scope()) {
    case static_cast<uint32_t>(kernels::DropScope::kGlobal):
    case static_cast<uint32_t>(kernels::DropScope::kPerTensor):
      params.drop_scope = static_cast<kernels::DropScope>(wire.drop_scope());
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("codec_params.drop_scope ", wire.drop_scope(),
                       " is not 0 (global) or 1 (per tensor)"));
  }
  // 1 is also what an older worker's `bool drop_quantize = 7` sends.
  switch (wire.drop_survivors()) {
    case static_cast<uint32_t>(kernels::DropSurvivors::kValues):
    case static_cast<uint32_t>(kernels::DropSurvivors::k1Bit):
    case static_cast<uint32_t>(kernels::DropSurvivors::k2Bit):
      params.drop_survivors =
          static_cast<kernels::DropSurvivors>(wire.drop_survivors());
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("codec_params.drop_survivors ", wire.drop_survivors(),
                       " is not 0 (values), 1 (1bit) or 2 (2bit)"));
  }
  if (wire.qsgd_levels() > kMaxQsgdLevels) {
    return absl::InvalidArgumentError(
        absl::StrCat("codec_params.qsgd_levels ", wire.qsgd_levels(),
                     " is not in [1, ", kMaxQsgdLevels, "]"));
  }
  params.qsgd_levels =
      wire.qsgd_levels() == 0 ? defaults.qsgd_levels : wire.qsgd_levels();
  params.qsgd_bucket =
      wire.qsgd_bucket() == 0 ? defaults.qsgd_bucket : wire.qsgd_bucket();
  return params;
}

void CodecParamsToWire(const CodecParams& params, tern::v1::CodecParams* out) {
  out->set_sample_size(params.sample_size);
  out->set_sampled_means(params.sampled_means);
  out->set_tau(params.tau);
  out->set_proportion(params.proportion);
  out->set_drop_ratio(params.drop_ratio);
  out->set_drop_scope(static_cast<uint32_t>(params.drop_scope));
  out->set_drop_survivors(static_cast<uint32_t>(params.drop_survivors));
  out->set_qsgd_levels(params.qsgd_levels);
  out->set_qsgd_bucket(params.qsgd_bucket);
}

absl::StatusOr<JoinRequest> JoinFromWire(const tern::v1::JoinRequest& wire) {
  JoinRequest request;
  request.worker_id = wire.worker_id();
  request.shard_index = wire.shard_index();
  absl::StatusOr<RunConfig> config = ConfigFromWire(wire.config());
  if (!config.ok()) return Prefixed(config.status(), "run config");
  request.config = *std::move(config);
  request.tensors.reserve(wire.param_spec().tensors_size());
  for (const tern::v1::TensorSpec& tensor : wire.param_spec().tensors()) {
    if (tensor.dtype() != tern::v1::DTYPE_FLOAT32) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", tensor.name(), "': dtype ", tensor.dtype(),
          " is not supported (only DTYPE_FLOAT32 tensors are trained)"));
    }
    request.tensors.push_back(TensorSpec{
        tensor.name(), {tensor.shape().begin(), tensor.shape().end()}});
  }
  request.param_spec_hash = wire.param_spec_hash();
  request.param_checksum = wire.param_checksum();
  for (const tern::v1::ChunkPayload& chunk : wire.initial_weights()) {
    absl::StatusOr<kernels::Payload> payload = PayloadFromWire(chunk.payload());
    if (!payload.ok()) {
      return Prefixed(
          payload.status(),
          absl::StrCat("initial weights of chunk ", chunk.chunk_key()));
    }
    request.initial_weights.push_back(
        ChunkPayload{chunk.chunk_key(), *std::move(payload)});
  }
  return request;
}

ScalerRequest ScalersFromWire(const tern::v1::ShareScalersRequest& wire) {
  ScalerRequest request;
  request.worker_id = wire.worker_id();
  request.step = wire.step();
  request.scalers.reserve(wire.scalers_size());
  for (const tern::v1::ChunkScaler& scaler : wire.scalers()) {
    request.scalers.push_back(ChunkScaler{scaler.chunk_key(), scaler.scaler()});
  }
  return request;
}

absl::StatusOr<PushRequest> PushFromWire(
    const tern::v1::PushPullRequest& wire) {
  PushRequest request = PushHeaderFromWire(wire);
  request.chunks.reserve(wire.chunks_size());
  for (const tern::v1::ChunkPayload& chunk : wire.chunks()) {
    absl::StatusOr<kernels::Payload> payload = PayloadFromWire(chunk.payload());
    if (!payload.ok()) return PushChunkError(payload.status(), wire, chunk);
    request.chunks.push_back(
        ChunkPayload{chunk.chunk_key(), *std::move(payload)});
  }
  return request;
}

absl::StatusOr<PushRequest> TakePushFromWire(tern::v1::PushPullRequest* wire) {
  PushRequest request = PushHeaderFromWire(*wire);
  // The chunks leave `wire` at once, objects and all, into a local that
  // dies with this function (a pointer swap: both are on the heap).
  google::protobuf::RepeatedPtrField<tern::v1::ChunkPayload> chunks;
  chunks.Swap(wire->mutable_chunks());
  request.chunks.reserve(chunks.size());
  for (tern::v1::ChunkPayload& chunk : chunks) {
    absl::StatusOr<kernels::Payload> payload =
        PayloadFromWire(std::move(*chunk.mutable_payload()));
    if (!payload.ok()) return PushChunkError(payload.status(), *wire, chunk);
    request.chunks.push_back(
        ChunkPayload{chunk.chunk_key(), *std::move(payload)});
  }
  return request;
}

void JoinToWire(const JoinReply& reply, tern::v1::JoinResponse* out) {
  out->set_shard_index(reply.shard_index);
  out->set_next_step(reply.next_step);
  if (reply.oldest_kept_step.has_value()) {
    out->set_oldest_kept_step(*reply.oldest_kept_step);
  }
  if (reply.live_from_step.has_value()) {
    out->set_live_from_step(*reply.live_from_step);
  }
  out->mutable_chunk_keys()->Assign(reply.chunk_keys.begin(),
                                    reply.chunk_keys.end());
  if (reply.initial_weights != nullptr) {
    for (const ChunkPayload& chunk : *reply.initial_weights) {
      tern::v1::ChunkPayload* wire = out->add_initial_weights();
      wire->set_chunk_key(chunk.chunk_key);
      PayloadToWire(chunk.payload, wire->mutable_payload());
    }
  }
  out->set_param_checksum(reply.param_checksum);
}

void ScalersToWire(const ScalerReply& reply,
                   tern::v1::ShareScalersResponse* out) {
  out->set_step(reply.step);
  for (const ChunkScaler& scaler : reply.scalers) {
    tern::v1::ChunkScaler* wire = out->add_scalers();
    wire->set_chunk_key(scaler.chunk_key);
    wire->set_scaler(scaler.scaler);
  }
}

void PushToWire(const PushReply& reply, tern::v1::PushPullResponse* out) {
  out->set_step(reply.step);
  out->set_param_checksum(reply.param_checksum);
  for (const ChunkPayload& chunk : reply.chunks) {
    tern::v1::ChunkPayload* wire = out->add_chunks();
    wire->set_chunk_key(chunk.chunk_key);
    PayloadToWire(chunk.payload, wire->mutable_payload());
  }
}

void JoinToWire(const JoinRequest& request, tern::v1::JoinRequest* out) {
  out->set_worker_id(request.worker_id);
  out->set_shard_index(request.shard_index);
  ConfigToWire(request.config, out->mutable_config());
  for (const TensorSpec& tensor : request.tensors) {
    tern::v1::TensorSpec* wire = out->mutable_param_spec()->add_tensors();
    wire->set_name(tensor.name);
    wire->set_dtype(tern::v1::DTYPE_FLOAT32);
    wire->mutable_shape()->Assign(tensor.shape.begin(), tensor.shape.end());
  }
  out->set_param_spec_hash(request.param_spec_hash);
  out->set_param_checksum(request.param_checksum);
  for (const ChunkPayload& chunk : request.initial_weights) {
    tern::v1::ChunkPayload* wire = out->add_initial_weights();
    wire->set_chunk_key(chunk.chunk_key);
    PayloadToWire(chunk.payload, wire->mutable_payload());
  }
}

ScalerReply ScalerReplyFromWire(const tern::v1::ShareScalersResponse& wire) {
  ScalerReply reply;
  reply.step = wire.step();
  for (const tern::v1::ChunkScaler& scaler : wire.scalers()) {
    reply.scalers.push_back(ChunkScaler{scaler.chunk_key(), scaler.scaler()});
  }
  return reply;
}

absl::StatusOr<PushReply> PushReplyFromWire(
    const tern::v1::PushPullResponse& wire) {
  PushReply reply;
  reply.step = wire.step();
  reply.param_checksum = wire.param_checksum();
  for (const tern::v1::ChunkPayload& chunk : wire.chunks()) {
    absl::StatusOr<kernels::Payload> payload = PayloadFromWire(chunk.payload());
    if (!payload.ok()) {
      return Prefixed(payload.status(),
                      absl::StrCat("answer of chunk ", chunk.chunk_key()));
    }
    reply.chunks.push_back(ChunkPayload{chunk.chunk_key(), *std::move(payload)});
  }
  return reply;
}

}  // namespace tern::server
