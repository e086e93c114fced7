#include "server/lps_state.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/checksum.h"
#include "kernels/codec_options.h"
#include "kernels/codec_registry.h"
#include "kernels/terngrad.h"

namespace tern::server {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "Checksum hashes the float bytes as they lie in memory");

absl::Status CheckOptions(const LpsStateOptions& options) {
  if (options.num_workers == 0) {
    return absl::InvalidArgumentError("an LPS needs at least one worker");
  }
  if (!(options.momentum >= 0.0f && options.momentum < 1.0f)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "momentum is %g, want a value in [0, 1)", options.momentum));
  }
  if (!std::isfinite(options.weight_decay) || options.weight_decay < 0.0f) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "weight_decay is %g, want a finite value >= 0", options.weight_decay));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<kernels::Codec>> MakeWeightCodec(
    const LpsStateOptions& options) {
  kernels::CodecOptions codec;
  codec.id = options.weight_codec;
  switch (options.weight_codec) {
    case kernels::CodecId::kTernGrad:
      codec.clip = options.weight_clip;
      codec.push_layout = options.ternary_layout;
      break;
    case kernels::CodecId::kInt8:
    case kernels::CodecId::kFp32:
      break;
    default:
      return absl::InvalidArgumentError(absl::StrFormat(
          "weight codec %s: the LPS sends weights as terngrad (ternary), "
          "int8 or fp32",
          kernels::CodecName(options.weight_codec)));
  }
  return kernels::MakeCodec(codec);
}

}  // namespace

float OwnTernaryScaler(absl::Span<const float> values, float clip) {
  const kernels::ChunkStats stats = kernels::ComputeStats(values);
  const float scaler = kernels::LocalScaler(stats, clip);
  return scaler > 0.0f ? scaler : stats.max_abs;
}

absl::StatusOr<std::unique_ptr<LpsState>> LpsState::Create(
    const LpsStateOptions& options, LrSchedule lr_schedule,
    std::vector<LpsChunk> chunks) {
  absl::Status status = CheckOptions(options);
  if (!status.ok()) return status;
  absl::StatusOr<std::unique_ptr<kernels::Codec>> codec =
      MakeWeightCodec(options);
  if (!codec.ok()) return codec.status();
  if (chunks.empty()) {
    return absl::InvalidArgumentError(
        "an LPS shard needs at least one chunk (more shards than chunks?)");
  }
  std::unique_ptr<LpsState> state(
      new LpsState(options, lr_schedule, *std::move(codec)));
  std::sort(chunks.begin(), chunks.end(),
            [](const LpsChunk& a, const LpsChunk& b) { return a.key < b.key; });
  for (LpsChunk& chunk : chunks) {
    if (state->index_.contains(chunk.key)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("chunk %d is given twice", chunk.key));
    }
    for (size_t i = 0; i < chunk.weights.size(); ++i) {
      if (!std::isfinite(chunk.weights[i])) {
        return absl::InvalidArgumentError(
            absl::StrFormat("initial weight %d of chunk %d is %g", i, chunk.key,
                            chunk.weights[i]));
      }
    }
    state->index_[chunk.key] = state->chunks_.size();
    state->keys_.push_back(chunk.key);
    state->total_elements_ += chunk.weights.size();
    ChunkState& added = state->chunks_.emplace_back();
    added.key = chunk.key;
    added.momentum.assign(chunk.weights.size(), 0.0f);
    added.weights = std::move(chunk.weights);
    added.next_step.assign(options.num_workers, 0);
  }
  return state;
}

absl::StatusOr<std::unique_ptr<LpsState>> LpsState::CreateForShard(
    const LpsStateOptions& options, LrSchedule lr_schedule,
    const Partition& partition, uint32_t shard,
    absl::Span<const float> flat_weights) {
  if (shard >= partition.num_shards()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "shard %d is out of range: %d shards", shard, partition.num_shards()));
  }
  if (flat_weights.size() != partition.total_elements()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("initial weights have %d values, the model %d",
                        flat_weights.size(), partition.total_elements()));
  }
  std::vector<LpsChunk> chunks;
  for (const uint32_t key : partition.ChunksOfShard(shard)) {
    const Chunk& chunk = partition.chunks()[key];
    const absl::Span<const float> w =
        flat_weights.subspan(chunk.flat_offset, chunk.num_elements);
    chunks.push_back(LpsChunk{key, std::vector<float>(w.begin(), w.end())});
  }
  return Create(options, lr_schedule, std::move(chunks));
}

absl::StatusOr<size_t> LpsState::IndexOf(uint32_t key) const {
  const auto it = index_.find(key);
  if (it == index_.end()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("chunk %d is not on this LPS shard", key));
  }
  return it->second;
}

