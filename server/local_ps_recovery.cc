// The LPS's recovery (server/WEIGHTGRAD.md, "Recovery"): its state written
// with the rounds it builds, every checkpoint_every local steps; a resumed
// LPS configured from the file, its workers' rejoins, and the rounds it
// sends again.
//
// Why at a round: the state then holds every round the GS may not have
// answered (with the U_sent each answer is applied against), so the
// resumed LPS and the GS agree on every round; the local steps after the
// write are redone by the workers, which rejoin at the steps the file
// holds. Rounds built after the write and already counted by the GS are
// built again and answered from the GS's kept answers: the GS's average
// (with the updates the killed LPS sent) wins over the redone steps'.
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/checksum.h"
#include "kernels/codec.h"
#include "server/local_ps.h"

namespace tern::server {

absl::Status LocalPs::ResumeIfSaved() {
  if (options_.state_path.empty()) return absl::OkStatus();
  writer_ = std::make_unique<LpsStateWriter>(options_.state_path,
                                             options_.state_sync, logger_);
  absl::StatusOr<std::optional<LpsSnapshot>> read =
      ReadLpsState(options_.state_path);
  if (!read.ok()) return read.status();
  if (!read->has_value()) {
    logger_->info("no LPS state at {} yet: a fresh start", options_.state_path);
    return absl::OkStatus();
  }
  absl::MutexLock lock(&mu_);
  if (absl::Status status = Resume(**std::move(read)); !status.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "LPS state '", options_.state_path, "': ", status.message()));
  }
  return absl::OkStatus();
}

absl::Status LocalPs::Resume(LpsSnapshot snapshot) {
  if (snapshot.num_workers != options_.num_workers) {
    return absl::FailedPreconditionError(absl::StrCat(
        "written by an LPS of ", snapshot.num_workers,
        " workers; this one has --num_workers=", options_.num_workers));
  }
  // The run the file holds must be one these flags serve.
  if (absl::Status status = CheckJoin(snapshot.first_join); !status.ok()) {
    return status;
  }
  if (absl::Status status = Configure(snapshot.first_join); !status.ok()) {
    return status;
  }
  absl::StatusOr<std::unique_ptr<LpsState>> state = LpsState::Restore(
      StateOptions(), *RunSchedule(config_), std::move(snapshot.state));
  if (!state.ok()) return state.status();
  absl::StatusOr<std::unique_ptr<GradientSynchronizer>> sync =
      GradientSynchronizer::Restore(SyncOptions(), state->get(),
                                    std::move(snapshot.sync));
  if (!sync.ok()) return sync.status();
  if (snapshot.unanswered.size() != (*sync)->rounds_waiting()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "it holds ", snapshot.unanswered.size(), " unanswered rounds but ",
        (*sync)->rounds_waiting(), " rounds waiting for their answers"));
  }
  state_ = *std::move(state);
  sync_ = *std::move(sync);
  unanswered_.assign(snapshot.unanswered.begin(), snapshot.unanswered.end());
  to_send_ = unanswered_;
  bytes_up_ = snapshot.wan_bytes_up;
  bytes_down_ = snapshot.wan_bytes_down;
  resumed_at_ = state_->completed_steps();
  saved_step_ = state_->completed_steps();
  // A finished run: a worker whose last answer the kill lost rejoins and
  // gets the final weights.
  if (snapshot.finished) final_ = Final::kDone;
  logger_->info(
      "resumed from {}: local step {} of {}{}, round {} next, {} round(s) "
      "to send again, checksum {}; the workers rejoin",
      options_.state_path, *resumed_at_, config_.optimizer.steps,
      snapshot.finished ? " (finished)" : "", sync_->next_round(),
      unanswered_.size(), FormatChecksum(state_->Checksum()));
  return absl::OkStatus();
}

LpsSnapshot LocalPs::Snapshot() const {
  LpsSnapshot snapshot;
  snapshot.first_join.worker_id = first_worker_;
  snapshot.first_join.config = config_;
  snapshot.first_join.tensors = tensors_;
  snapshot.first_join.param_spec_hash = spec_hash_;
  snapshot.first_join.param_checksum = initial_checksum_;
  snapshot.num_workers = options_.num_workers;
  snapshot.state = state_->Snapshot();
  snapshot.sync = sync_->Snapshot();
  snapshot.unanswered.assign(unanswered_.begin(), unanswered_.end());
  snapshot.wan_bytes_up = bytes_up_;
  snapshot.wan_bytes_down = bytes_down_;
  snapshot.finished = final_ == Final::kDone;
  return snapshot;
}

void LocalPs::SaveStateIfDue(bool at_end) {
  if (writer_ == nullptr) return;
  const uint64_t step = state_->completed_steps();
  if (!at_end && step < saved_step_ + options_.checkpoint_every) return;
  // Only the copy happens under the lock; the writer's thread serializes
  // and writes it.
  writer_->Submit(Snapshot(), step);
  saved_step_ = step;
}

absl::StatusOr<JoinReply> LocalPs::RejoinAnswer(uint32_t worker) const {
  JoinReply answer = JoinAnswer();
  answer.next_step = state_->NextStep(worker);
  auto weights = std::make_shared<std::vector<ChunkPayload>>();
  for (const uint32_t key : state_->chunk_keys()) {
    absl::StatusOr<kernels::Payload> payload =
        fp32_codec_->Encode(*state_->Weights(key), kernels::EncodeContext{});
    if (!payload.ok()) return payload.status();
    weights->push_back(ChunkPayload{key, *std::move(payload)});
  }
  answer.initial_weights = std::move(weights);
  answer.param_checksum = state_->Checksum();
  return answer;
}

}  // namespace tern::server
