// Which shards' gradients are complete while backward runs (--overlap).
// Autograd produces one tensor's gradient at a time, the last layers first;
// a shard can be pushed once every tensor that one of its chunks cuts has
// its gradient. Plain bookkeeping, no torch: the protocol feeds it the
// tensors as their hooks fire (worker/terngrad_overlap.cc).
#ifndef TERN_WORKER_SHARD_READINESS_H_
#define TERN_WORKER_SHARD_READINESS_H_

#include <cstdint>
#include <vector>

#include "common/partitioner.h"

namespace tern::worker {

class ShardReadiness {
 public:
  // Every shard of `partition`, `num_tensors` tensors.
  ShardReadiness(const Partition& partition, uint32_t num_tensors);

  // Starts a step: no tensor has its gradient yet. Returns the shards that
  // own no chunk, which are ready at once.
  std::vector<uint32_t> Reset();

  // Tensor `tensor` has its gradient; returns the shards this completes,
  // ascending. A tensor reported twice in a step (or out of range)
  // completes nothing the second time.
  std::vector<uint32_t> TensorReady(uint32_t tensor);

  bool tensor_ready(uint32_t tensor) const { return ready_[tensor]; }

 private:
  // By tensor: the shards that own one of its chunks (each once).
  std::vector<std::vector<uint32_t>> shards_of_tensor_;
  // By shard: how many distinct tensors its chunks cut.
  std::vector<uint32_t> tensors_of_shard_;
  // This step: tensors still missing per shard, and the tensors seen.
  std::vector<uint32_t> missing_;
  std::vector<bool> ready_;
};

}  // namespace tern::worker

#endif  // TERN_WORKER_SHARD_READINESS_H_
