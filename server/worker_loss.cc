#include "server/worker_loss.h"

#include "absl/strings/str_cat.h"

namespace tern::server {

absl::StatusOr<WorkerLossPolicy> ParseWorkerLossPolicy(absl::string_view name) {
  if (name == "stop") return WorkerLossPolicy::kStop;
  if (name == "shrink") return WorkerLossPolicy::kShrink;
  return absl::InvalidArgumentError(absl::StrCat(
      "--on_worker_loss: '", name, "' is not one of stop, shrink"));
}

absl::string_view WorkerLossPolicyName(WorkerLossPolicy policy) {
  return policy == WorkerLossPolicy::kShrink ? "shrink" : "stop";
}

absl::Status DroppedError(uint32_t worker, uint64_t step) {
  return absl::FailedPreconditionError(
      absl::StrCat("worker ", worker, " was dropped from the run at step ",
                   step, " (--on_worker_loss=shrink) and cannot rejoin it"));
}

ActiveWorkers::ActiveWorkers(uint32_t num_workers)
    : dropped_at_(num_workers), slots_(num_workers), count_(num_workers) {
  for (uint32_t worker = 0; worker < num_workers; ++worker) {
    slots_[worker] = worker;
  }
}

bool ActiveWorkers::Drop(uint32_t worker, uint64_t step) {
  if (!active(worker) || count_ <= 1) return false;
  dropped_at_[worker] = step;
  --count_;
  // The workers after it move down one slot: a step's aggregation keeps
  // adding in worker order, now over count_ slots.
  for (uint32_t later = worker + 1; later < size(); ++later) --slots_[later];
  return true;
}

void ActiveWorkers::MarkDropped(core::ArrivalSet* arrivals) const {
  for (uint32_t worker = 0; worker < size(); ++worker) {
    if (!active(worker)) arrivals->Arrive(worker);
  }
}

}  // namespace tern::server
