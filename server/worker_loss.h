// What a shard does with a worker that stops arriving (issue 16,
// `tern ps --on_worker_loss`), and which workers are still in the run.
//
// A worker is lost when a barrier of the open step (scaler sharing, then
// push-pull) has waited --worker_loss_timeout_s since its first worker
// arrived and the worker has not (a push still being added counts as
// arrived). Then:
//   stop   (default): the run fails with FAILED_PRECONDITION naming the
//          worker and the step; every worker's next call gets it and the
//          workers exit 1.
//   shrink: the run goes on without it. Scalers shared so far stand (the
//          max of those who sent, the lost worker's included if it did);
//          pushes of the step already added are dropped and their workers
//          answered ABORTED, and they push the step again (the sum must
//          count every remaining worker exactly once, and an added push
//          cannot be taken out of a codec's sum). The step's aggregate is
//          then the sum of the remaining workers with num_summands = their
//          count, so the pulled average divides by the workers that
//          pushed.
// A dropped worker that comes back from its checkpoint joins again and is
// let in at the step after the shard's open one (a step boundary); until
// then it catches up on the answers the shard keeps (--catch_up_mb), and
// its calls are answered without being counted (server/README.md, "Lost
// workers").
#ifndef TERN_SERVER_WORKER_LOSS_H_
#define TERN_SERVER_WORKER_LOSS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/barrier.h"

namespace tern::server {

enum class WorkerLossPolicy { kStop, kShrink };

absl::StatusOr<WorkerLossPolicy> ParseWorkerLossPolicy(absl::string_view name);
absl::string_view WorkerLossPolicyName(WorkerLossPolicy policy);

// FAILED_PRECONDITION for the calls of a worker dropped at `step` that has
// not joined again.
absl::Status DroppedError(uint32_t worker, uint64_t step);

// The N workers of a run and those dropped from it (shrink). An active
// worker's slot is its rank among the active ones: the index its pushes
// take in a step's aggregation, which counts only active workers.
class ActiveWorkers {
 public:
  explicit ActiveWorkers(uint32_t num_workers);

  uint32_t size() const { return static_cast<uint32_t>(dropped_at_.size()); }
  uint32_t count() const { return count_; }
  // Requires worker < size(), as every method that takes one.
  bool active(uint32_t worker) const {
    return !dropped_at_[worker].has_value();
  }
  // The step at which `worker` was dropped; nullopt while it is active.
  std::optional<uint64_t> dropped_at(uint32_t worker) const {
    return dropped_at_[worker];
  }
  // Requires active(worker).
  uint32_t Slot(uint32_t worker) const { return slots_[worker]; }
  // The step a dropped worker that joined again is let in at; nullopt for
  // an active worker and for a dropped one that has not come back.
  std::optional<uint64_t> returns_at(uint32_t worker) const {
    return returns_at_[worker];
  }

  // Drops an active worker at `step`; false (no change) when it was
  // dropped already or is the last active one.
  bool Drop(uint32_t worker, uint64_t step);
  // A dropped worker joined again: it is let in at `step` (Readmit); an
  // earlier return stands. False (no change) for an active worker.
  bool Return(uint32_t worker, uint64_t step);
  // Lets in every returning worker whose step is `step` and returns them,
  // ascending; their slots and the count include them from then on.
  std::vector<uint32_t> Readmit(uint64_t step);
  // Counts every dropped worker as arrived in `arrivals` (a barrier then
  // completes once the active workers arrived).
  void MarkDropped(core::ArrivalSet* arrivals) const;

 private:
  // Sets every active worker's slot to its rank among the active ones.
  void CountSlots();

  std::vector<std::optional<uint64_t>> dropped_at_;  // by worker
  std::vector<std::optional<uint64_t>> returns_at_;  // by worker
  std::vector<uint32_t> slots_;                      // by worker
  uint32_t count_;
};

}  // namespace tern::server

#endif  // TERN_SERVER_WORKER_LOSS_H_
