// The shard's side of --on_worker_loss (server/worker_loss.h): finding the
// workers the open step's barrier has waited worker_loss_timeout for,
// stopping the run or going on without them, and letting a dropped worker
// in again when it comes back.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "server/aggregator.h"

namespace tern::server {

void Aggregator::HandleWorkerLoss(absl::Time now, core::Deferred* deferred) {
  if (run_ == nullptr || !all_joined_ || !failed_.ok() || !closed_.ok()) {
    return;
  }
  // The open barrier: scaler sharing until the step's scalers are shared
  // (on a shard with TernGrad chunks), then the pushes.
  const bool sharing =
      !run_->scaler_chunks.empty() && scalers_.shared() == nullptr;
  const core::StragglerWatch& watch = sharing ? share_watch_ : push_watch_;
  if (watch.Waited(now) < options_.worker_loss_timeout) return;
  std::vector<uint32_t> lost;
  std::vector<bool> present(options_.num_workers, true);
  for (uint32_t worker = 0; worker < options_.num_workers; ++worker) {
    if (!active_.active(worker)) continue;
    const core::ArrivalSet::State state =
        sharing ? scalers_.state(worker) : pushes_.pushed.state(worker);
    // A push still being added is not lost; the next sweep looks again.
    if (state == core::ArrivalSet::State::kInFlight) return;
    if (state == core::ArrivalSet::State::kAbsent) {
      lost.push_back(worker);
      present[worker] = false;
    }
  }
  if (lost.empty()) return;
  const std::string what =
      absl::StrCat("step ", step_, ": ", core::NameMissing(present),
                   " lost: no ", sharing ? "scalers" : "push", " within ",
                   absl::FormatDuration(options_.worker_loss_timeout),
                   " of the first worker's (--worker_loss_timeout_s)");
  if (options_.on_worker_loss == WorkerLossPolicy::kStop ||
      lost.size() >= active_.count()) {
    FailRun(absl::FailedPreconditionError(absl::StrCat(
                what, "; the run stops (--on_worker_loss=",
                WorkerLossPolicyName(options_.on_worker_loss), ")")),
            deferred);
    return;
  }
  logger_->warn("{}; going on with {} of {} workers (--on_worker_loss=shrink)",
                what, active_.count() - lost.size(), options_.num_workers);
  DropWorkers(lost, sharing, deferred);
}

void Aggregator::DropWorkers(const std::vector<uint32_t>& lost, bool sharing,
                             core::Deferred* deferred) {
  std::vector<bool> present(options_.num_workers, true);
  for (const uint32_t worker : lost) {
    present[worker] = false;
    active_.Drop(worker, step_);
    const uint64_t step = step_;
    SaveState([&](ShardStateWriter& state) {
      return state.WorkerDropped(worker, step);
    });
  }
  // The step's sums were sized for the workers before: open them afresh
  // over the remaining ones. Residuals are untouched: only Finish changes
  // them.
  for (const auto& chunk : run_->chunks) {
    absl::MutexLock chunk_lock(&chunk->mu);
    chunk->Open(run_->config.seed, step_, active_.count());
  }
  if (!sharing) {
    // Pushes already added are gone with the old sums (an added push
    // cannot be taken out of a codec's sum): their workers push again.
    pushes_.pushed.Reset();
    push_watch_.Reset();
    pushes_.waiters.AnswerAll(
        absl::AbortedError(absl::StrCat(
            "step ", step_, ": ", core::NameMissing(present),
            " dropped (--on_worker_loss=shrink); push step ", step_, " again")),
        deferred);
  }
  active_.MarkDropped(&pushes_.pushed);
  // Later steps' sharing counts them as sent; a sharing that waited only
  // for them completes now.
  for (const uint32_t worker : lost) scalers_.Drop(worker, step_, deferred);
  if (scalers_.shared() != nullptr && scalers_saved_for_ != step_) {
    scalers_saved_for_ = step_;
    const ScalerReply& shared = *scalers_.shared();
    SaveState(
        [&](ShardStateWriter& state) { return state.ScalersShared(shared); });
  }
}

void Aggregator::TakeBack(uint32_t worker) {
  // The open step may have pushes already: a sum cannot take one more
  // summand, so the worker counts from the next step on.
  if (active_.returns_at(worker).has_value()) return;
  active_.Return(worker, step_ + 1);
  logger_->info(
      "worker {} (dropped at step {}) joined again: it catches up on the "
      "kept answers and is let in at step {}",
      worker, *active_.dropped_at(worker), step_ + 1);
}

void Aggregator::ReadmitReturning() {
  for (const uint32_t worker : active_.Readmit(step_ + 1)) {
    scalers_.Readmit(worker);
    SaveState([&](ShardStateWriter& state) {
      state.WorkerReadmitted(worker);
      return absl::OkStatus();  // written with the completed step
    });
    logger_->info("step {}: worker {} is back; going on with {} of {} workers",
                  step_ + 1, worker, active_.count(), options_.num_workers);
  }
}

}  // namespace tern::server
