#include "server/scaler_barrier.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/payload_validation.h"

namespace tern::server {
namespace {

// RESOURCE_EXHAUSTED: the worker's calls for the step already fill their
// places at the barrier (core::kMaxWaitsPerMember).
absl::Status TooManyWaits(const ScalerRequest& request) {
  return core::TooManyWaitsError(absl::StrCat("worker ", request.worker_id),
                                 absl::StrCat("step ", request.step));
}

}  // namespace

ScalerBarrier::ScalerBarrier(uint32_t num_workers,
                             const core::StepNames* names)
    : names_(names), sent_(num_workers), dropped_(num_workers, false) {}

void ScalerBarrier::Configure(const ShardRun* run) {
  run_ = run;
  max_scalers_.assign(run->scaler_chunks.size(), 0.0f);
}

absl::Status ScalerBarrier::CheckRequest(const ScalerRequest& request) const {
  const uint32_t worker = request.worker_id;
  auto invalid = [&](auto&&... parts) {
    return absl::InvalidArgumentError(
        absl::StrCat("step ", request.step, ": ", parts...));
  };
  std::vector<bool> seen(run_->scaler_chunks.size(), false);
  for (const ChunkScaler& entry : request.scalers) {
    const ShardChunk* chunk = run_->Find(entry.chunk_key);
    if (chunk == nullptr) {
      return invalid("chunk ", entry.chunk_key, " in the scalers of worker ",
                     worker, " is not a chunk of ", names_->server);
    }
    if (!chunk->shares_scaler) {
      return invalid("chunk ", entry.chunk_key, " in the scalers of worker ",
                     worker, " travels as ", chunk->codec->name(),
                     " and shares no scaler");
    }
    if (seen[chunk->scaler_slot]) {
      return invalid("chunk ", entry.chunk_key,
                     " appears twice in the scalers of worker ", worker);
    }
    seen[chunk->scaler_slot] = true;
    if (!std::isfinite(entry.scaler)) {
      return invalid("chunk ", entry.chunk_key, ": scaler ", entry.scaler,
                     " of worker ", worker,
                     " is not finite (NaN/Inf gradients are refused; see "
                     "server/README.md)");
    }
    if (entry.scaler < 0) {
      return invalid("chunk ", entry.chunk_key, ": scaler ", entry.scaler,
                     " of worker ", worker, " is negative");
    }
    // The magnitude rule: s_k of 3e38 would make every worker's push of
    // the step, which must carry s_k, one that ValidatePayload refuses.
    if (absl::Status status = core::CheckMagnitude(
            absl::StrCat("scaler of worker ", worker), entry.scaler);
        !status.ok()) {
      return invalid("chunk ", entry.chunk_key, ": ", status.message());
    }
  }
  for (size_t slot = 0; slot < seen.size(); ++slot) {
    if (!seen[slot]) {
      return invalid("worker ", worker, " sent no scaler for chunk ",
                     run_->scaler_chunks[slot]->key);
    }
  }
  return absl::OkStatus();
}

absl::Status ScalerBarrier::Share(const ScalerRequest& request, uint64_t open,
                                  absl::Time deadline,
                                  core::Callback<ScalerAnswer>& done,
                                  core::Deferred* deferred) {
  const uint32_t worker = request.worker_id;
  using Kind = core::Admission<ScalerAnswer>::Kind;
  const core::Admission<ScalerAnswer> admission =
      core::Admit(*names_, request.step, open, answers_, sent_, worker,
                  "share", absl::StrCat("worker ", worker));
  switch (admission.kind) {
    case Kind::kRefused:
      return admission.error;
    case Kind::kCached:  // a retry of the step just completed
      deferred->Answer<ScalerAnswer>(std::move(done), *admission.cached);
      return absl::OkStatus();
    case Kind::kDuplicate:  // counted once (the first values stay)
      if (shared_ != nullptr) {
        deferred->Answer<ScalerAnswer>(std::move(done), shared_);
      } else if (!waiters_.Add(worker, deadline, done)) {
        return TooManyWaits(request);
      }
      return absl::OkStatus();
    case Kind::kAdmit:
      break;
  }
  if (absl::Status status = CheckRequest(request); !status.ok()) return status;
  // Before anything is counted, so that a refusal counts nothing (a
  // worker's first share of a step finds none of its calls waiting).
  if (!waiters_.Add(worker, deadline, done)) return TooManyWaits(request);
  for (const ChunkScaler& entry : request.scalers) {
    float& shared = max_scalers_[run_->Find(entry.chunk_key)->scaler_slot];
    shared = std::max(shared, entry.scaler);
  }
  sent_.Arrive(worker);
  if (sent_.complete()) AnswerShared(open, deferred);
  return absl::OkStatus();
}

void ScalerBarrier::AnswerShared(uint64_t open, core::Deferred* deferred) {
  // s_k = max_i s_ik (DESIGN section 3, step 3).
  auto reply = std::make_shared<ScalerReply>();
  reply->step = open;
  reply->scalers.reserve(run_->scaler_chunks.size());
  for (const ShardChunk* chunk : run_->scaler_chunks) {
    reply->scalers.push_back(
        ChunkScaler{chunk->key, max_scalers_[chunk->scaler_slot]});
  }
  shared_ = std::move(reply);
  waiters_.AnswerAll(shared_, deferred);
}

void ScalerBarrier::Drop(uint32_t worker, uint64_t open,
                         core::Deferred* deferred) {
  dropped_[worker] = true;
  sent_.Arrive(worker);
  if (deferred != nullptr && run_ != nullptr && shared_ == nullptr &&
      sent_.complete()) {
    AnswerShared(open, deferred);
  }
}

void ScalerBarrier::CompleteStep(uint64_t open, core::Deferred* deferred) {
  if (!waiters_.empty()) {
    waiters_.AnswerAll(
        absl::FailedPreconditionError(absl::StrCat(
            "step ", open, " completed before ", sent_.Missing(),
            " shared scalers")),
        deferred);
  }
  // A step whose scalers were never shared (a shard without TernGrad
  // chunks) leaves nothing to retry.
  if (shared_ != nullptr) answers_.Put(open, std::move(shared_));
  shared_ = nullptr;
  sent_.Reset();
  for (uint32_t worker = 0; worker < sent_.size(); ++worker) {
    if (dropped_[worker]) sent_.Arrive(worker);
  }
  std::fill(max_scalers_.begin(), max_scalers_.end(), 0.0f);
}

void ScalerBarrier::Restore(ScalerAnswer last, ScalerAnswer shared,
                            uint64_t open) {
  answers_.Clear();
  if (last != nullptr && open > 0) answers_.Put(open - 1, std::move(last));
  shared_ = std::move(shared);
  if (shared_ == nullptr) return;
  for (uint32_t worker = 0; worker < sent_.size(); ++worker) {
    sent_.Arrive(worker);
  }
}

size_t ScalerBarrier::Expire(absl::Time now, uint64_t open,
                             absl::string_view within,
                             core::Deferred* deferred) {
  return waiters_.Expire(
      now,
      [&] {
        return absl::DeadlineExceededError(
            absl::StrCat("step ", open, ": ", sent_.Missing(),
                         " did not share scalers", within));
      },
      deferred);
}

void ScalerBarrier::AnswerAll(const absl::Status& status,
                              core::Deferred* deferred) {
  waiters_.AnswerAll(status, deferred);
}

}  // namespace tern::server
