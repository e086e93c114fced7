#include "worker/terngrad_protocol.h"

#include <limits>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/philox.h"
#include "common/status_macros.h"
#include "core/wire.h"
#include "worker/codec_config.h"
#include "worker/local_scalers.h"
#include "worker/scaler_sharing.h"

namespace tern::worker {

using tern::v1::PushPullRequest;
using tern::v1::PushPullResponse;

absl::StatusOr<std::unique_ptr<TernGradProtocol>> TernGradProtocol::Create(
    const WorkerOptions& options, ParamBuffer& params, const ChunkPlan& plan,
    CodecSet& codecs, torch::optim::Optimizer& optimizer,
    std::unique_ptr<DeviceEncoder> device_encoder) {
  if (options.overlap) {
    if (device_encoder != nullptr || !params.device().is_cpu()) {
      return absl::InvalidArgumentError(
          "--overlap runs on the CPU only: leave it out with --device=cuda");
    }
    if (codecs.feedback() != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--overlap does not work with --codec=", codecs.run().name(),
          ": its error feedback (and dropping's global threshold) takes "
          "every chunk at once"));
    }
  }
  std::unique_ptr<TernGradProtocol> protocol(new TernGradProtocol(
      options, params, plan, codecs, optimizer, std::move(device_encoder)));
  if (options.overlap) {
    const uint32_t num_shards = plan.partition.num_shards();
    protocol->readiness_ = std::make_unique<ShardReadiness>(
        plan.partition, static_cast<uint32_t>(params.names().size()));
    protocol->flights_ = std::vector<ShardFlight>(num_shards);
    protocol->scalers_.assign(plan.partition.chunks().size(), 0.0f);
    protocol->local_scalers_ = protocol->scalers_;
    TernGradProtocol* self = protocol.get();
    params.AddGradientHooks(
        [self](uint32_t tensor, const torch::Tensor& gradient) {
          self->OnGradient(tensor, gradient);
        });
  }
  return protocol;
}

TernGradProtocol::TernGradProtocol(
    const WorkerOptions& options, ParamBuffer& params, const ChunkPlan& plan,
    CodecSet& codecs, torch::optim::Optimizer& optimizer,
    std::unique_ptr<DeviceEncoder> device_encoder)
    : options_(options),
      params_(params),
      plan_(plan),
      codecs_(codecs),
      optimizer_(optimizer),
      device_encoder_(std::move(device_encoder)),
      share_scalers_(codecs.options().id == kernels::CodecId::kTernGrad) {}

absl::Status TernGradProtocol::Step(PsClient& client, uint64_t step,
                                    StepRecord* rec) {
  if (readiness_ != nullptr) return FinishOverlapped(step, rec);
  absl::Time phase = absl::Now();
  const float* device_gradients = GatherGradients();
  rec->compute_s += SecondsSince(phase);

  phase = absl::Now();
  TERN_ASSIGN_OR_RETURN(std::vector<float> scalers,
                        Scalers(step, device_gradients));
  rec->encode_s += SecondsSince(phase);
  // s_ik, which clips this worker's gradient (ClipRule::kWorker) once
  // `scalers` hold the shared s_k.
  const std::vector<float> local_scalers = scalers;

  if (share_scalers_) {
    phase = absl::Now();
    TERN_RETURN_IF_ERROR(
        ShareScalers(client, plan_, options_.worker_id, step, &scalers, rec));
    rec->network_s += SecondsSince(phase);
  }

  phase = absl::Now();
  TERN_ASSIGN_OR_RETURN(
      Pushes pushes,
      EncodePushes(step, device_gradients, scalers, local_scalers, rec));
  rec->encode_s += SecondsSince(phase);

  TERN_ASSIGN_OR_RETURN(std::vector<PushPullResponse> pulls,
                        Exchange(client, step, std::move(pushes), rec));
  return Apply(client, step, std::move(pulls), rec);
}

absl::Status TernGradProtocol::CatchUp(PsClient& client, uint64_t step,
                                       StepRecord* rec) {
  // The shards answer a push of a step they kept without looking at its
  // chunks, and do not count this worker before its live_from_step.
  Pushes pushes(plan_.partition.num_shards());
  for (uint32_t shard = 0; shard < pushes.size(); ++shard) {
    pushes[shard].shard = shard;
    pushes[shard].request.set_worker_id(options_.worker_id);
    pushes[shard].request.set_step(step);
  }
  TERN_ASSIGN_OR_RETURN(std::vector<PushPullResponse> pulls,
                        Exchange(client, step, std::move(pushes), rec));
  return Apply(client, step, std::move(pulls), rec);
}

absl::StatusOr<std::vector<PushPullResponse>> TernGradProtocol::Exchange(
    PsClient& client, uint64_t step, Pushes pushes, StepRecord* rec) {
  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<PushPullResponse>> pulls =
      client.PushPull(std::move(pushes));
  if (!pulls.ok()) return AtStep(step, pulls.status());
  rec->network_s += SecondsSince(start);
  return pulls;
}