absl::StatusOr<size_t> LpsState::CheckGradient(
    uint32_t worker, uint64_t step, uint32_t key,
    absl::Span<const float> gradient) const {
  if (worker >= options_.num_workers) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "worker %d is out of range: %d workers", worker, options_.num_workers));
  }
  absl::StatusOr<size_t> index = IndexOf(key);
  if (!index.ok()) return index.status();
  const ChunkState& chunk = chunks_[*index];
  if (gradient.size() != chunk.weights.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("gradient of chunk %d has %d values, want %d", key,
                        gradient.size(), chunk.weights.size()));
  }
  const uint64_t next = chunk.next_step[worker];
  if (step < next) {
    return absl::AlreadyExistsError(
        absl::StrFormat("step %d of worker %d for chunk %d was applied already",
                        step, worker, key));
  }
  if (step > next) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "worker %d sent step %d for chunk %d; its next step there is %d",
        worker, step, key, next));
  }
  if (step > completed_steps_ + options_.max_lead_steps) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "worker %d sent step %d for chunk %d while local step %d is open "
        "(at most %d step(s) ahead)",
        worker, step, key, completed_steps_, options_.max_lead_steps));
  }
  for (size_t i = 0; i < gradient.size(); ++i) {
    if (!std::isfinite(gradient[i])) {
      return absl::InvalidArgumentError(
          absl::StrFormat("gradient of chunk %d from worker %d has %g at "
                          "element %d",
                          key, worker, gradient[i], i));
    }
  }
  return index;
}

absl::StatusOr<ApplyResult> LpsState::ApplyGradient(
    uint32_t worker, uint64_t step, uint32_t key,
    absl::Span<const float> gradient) {
  absl::StatusOr<size_t> index = CheckGradient(worker, step, key, gradient);
  if (!index.ok()) return index.status();
  ChunkState& chunk = chunks_[*index];

  // Momentum correction as in DGC (Lin et al., ICLR 2018), which
  // WeightGrad section 4.3 adopts: the velocity v accumulates the gradient
  // and the update applied is lr * v, never lr * g alone. DGC accumulates
  // the velocity (not the raw gradient) into what waits to be sent; here
  // every gradient is applied at once inside the data center, so nothing
  // waits on the LAN, and the WAN accumulator U = W - W_at_last_round of the
  // synchronizer is the sum of the lr * v steps: the paper's
  // v_{s+1} = v_s + grad_s (Appendix A.2). Clipping (section 4.3) is
  // TernGrad's c * sigma clipping before quantization, done by the worker
  // that ternarized g, so the LPS does not clip again.
  const float lr = static_cast<float>(LearningRate(step));
  const float m = options_.momentum;
  const float decay = options_.weight_decay;
  float* w = chunk.weights.data();
  float* v = chunk.momentum.data();
  const float* g = gradient.data();
  for (size_t i = 0; i < gradient.size(); ++i) {
    const float decayed = g[i] + decay * w[i];
    v[i] = m * v[i] + decayed;
    w[i] = w[i] - lr * v[i];
  }
  ++chunk.applied;
  chunk.next_step[worker] = step + 1;

  ApplyResult result;
  const uint64_t per_step =
      static_cast<uint64_t>(options_.num_workers) * chunks_.size();
  uint64_t& count = step_counts_[step];
  ++count;
  // Steps complete in order: every (worker, chunk) applies step t before
  // t + 1, so step t + 1 cannot be complete while t is not.
  while (!step_counts_.empty() &&
         step_counts_.begin()->first == completed_steps_ &&
         step_counts_.begin()->second == per_step) {
    step_counts_.erase(step_counts_.begin());
    ++completed_steps_;
    result.step_completed = true;
  }
  result.completed_steps = completed_steps_;
  return result;
}

absl::StatusOr<kernels::Payload> LpsState::QuantizedWeights(
    uint32_t key, const RandomStream& stream) const {
  absl::StatusOr<size_t> index = IndexOf(key);
  if (!index.ok()) return index.status();
  const ChunkState* chunk = &chunks_[*index];
  kernels::EncodeContext context;
  context.stream = stream;
  if (options_.weight_codec == kernels::CodecId::kTernGrad) {
    context.scaler = OwnTernaryScaler(chunk->weights, options_.weight_clip);
    // Its own scaler, not a shared one: clip at it (kernels::ClipRule).
    context.clip_bound = context.scaler;
  }
  return weight_codec_->Encode(chunk->weights, context);
}

uint64_t LpsState::Checksum() const {
  tern::Checksum hash;  // the class, not this method
  for (const ChunkState& chunk : chunks_) {
    hash.Update(chunk.weights.data(), chunk.weights.size() * sizeof(float));
  }
  return hash.value();
}

absl::StatusOr<absl::Span<const float>> LpsState::Weights(uint32_t key) const {
  absl::StatusOr<size_t> index = IndexOf(key);
  if (!index.ok()) return index.status();
  const ChunkState* chunk = &chunks_[*index];
  return absl::Span<const float>(chunk->weights);
}

absl::StatusOr<absl::Span<const float>> LpsState::Momentum(uint32_t key) const {
  absl::StatusOr<size_t> index = IndexOf(key);
  if (!index.ok()) return index.status();
  const ChunkState* chunk = &chunks_[*index];
  return absl::Span<const float>(chunk->momentum);
}

absl::StatusOr<uint64_t> LpsState::AppliedCount(uint32_t key) const {
  absl::StatusOr<size_t> index = IndexOf(key);
  if (!index.ok()) return index.status();
  const ChunkState* chunk = &chunks_[*index];
  return chunk->applied;
}

absl::StatusOr<absl::Span<float>> LpsState::MutableWeights(uint32_t key) {
  absl::StatusOr<size_t> index = IndexOf(key);
  if (!index.ok()) return index.status();
  return absl::MakeSpan(chunks_[*index].weights);
}

double LpsState::MomentumNorm() const {
  double sum = 0.0;
  for (const ChunkState& chunk : chunks_) {
    for (const float v : chunk.momentum) sum += double{v} * v;
  }
  return std::sqrt(sum);
}

}  // namespace tern::server
