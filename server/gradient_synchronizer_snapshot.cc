// GradientSynchronizer::Snapshot and Restore: the WAN side's state in and
// out of the LPS's state file (server/lps_state_file.h), checked on the
// way in against the LpsState restored from the same file.
#include <cmath>
#include <utility>

#include "absl/strings/str_format.h"
#include "server/gradient_synchronizer.h"

namespace tern::server {
namespace {

// Empty, or `length` finite values.
absl::Status CheckValues(absl::Span<const float> values, size_t length,
                         bool may_be_empty, uint32_t key,
                         absl::string_view what) {
  if (values.empty() && may_be_empty) return absl::OkStatus();
  if (values.size() != length) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s of chunk %d has %d values, the chunk %d", what, key,
                        values.size(), length));
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s of chunk %d is %g at element %d", what, key, values[i], i));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckChunk(const SyncChunkSnapshot& chunk, const LpsState& state) {
  absl::StatusOr<absl::Span<const float>> weights = state.Weights(chunk.key);
  if (!weights.ok()) return weights.status();
  const size_t n = weights->size();
  absl::Status status =
      CheckValues(chunk.last_weights, n, false, chunk.key, "W_last");
  if (status.ok()) {
    status = CheckValues(chunk.gradient_sum, n, true, chunk.key,
                         "the round's gradient sum");
  }
  if (status.ok()) {
    status = CheckValues(chunk.held_back, n, true, chunk.key, "held-back U");
  }
  if (status.ok() && !(std::isfinite(chunk.path) && chunk.path >= 0)) {
    status = absl::InvalidArgumentError(absl::StrFormat(
        "the round's path of chunk %d is %g", chunk.key, chunk.path));
  }
  return status;
}

absl::Status CheckWaiting(const SynchronizerSnapshot& snapshot,
                          const LpsState& state) {
  uint64_t expect = snapshot.next_round - snapshot.waiting.size();
  for (const WaitingRoundSnapshot& waiting : snapshot.waiting) {
    if (snapshot.waiting.size() > snapshot.next_round ||
        waiting.round != expect++) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "waiting round %d is out of order (next round %d, %d waiting)",
          waiting.round, snapshot.next_round, snapshot.waiting.size()));
    }
    for (const auto& [key, values] : waiting.sent_updates) {
      absl::StatusOr<absl::Span<const float>> weights = state.Weights(key);
      if (!weights.ok()) return weights.status();
      absl::Status status = CheckValues(values, weights->size(), false, key,
                                        "a waiting round's U_sent");
      if (!status.ok()) return status;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<GradientSynchronizer>>
GradientSynchronizer::Restore(SynchronizerOptions options, LpsState* state,
                              SynchronizerSnapshot snapshot) {
  absl::StatusOr<std::unique_ptr<GradientSynchronizer>> sync =
      Create(std::move(options), state);
  if (!sync.ok()) return sync.status();
  if (snapshot.chunks.size() != state->chunk_keys().size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("the synchronizer has %d chunks, the LPS state %d",
                        snapshot.chunks.size(), state->chunk_keys().size()));
  }
  for (size_t i = 0; i < snapshot.chunks.size(); ++i) {
    SyncChunkSnapshot& chunk = snapshot.chunks[i];
    if (chunk.key != state->chunk_keys()[i]) {
      return absl::InvalidArgumentError(
          absl::StrFormat("synchronizer chunk %d is key %d, the LPS state's %d",
                          i, chunk.key, state->chunk_keys()[i]));
    }
    if (absl::Status status = CheckChunk(chunk, *state); !status.ok()) {
      return status;
    }
    ChunkSync& restored = (*sync)->chunks_[i];
    restored.last_weights = std::move(chunk.last_weights);
    restored.gradient_sum = std::move(chunk.gradient_sum);
    restored.gradients = chunk.gradients;
    restored.path = chunk.path;
    restored.held_back = std::move(chunk.held_back);
  }
  if (absl::Status status = CheckWaiting(snapshot, *state); !status.ok()) {
    return status;
  }
  GradientSynchronizer& s = **sync;
  const absl::Time now = s.options_.clock();
  for (WaitingRoundSnapshot& waiting : snapshot.waiting) {
    s.waiting_.push_back(
        WaitingRound{waiting.round, now, std::move(waiting.sent_updates)});
  }
  s.next_round_ = snapshot.next_round;
  s.last_round_step_ = snapshot.last_round_step;
  if (snapshot.g_thresh.has_value()) s.g_thresh_ = snapshot.g_thresh;
  s.threshold_epoch_ = snapshot.threshold_epoch;
  s.threshold_lr_ = snapshot.threshold_lr;
  s.threshold_momentum_norm_ = snapshot.threshold_momentum_norm;
  return sync;
}

SynchronizerSnapshot GradientSynchronizer::Snapshot() const {
  SynchronizerSnapshot snapshot;
  for (const ChunkSync& chunk : chunks_) {
    snapshot.chunks.push_back(
        SyncChunkSnapshot{chunk.key, chunk.last_weights, chunk.gradient_sum,
                          chunk.gradients, chunk.path, chunk.held_back});
  }
  snapshot.next_round = next_round_;
  snapshot.last_round_step = last_round_step_;
  for (const WaitingRound& waiting : waiting_) {
    snapshot.waiting.push_back(
        WaitingRoundSnapshot{waiting.round, waiting.sent_updates});
  }
  snapshot.g_thresh = g_thresh_;
  snapshot.threshold_epoch = threshold_epoch_;
  snapshot.threshold_lr = threshold_lr_;
  snapshot.threshold_momentum_norm = threshold_momentum_norm_;
  return snapshot;
}

}  // namespace tern::server
