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
  return absl::FailedPreconditionError(absl::StrCat(
      "worker ", worker, " was dropped from the run at step ", step,
      " (--on_worker_loss=shrink); restart it from its "
      "checkpoint (--checkpoint_dir) to let it in again"));
}

ActiveWorkers::ActiveWorkers(uint32_t num_workers)
    : dropped_at_(num_workers),
      returns_at_(num_workers),
      slots_(num_workers),
      count_(num_workers) {
  CountSlots();
}

void ActiveWorkers::CountSlots() {
  uint32_t slot = 0;
  for (uint32_t worker = 0; worker < size(); ++worker) {
    if (active(worker)) slots_[worker] = slot++;
  }
  count_ = slot;
}

bool ActiveWorkers::Drop(uint32_t worker, uint64_t step) {
  if (!active(worker) || count_ <= 1) return false;
  dropped_at_[worker] = step;
  // The workers after it move down one slot: a step's aggregation keeps
  // adding in worker order, now over count_ slots.
  CountSlots();
  return true;
}

bool ActiveWorkers::Return(uint32_t worker, uint64_t step) {
  if (active(worker)) return false;
  if (!returns_at_[worker].has_value()) returns_at_[worker] = step;
  return true;
}

std::vector<uint32_t> ActiveWorkers::Readmit(uint64_t step) {
  std::vector<uint32_t> back;
  for (uint32_t worker = 0; worker < size(); ++worker) {
    if (returns_at_[worker] == step) {
      returns_at_[worker].reset();
      dropped_at_[worker].reset();
      back.push_back(worker);
    }
  }
  if (!back.empty()) CountSlots();
  return back;
}

void ActiveWorkers::MarkDropped(core::ArrivalSet* arrivals) const {
  for (uint32_t worker = 0; worker < size(); ++worker) {
    if (!active(worker)) arrivals->Arrive(worker);
  }
}

}  // namespace tern::server
