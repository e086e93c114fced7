// GradientSynchronizer's rounds: U per chunk, the encoding of the
// significant chunks, and the bookkeeping of a round sent (BuildRound,
// BuildFinalRound).
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/philox.h"
#include "server/gradient_synchronizer.h"

namespace tern::server {

bool GradientSynchronizer::RoundDue() const {
  return state_->completed_steps() >= last_round_step_ + options_.sync_every;
}

std::vector<float> GradientSynchronizer::Update(
    const ChunkSync& chunk, absl::Span<const float> weights) const {
  std::vector<float> update(weights.size());
  for (size_t i = 0; i < weights.size(); ++i) {
    update[i] = weights[i] - chunk.last_weights[i];
  }
  for (const WaitingRound& waiting : waiting_) {
    const auto it = waiting.sent_updates.find(chunk.key);
    if (it == waiting.sent_updates.end()) continue;
    for (size_t i = 0; i < update.size(); ++i) update[i] -= it->second[i];
  }
  return update;
}

absl::Status GradientSynchronizer::CheckRoundDue(uint64_t round) const {
  if (round != next_round_) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "round %d asked for; the next round is %d", round, next_round_));
  }
  if (!RoundDue()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "round %d is not due: %d of %d local steps since the last round", round,
        state_->completed_steps() - last_round_step_, options_.sync_every));
  }
  return absl::OkStatus();
}

absl::StatusOr<kernels::Payload> GradientSynchronizer::EncodeUpdate(
    uint64_t round, uint32_t key, absl::Span<const float> update,
    std::vector<float>* sent) const {
  const bool ternary = options_.mode == SyncMode::kTernary;
  absl::StatusOr<kernels::Payload> payload;
  if (ternary) {
    kernels::EncodeContext context;
    context.stream = RandomStream{options_.seed, static_cast<uint32_t>(round),
                                  key, kSyncStreamWorker};
    context.scaler = OwnTernaryScaler(update, options_.clip);
    // Its own scaler, not a shared one: clip at it (kernels::ClipRule).
    context.clip_bound = context.scaler;
    payload = ternary_->Encode(update, context);
  } else {
    // fp32, and gaia for now: a dense fp32 payload whose insignificant
    // elements are 0. NOTE: the gaia mode is to send (index, value) pairs
    // (LAYOUT_INDEX_VALUE) once kernels/index_packing lands; the decoded
    // U_sent is the same either way, so only the bytes change.
    payload = fp32_->Encode(update, kernels::EncodeContext());
  }
  if (!payload.ok()) return payload.status();
  const kernels::Codec& codec = ternary ? *ternary_ : *fp32_;
  sent->assign(update.size(), 0.0f);
  absl::Status status = codec.Decode(*payload, absl::MakeSpan(*sent));
  if (!status.ok()) return status;
  return payload;
}

void GradientSynchronizer::CommitRound(
    std::vector<std::pair<size_t, std::vector<float>>> held_back,
    WaitingRound waiting) {
  for (auto& [index, residual] : held_back) {
    chunks_[index].held_back = std::move(residual);
  }
  for (ChunkSync& chunk : chunks_) {
    std::fill(chunk.gradient_sum.begin(), chunk.gradient_sum.end(), 0.0f);
    chunk.gradients = 0;
    chunk.path = 0.0;
  }
  waiting.sent = options_.clock();
  waiting_.push_back(std::move(waiting));
  last_round_step_ = state_->completed_steps();
  ++next_round_;
}

absl::StatusOr<SyncRound> GradientSynchronizer::BuildRound(uint64_t round) {
  if (absl::Status due = CheckRoundDue(round); !due.ok()) return due;
  SyncRound request;
  const double threshold = RoundThreshold(&request.rescale);
  request.round = round;
  request.local_step = state_->completed_steps();
  request.g_thresh = threshold;
  WaitingRound waiting;
  waiting.round = round;
  // The ternary mode's new held-back residuals, committed with the round.
  std::vector<std::pair<size_t, std::vector<float>>> held_back;
  for (size_t index = 0; index < chunks_.size(); ++index) {
    const ChunkSync& chunk = chunks_[index];
    const absl::Span<const float> weights = *state_->Weights(chunk.key);
    std::vector<float> update = Update(chunk, weights);
    const ChunkDecision decision = Decide(chunk, weights, threshold, &update);
    request.decisions.push_back(decision);
    if (!decision.sent) continue;

    std::vector<float> sent;
    absl::StatusOr<kernels::Payload> payload =
        EncodeUpdate(round, chunk.key, update, &sent);
    if (!payload.ok()) return payload.status();
    if (options_.mode == SyncMode::kTernary) {
      for (size_t i = 0; i < update.size(); ++i) update[i] -= sent[i];
      held_back.emplace_back(index, std::move(update));
    }
    waiting.sent_updates[chunk.key] = std::move(sent);
    request.updates.push_back(ChunkPayload{chunk.key, *std::move(payload)});
  }
  CommitRound(std::move(held_back), std::move(waiting));
  return request;
}

absl::StatusOr<SyncRound> GradientSynchronizer::BuildFinalRound(
    uint64_t round) {
  if (round != next_round_) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "final round %d asked for; the next round is %d", round, next_round_));
  }
  if (!waiting_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("final round %d: round %d still waits for its answer",
                        round, waiting_.front().round));
  }
  SyncRound request;
  request.round = round;
  request.local_step = state_->completed_steps();
  WaitingRound waiting;
  waiting.round = round;
  for (const ChunkSync& chunk : chunks_) {
    const absl::Span<const float> weights = *state_->Weights(chunk.key);
    std::vector<float> update = Update(chunk, weights);
    absl::StatusOr<kernels::Payload> payload =
        fp32_->Encode(update, kernels::EncodeContext());
    if (!payload.ok()) return payload.status();
    request.decisions.push_back(ChunkDecision{chunk.key, 1.0, true});
    waiting.sent_updates[chunk.key] = std::move(update);
    request.updates.push_back(ChunkPayload{chunk.key, *std::move(payload)});
  }
  for (ChunkSync& chunk : chunks_) {
    std::fill(chunk.gradient_sum.begin(), chunk.gradient_sum.end(), 0.0f);
    chunk.gradients = 0;
    chunk.path = 0.0;
    // Everything travels: nothing is held back any more.
    std::vector<float>().swap(chunk.held_back);
  }
  waiting.sent = options_.clock();
  waiting_.push_back(std::move(waiting));
  last_round_step_ = state_->completed_steps();
  ++next_round_;
  return request;
}

}  // namespace tern::server