absl::Status TernGradProtocol::Apply(const PsClient& client, uint64_t step,
                                     std::vector<PushPullResponse> pulls,
                                     StepRecord* rec) {
  const absl::Time start = absl::Now();
  TERN_RETURN_IF_ERROR(DecodePulls(client, step, std::move(pulls), rec));
  StepOptimizer(rec->lr);
  rec->decode_s = SecondsSince(start);
  return absl::OkStatus();
}

void TernGradProtocol::StepOptimizer(double lr) {
  // Every replica runs the same update on the same bytes.
  params_.ScatterGradients();
  for (auto& group : optimizer_.param_groups()) {
    group.options().set_lr(lr);
  }
  optimizer_.step();
}

const float* TernGradProtocol::GatherGradients() {
  if (device_encoder_ == nullptr) {
    params_.GatherGradients();
    return nullptr;
  }
  // On a GPU the gradients stay there; only fp32 chunks (encoded raw, on
  // the host) are copied over.
  const float* device_gradients = params_.GatherDeviceGradients();
  for (const Chunk& chunk : plan_.partition.chunks()) {
    if (plan_.fp32_chunk[chunk.key]) params_.CopyChunkToHost(chunk);
  }
  return device_gradients;
}

absl::StatusOr<std::vector<float>> TernGradProtocol::Scalers(
    uint64_t step, const float* device_gradients) {
  const std::vector<Chunk>& chunks = plan_.partition.chunks();
  const float clip = static_cast<float>(options_.clip);
  if (device_encoder_ == nullptr) {
    return LocalScalers(step, chunks, params_.gradients(), params_.names(),
                        clip);
  }
  absl::StatusOr<std::vector<kernels::ChunkStats>> stats =
      device_encoder_->Stats(device_gradients, params_.total_elements(),
                             chunks);
  if (!stats.ok()) return AtStep(step, stats.status());
  return LocalScalers(step, chunks, params_.gradients(), params_.names(), clip,
                      &*stats);
}

absl::StatusOr<TernGradProtocol::Pushes> TernGradProtocol::EncodePushes(
    uint64_t step, const float* device_gradients,
    const std::vector<float>& scalers, const std::vector<float>& local_scalers,
    StepRecord* rec) {
  const std::vector<Chunk>& chunks = plan_.partition.chunks();
  float threshold = 0.0f;
  if (codecs_.feedback() != nullptr) {
    // The stream's chunk is one no chunk has (kGlobalThresholdChunk).
    const RandomStream stream{options_.seed, static_cast<uint32_t>(step),
                              kGlobalThresholdChunk, options_.worker_id};
    absl::StatusOr<float> compensated = codecs_.Compensate(
        chunks, params_.gradients(), params_.names(), stream);
    if (!compensated.ok()) return AtStep(step, compensated.status());
    threshold = *compensated;
  }
  std::vector<std::optional<kernels::Payload>> device_payloads;
  if (device_encoder_ != nullptr) {
    TERN_ASSIGN_OR_RETURN(
        device_payloads,
        EncodeOnDevice(step, device_gradients, scalers, local_scalers));
  }
  Pushes pushes(plan_.partition.num_shards());
  for (uint32_t shard = 0; shard < pushes.size(); ++shard) {
    pushes[shard].shard = shard;
    TERN_ASSIGN_OR_RETURN(pushes[shard].request,
                          EncodeShardPush(step, shard, scalers, local_scalers,
                                          threshold, &device_payloads, rec));
  }
  return pushes;
}

absl::StatusOr<PushPullRequest> TernGradProtocol::EncodeShardPush(
    uint64_t step, uint32_t shard, const std::vector<float>& scalers,
    const std::vector<float>& local_scalers, float threshold,
    std::vector<std::optional<kernels::Payload>>* device_payloads,
    StepRecord* rec) const {
  const std::vector<Chunk>& chunks = plan_.partition.chunks();
  PushPullRequest push;
  push.set_worker_id(options_.worker_id);
  push.set_step(step);
  for (const uint32_t key : plan_.shard_chunks[shard]) {
    const Chunk& chunk = chunks[key];
    const bool fp32 = plan_.fp32_chunk[key];
    kernels::EncodeContext context;
    // Draws are a pure function of (seed, step, chunk, worker, element):
    // DESIGN section 2. The step wraps at 2^32 in the counter.
    context.stream = RandomStream{options_.seed, static_cast<uint32_t>(step),
                                  key, options_.worker_id};
    context.scaler = fp32 ? 0.0f : scalers[key];
    context.clip_bound = local_scalers[key];
    context.threshold = fp32 ? 0.0f : threshold;
    context.group_size = codecs_.group_size(key);
    absl::StatusOr<kernels::Payload> payload =
        !fp32 && device_encoder_ != nullptr
            ? *std::move((*device_payloads)[key])
            : codecs_.Encode(key, params_.ChunkGradients(chunk), context);
    if (!payload.ok()) {
      return AtStep(
          step, absl::Status(payload.status().code(),
                             absl::StrCat("encoding chunk ", key, " of '",
                                          params_.names()[chunk.tensor],
                                          "': ", payload.status().message())));
    }
    tern::v1::ChunkPayload* wire = push.add_chunks();
    wire->set_chunk_key(key);
    core::PayloadToWire(*std::move(payload), wire->mutable_payload());
    rec->push_bytes += core::PayloadBytes(wire->payload());
  }
  rec->push_msg_bytes += push.ByteSizeLong();
  return push;
}

