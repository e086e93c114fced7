// A run's identical start copied from worker 0 (RunConfig.broadcast_start):
// worker 0 sends its initial weights of this shard's chunks with its join,
// and every join's answer carries them, with worker 0's checksum of all its
// parameters, so that each worker loads them instead of building its own.
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/payload_validation.h"
#include "server/aggregator.h"

namespace tern::server {
namespace {

// INVALID_ARGUMENT naming the entry unless `weights` are exactly the run's
// chunks on this shard, in key order, each fp32 RAW with values within the
// magnitude rule.
absl::Status CheckStartWeights(const std::vector<ChunkPayload>& weights,
                               const ShardRun& run) {
  if (weights.size() != run.chunks.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker 0 sent the initial weights of ", weights.size(),
                     " chunks; this shard owns ", run.chunks.size()));
  }
  std::vector<float> values;
  for (size_t i = 0; i < weights.size(); ++i) {
    const ShardChunk& chunk = *run.chunks[i];
    const ChunkPayload& sent = weights[i];
    if (sent.chunk_key != chunk.key) {
      return absl::InvalidArgumentError(
          absl::StrCat("initial weights: entry ", i, " is chunk ",
                       sent.chunk_key, ", not chunk ", chunk.key));
    }
    values.resize(chunk.num_elements);
    const absl::Status decoded = core::DecodeFinite(
        *run.fp32_codec, sent.payload, absl::MakeSpan(values));
    if (!decoded.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "initial weights of chunk ", chunk.key, ": ", decoded.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Aggregator::TakeStartWeights(const JoinRequest& request) {
  const bool broadcast = run_->config.broadcast_start;
  if (request.worker_id != 0 || !broadcast) {
    if (request.initial_weights.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", request.worker_id,
        " sent initial weights: only worker 0 sends them, and only when the "
        "run starts from its parameters (--broadcast_start)"));
  }
  if (start_weights_ != nullptr) return absl::OkStatus();  // a retry
  // After step 0 nobody loads them: worker 0 rejoining from its checkpoint
  // (to a restarted shard, say) sends none.
  if (request.initial_weights.empty() && step_ > 0) return absl::OkStatus();
  if (request.initial_weights.empty()) {
    return absl::InvalidArgumentError(
        "worker 0 sent no initial weights, but the run starts from its "
        "parameters (--broadcast_start)");
  }
  if (absl::Status status = CheckStartWeights(request.initial_weights, *run_);
      !status.ok()) {
    return status;
  }
  start_weights_ = std::make_shared<const std::vector<ChunkPayload>>(
      request.initial_weights);
  start_checksum_ = request.param_checksum;
  return absl::OkStatus();
}

JoinReply Aggregator::JoinAnswer(uint32_t worker) const {
  JoinReply reply{options_.shard_index, step_, run_->keys};
  // A step still kept now may be evicted by the open step's completion
  // before the worker asks for it, when the cache is full.
  const auto& kept = pushes_.answers.all();
  reply.oldest_kept_step =
      kept.empty() ? step_
                   : kept.begin()->first +
                         (kept.size() >= pushes_.answers.capacity() ? 1 : 0);
  reply.live_from_step = worker < options_.num_workers
                             ? active_.returns_at(worker).value_or(step_)
                             : step_;
  if (run_->config.broadcast_start) {
    reply.initial_weights = start_weights_;
    reply.param_checksum = start_checksum_;
  }
  return reply;
}

}  // namespace tern::server
