// LpsState::Snapshot and Restore: the LPS's optimizer state in and out of
// its state file (server/lps_state_file.h), checked on the way in, since
// the file comes from disk.
#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_format.h"
#include "server/lps_state.h"

namespace tern::server {
namespace {

absl::Status CheckChunk(const LpsChunkSnapshot& chunk,
                        const LpsStateOptions& options,
                        uint64_t completed_steps) {
  if (chunk.momentum.size() != chunk.weights.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "chunk %d has %d weights but %d momentum values", chunk.key,
        chunk.weights.size(), chunk.momentum.size()));
  }
  for (size_t i = 0; i < chunk.momentum.size(); ++i) {
    if (!std::isfinite(chunk.momentum[i])) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "momentum %d of chunk %d is %g", i, chunk.key, chunk.momentum[i]));
    }
  }
  if (chunk.next_step.size() != options.num_workers) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "chunk %d has next steps of %d workers, the LPS serves %d", chunk.key,
        chunk.next_step.size(), options.num_workers));
  }
  for (size_t w = 0; w < chunk.next_step.size(); ++w) {
    const uint64_t next = chunk.next_step[w];
    // Every worker has pushed the completed steps, and at most the lead
    // beyond them.
    if (next < completed_steps ||
        next > completed_steps + options.max_lead_steps + 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "worker %d's next step of chunk %d is %d, but %d local steps are "
          "complete",
          w, chunk.key, next, completed_steps));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LpsState>> LpsState::Restore(
    const LpsStateOptions& options, LrSchedule lr_schedule,
    LpsStateSnapshot snapshot) {
  std::vector<LpsChunk> weights;
  for (LpsChunkSnapshot& chunk : snapshot.chunks) {
    if (absl::Status status =
            CheckChunk(chunk, options, snapshot.completed_steps);
        !status.ok()) {
      return status;
    }
    weights.push_back(LpsChunk{chunk.key, std::move(chunk.weights)});
  }
  for (const auto& [step, count] : snapshot.step_counts) {
    if (step < snapshot.completed_steps) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "step %d is counted open, but %d local steps are complete", step,
          snapshot.completed_steps));
    }
  }
  absl::StatusOr<std::unique_ptr<LpsState>> state =
      Create(options, lr_schedule, std::move(weights));
  if (!state.ok()) return state.status();
  // Create sorted the chunks by key; the snapshot's are in key order too,
  // and Create refused duplicates.
  for (LpsChunkSnapshot& chunk : snapshot.chunks) {
    ChunkState& restored = (*state)->chunks_[(*state)->index_.at(chunk.key)];
    restored.momentum = std::move(chunk.momentum);
    restored.applied = chunk.applied;
    restored.next_step = std::move(chunk.next_step);
  }
  (*state)->completed_steps_ = snapshot.completed_steps;
  (*state)->step_counts_ = std::move(snapshot.step_counts);
  return state;
}

LpsStateSnapshot LpsState::Snapshot() const {
  LpsStateSnapshot snapshot;
  for (const ChunkState& chunk : chunks_) {
    snapshot.chunks.push_back(LpsChunkSnapshot{chunk.key, chunk.weights,
                                               chunk.momentum, chunk.applied,
                                               chunk.next_step});
  }
  snapshot.completed_steps = completed_steps_;
  snapshot.step_counts = step_counts_;
  return snapshot;
}

uint64_t LpsState::NextStep(uint32_t worker) const {
  if (worker >= options_.num_workers || chunks_.empty()) return 0;
  uint64_t next = chunks_.front().next_step[worker];
  for (const ChunkState& chunk : chunks_) {
    next = std::min(next, chunk.next_step[worker]);
  }
  return next;
}

}  // namespace tern::server