absl::StatusOr<std::vector<std::optional<kernels::Payload>>>
TernGradProtocol::EncodeOnDevice(uint64_t step, const float* gradients,
                                 const std::vector<float>& scalers,
                                 const std::vector<float>& local_scalers) {
  // ClipRule::kShared clips at the shared scaler: no bound of the worker's.
  const bool worker_clip =
      codecs_.options().clip_rule == kernels::ClipRule::kWorker;
  std::vector<Chunk> compressed;
  std::vector<float> chunk_scalers;
  std::vector<float> clip_bounds;
  for (const Chunk& chunk : plan_.partition.chunks()) {
    if (plan_.fp32_chunk[chunk.key]) continue;
    compressed.push_back(chunk);
    chunk_scalers.push_back(scalers[chunk.key]);
    clip_bounds.push_back(worker_clip ? local_scalers[chunk.key]
                                      : std::numeric_limits<float>::infinity());
  }
  // The stream's chunk is each chunk's key (DESIGN section 2), set by the
  // kernels per chunk.
  const RandomStream stream{options_.seed, static_cast<uint32_t>(step), 0,
                            options_.worker_id};
  absl::StatusOr<std::vector<kernels::Payload>> payloads =
      device_encoder_->EncodeTernGrad(
          gradients, params_.total_elements(), compressed, chunk_scalers,
          clip_bounds, stream, LayoutsOf(codecs_.options()).push);
  if (!payloads.ok()) return AtStep(step, payloads.status());
  std::vector<std::optional<kernels::Payload>> by_key(
      plan_.partition.chunks().size());
  for (size_t i = 0; i < compressed.size(); ++i) {
    by_key[compressed[i].key] = std::move((*payloads)[i]);
  }
  return by_key;
}

absl::Status TernGradProtocol::DecodePulls(const PsClient& client,
                                           uint64_t step,
                                           std::vector<PushPullResponse> pulls,
                                           StepRecord* rec) {
  for (uint32_t shard = 0; shard < pulls.size(); ++shard) {
    TERN_RETURN_IF_ERROR(
        DecodeShardPull(client, step, shard, std::move(pulls[shard]), rec));
  }
  return absl::OkStatus();
}

absl::Status TernGradProtocol::DecodeShardPull(const PsClient& client,
                                               uint64_t step, uint32_t shard,
                                               PushPullResponse pull,
                                               StepRecord* rec) {
  const std::vector<Chunk>& chunks = plan_.partition.chunks();
  rec->pull_msg_bytes += pull.ByteSizeLong();
  const auto shard_error = [&](const std::string& what) {
    return absl::InternalError(absl::StrCat("step ", step, ": shard ", shard,
                                            " (", client.name(shard),
                                            "): PushPull answer: ", what));
  };
  if (pull.step() != step) {
    return shard_error(absl::StrCat("it is for step ", pull.step()));
  }
  const std::vector<uint32_t>& owned = plan_.shard_chunks[shard];
  if (static_cast<size_t>(pull.chunks_size()) != owned.size()) {
    return shard_error(
        absl::StrCat(pull.chunks_size(), " chunks, expected ", owned.size()));
  }
  absl::flat_hash_set<uint32_t> seen;
  for (tern::v1::ChunkPayload& wire : *pull.mutable_chunks()) {
    const uint32_t key = wire.chunk_key();
    if (key >= chunks.size() || chunks[key].shard != shard ||
        !seen.insert(key).second) {
      return shard_error(
          absl::StrCat("chunk ", key, " is not this shard's or repeated"));
    }
    rec->pull_bytes += core::PayloadBytes(wire.payload());
    // Read once: the bytes move out of the answer instead of a copy.
    absl::StatusOr<kernels::Payload> payload =
        core::PayloadFromWire(std::move(*wire.mutable_payload()));
    absl::Status decoded = payload.status();
    if (decoded.ok()) {
      decoded = codecs_.For(key).Decode(*payload,
                                        params_.ChunkGradients(chunks[key]));
    }
    if (!decoded.ok()) {
      return absl::Status(
          decoded.code(),
          absl::StrCat("step ", step, ": shard ", shard, " (",
                       client.name(shard), "): chunk ", key, " of '",
                       params_.names()[chunks[key].tensor],
                       "': ", decoded.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace tern::worker
