// TernGrad's scaler sharing on one shard (DESIGN section 3, step 3; Wen et
// al. 2017, Algorithm 1): each worker sends its local scalers s_ik of the
// shard's TernGrad chunks for the open step; once all N have, every caller
// gets s_k = max_i s_ik. Retries, duplicates and stale or future steps
// follow the core's admission order (core/admission.h), and waits the core's
// expiry rule (core/barrier.h).
//
// Not thread-safe: the Aggregator's mutex guards it, and answers go through
// the caller's core::Deferred.
#ifndef TERN_SERVER_SCALER_BARRIER_H_
#define TERN_SERVER_SCALER_BARRIER_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/admission.h"
#include "core/barrier.h"
#include "core/deferred.h"
#include "server/messages.h"
#include "server/shard_run.h"

namespace tern::server {

using ScalerAnswer = std::shared_ptr<const ScalerReply>;

class ScalerBarrier {
 public:
  ScalerBarrier(uint32_t num_workers, const core::StepNames* names);

  // The run's TernGrad chunks; `run` outlives the barrier's use of it.
  // Before any Share.
  void Configure(const ShardRun* run);

  // Worker request.worker_id's scalers for request.step while `open` is
  // the open step; the worker was checked (joined, known). Returns OK when
  // it took `done` (answered through `deferred` or waiting until
  // `deadline`), or the refusal to answer `done` with (nothing counted),
  // RESOURCE_EXHAUSTED among them when core::kMaxWaitsPerMember calls of
  // the worker wait already.
  absl::Status Share(const ScalerRequest& request, uint64_t open,
                     absl::Time deadline, core::Callback<ScalerAnswer>& done,
                     core::Deferred* deferred);

  // The shared scalers of the open step once all N workers sent theirs;
  // null before.
  const ScalerAnswer& shared() const { return shared_; }
  // Whether `worker` has shared the open step (kArrived) or not (kAbsent).
  core::ArrivalSet::State state(uint32_t worker) const {
    return sent_.state(worker);
  }
  // "worker 2" or "workers 2,3": who has not shared the open step.
  std::string Missing() const { return sent_.Missing(); }

  // Step `open` completed: calls still waiting (workers that pushed
  // without sharing, on a shard without TernGrad chunks) get
  // FAILED_PRECONDITION; the answer is kept for retries; all reset.
  void CompleteStep(uint64_t open, core::Deferred* deferred);
  // --on_worker_loss=shrink: `worker` counts as sent from now on, in the
  // open step and every later one; when it was the last one missing, the
  // open step's scalers are shared among those who sent (answered through
  // `deferred`; null only while a restarted shard restores).
  void Drop(uint32_t worker, uint64_t open, core::Deferred* deferred);
  // Keeps the shared scalers of the latest `steps` completed steps (at
  // least 1), for workers that compute those steps again (the Aggregator
  // keeps as many steps' answers).
  void KeepAnswers(size_t steps) {
    answers_.set_capacity(std::max<size_t>(1, steps));
  }
  // A dropped worker let in again: it is counted from the next step on
  // (call before CompleteStep).
  void Readmit(uint32_t worker) { dropped_[worker] = false; }
  // A restarted shard's barrier (server/shard_state.h): `last` answers
  // retries of step open - 1 (none when null); `shared`, when not null,
  // is the open step's answer, every worker counted as sent.
  void Restore(ScalerAnswer last, ScalerAnswer shared, uint64_t open);
  // The core's expiry rule for the waiting calls; returns how many expired.
  size_t Expire(absl::Time now, uint64_t open, absl::string_view within,
                core::Deferred* deferred);
  // Answers every waiting call with `status` (shutdown, a failed run).
  void AnswerAll(const absl::Status& status, core::Deferred* deferred);

 private:
  // INVALID_ARGUMENT unless the request holds one finite scaler >= 0 for
  // each TernGrad chunk of the shard, and nothing else.
  absl::Status CheckRequest(const ScalerRequest& request) const;
  // Everyone has sent: s_k = max_i s_ik to every waiter.
  void AnswerShared(uint64_t open, core::Deferred* deferred);

  const core::StepNames* names_;
  const ShardRun* run_ = nullptr;
  core::ArrivalSet sent_;
  std::vector<bool> dropped_;  // by worker
  std::vector<float> max_scalers_;  // by scaler slot
  ScalerAnswer shared_;             // of the open step, once all sent
  core::AnswerCache<ScalerAnswer> answers_{1};
  core::WaiterList<ScalerAnswer> waiters_;
};

}  // namespace tern::server

#endif  // TERN_SERVER_SCALER_BARRIER_H_
