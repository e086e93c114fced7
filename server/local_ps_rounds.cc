// The round queue for the synchronizer client thread (server/gs_link.h):
// rounds built as local steps complete, the final round after the last
// step, the registration the client sends first, and the GS's answers.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/checksum.h"
#include "server/local_ps.h"

namespace tern::server {
namespace {

uint64_t PayloadBytes(const kernels::Payload& payload) {
  return payload.data.size() + payload.scalers.size() * sizeof(float);
}

uint64_t PayloadBytes(const std::vector<ChunkPayload>& chunks) {
  uint64_t bytes = 0;
  for (const ChunkPayload& chunk : chunks) bytes += PayloadBytes(chunk.payload);
  return bytes;
}

// "significance min 0.12 median 0.41 max 0.93": the spread the round's
// chunks were filtered on, so that a log shows how far the threshold sits
// from them (empty for a final round or a model of no chunks).
std::string SignificanceSpread(const SyncRound& round, bool final) {
  if (final || round.decisions.empty()) return "";
  std::vector<double> values;
  for (const ChunkDecision& d : round.decisions) {
    values.push_back(d.significance);
  }
  std::sort(values.begin(), values.end());
  return absl::StrFormat(", significance min %.3g median %.3g max %.3g",
                         values.front(), values[values.size() / 2],
                         values.back());
}

}  // namespace

absl::Status LocalPs::OnStepCompleted() {
  const uint64_t completed = state_->completed_steps();
  const uint64_t steps = config_.optimizer.steps;
  if (completed >= steps) {
    if (final_ != Final::kTraining) return absl::OkStatus();
    if (!options_.global) {
      final_ = Final::kDone;
      logger_->info("step {} of {}: done (no global server), checksum {}",
                    completed, steps, FormatChecksum(state_->Checksum()));
      SaveStateIfDue(/*at_end=*/true);
    } else {
      final_ = Final::kDue;
      logger_->info("step {} of {}: final synchronization due", completed,
                    steps);
    }
    return absl::OkStatus();
  }
  if (!options_.global) {
    // No rounds: the state is written between steps.
    SaveStateIfDue();
    return absl::OkStatus();
  }
  if (!sync_->RoundDue()) return absl::OkStatus();
  absl::StatusOr<SyncRound> round = sync_->BuildRound(sync_->next_round());
  if (!round.ok()) {
    return absl::InternalError(
        absl::StrCat("building a round: ", round.status().message()));
  }
  if (const std::optional<ThresholdRescale>& r = round->rescale; r) {
    logger_->info(
        "epoch {} begins by step {}: g_thresh {:.4g} -> {:.4g} (lr ratio "
        "{:.4g}, momentum norm ratio {:.4g})",
        r->epoch, round->local_step, r->old_threshold, r->new_threshold,
        r->lr_ratio, r->momentum_ratio);
    rescales_.push_back(*r);
  }
  if (options_.metrics != nullptr) options_.metrics->RoundBuilt(*round);
  unanswered_.push_back(*round);
  to_send_.push_back(*std::move(round));
  SaveStateIfDue();
  return absl::OkStatus();
}

absl::StatusOr<std::optional<GsRegistration>> LocalPs::WaitForRegistration(
    absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return state_ != nullptr || !closed_.ok() || !failed_.ok();
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (!closed_.ok()) return closed_;
  if (!failed_.ok()) return failed_;
  if (state_ == nullptr) return std::nullopt;
  GsRegistration registration;
  registration.param_spec_hash = spec_hash_;
  registration.param_checksum = initial_checksum_;
  registration.chunk_elements = chunk_elements_;
  if (options_.mode == RunMode::kGaia) {
    registration.update_codec = kernels::CodecId::kFp32;
    registration.update_layout = kernels::Layout::kRaw;
  }
  return registration;
}

absl::Status LocalPs::CheckFirstRound(uint64_t next_round) const {
  absl::MutexLock lock(&mu_);
  if (resumed_at_.has_value()) {
    const uint64_t oldest =
        unanswered_.empty() ? sync_->next_round() : unanswered_.front().round;
    if (next_round < oldest) {
      return absl::FailedPreconditionError(absl::StrCat(
          options_.global_name, " expects round ", next_round,
          " from this data center, but this LPS resumed with its answer to "
          "round ",
          oldest - 1,
          " applied: the global server's state is older "
          "than the LPS's (was it restarted without its --state_dir?)"));
    }
    return absl::OkStatus();
  }
  if (next_round != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        options_.global_name, " expects round ", next_round,
        " from this data center, but this LPS starts fresh at round 0 and has "
        "no checkpoint to resume from; restart the global server or use "
        "another run"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<SyncRound>> LocalPs::NextRound(
    absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !to_send_.empty() || final_ == Final::kDone ||
           (final_ == Final::kDue && sync_->rounds_waiting() == 0) ||
           !closed_.ok() || !failed_.ok();
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (!closed_.ok()) return closed_;
  if (!failed_.ok()) return failed_;
  if (!to_send_.empty()) {
    SyncRound round = std::move(to_send_.front());
    to_send_.pop_front();
    return std::optional<SyncRound>(std::move(round));
  }
  if (final_ == Final::kDue && sync_->rounds_waiting() == 0) {
    absl::StatusOr<SyncRound> round =
        sync_->BuildFinalRound(sync_->next_round());
    if (!round.ok()) return round.status();
    if (options_.metrics != nullptr) options_.metrics->RoundBuilt(*round);
    final_ = Final::kSent;
    final_round_ = round->round;
    return std::optional<SyncRound>(*std::move(round));
  }
  if (final_ == Final::kDone) {
    return absl::CancelledError("the final synchronization is done");
  }
  return std::optional<SyncRound>();
}

absl::Status LocalPs::ApplyRoundAnswer(const SyncRound& sent,
                                       const GsAnswer& answer,
                                       absl::Duration took) {
  Deferred deferred;
  absl::MutexLock lock(&mu_);
  if (answer.round != sent.round) {
    return absl::InternalError(absl::StrCat(options_.global_name,
                                            " answered round ", answer.round,
                                            " to round ", sent.round));
  }
  if (absl::Status status = sync_->ApplyAnswer(sent.round, answer.average);
      !status.ok()) {
    return status;
  }
  if (!unanswered_.empty() && unanswered_.front().round == sent.round) {
    unanswered_.pop_front();
  }
  const uint64_t up = PayloadBytes(sent.updates);
  const uint64_t down = PayloadBytes(answer.average);
  bytes_up_ += up;
  bytes_down_ += down;
  const bool final = final_ == Final::kSent && sent.round == final_round_;
  logger_->info(
      "round {}{} at step {}: sent {} of {} chunks, {} B up, {} B down, "
      "g_thresh {:.4g}{}, lagging [{}], {} round(s) queued, {:.3f}s, "
      "checksum {}",
      sent.round, final ? " (final, fp32)" : "", sent.local_step,
      sent.updates.size(), sent.decisions.size(), up, down, sent.g_thresh,
      SignificanceSpread(sent, final), absl::StrJoin(answer.lagging, ","),
      to_send_.size(), absl::ToDoubleSeconds(took),
      FormatChecksum(state_->Checksum()));
  if (final) {
    final_ = Final::kDone;
    logger_->info(
        "final synchronization done after {} rounds: {} B up, {} B down in "
        "all; final checksum {}",
        sent.round + 1, bytes_up_, bytes_down_,
        FormatChecksum(state_->Checksum()));
    SaveStateIfDue(/*at_end=*/true);
  }
  Release(options_.clock(), &deferred);
  return absl::OkStatus();
}

}  // namespace tern::server
