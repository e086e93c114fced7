#include "worker/shard_readiness.h"

#include <algorithm>

namespace tern::worker {

ShardReadiness::ShardReadiness(const Partition& partition, uint32_t num_tensors)
    : shards_of_tensor_(num_tensors),
      tensors_of_shard_(partition.num_shards(), 0),
      ready_(num_tensors, false) {
  for (const Chunk& chunk : partition.chunks()) {
    std::vector<uint32_t>& shards = shards_of_tensor_[chunk.tensor];
    if (std::find(shards.begin(), shards.end(), chunk.shard) == shards.end()) {
      shards.push_back(chunk.shard);
      ++tensors_of_shard_[chunk.shard];
    }
  }
  for (std::vector<uint32_t>& shards : shards_of_tensor_) {
    std::sort(shards.begin(), shards.end());
  }
}

std::vector<uint32_t> ShardReadiness::Reset() {
  missing_ = tensors_of_shard_;
  std::fill(ready_.begin(), ready_.end(), false);
  std::vector<uint32_t> empty;
  for (uint32_t shard = 0; shard < missing_.size(); ++shard) {
    if (missing_[shard] == 0) empty.push_back(shard);
  }
  return empty;
}

std::vector<uint32_t> ShardReadiness::TensorReady(uint32_t tensor) {
  std::vector<uint32_t> complete;
  if (tensor >= ready_.size() || ready_[tensor]) return complete;
  ready_[tensor] = true;
  for (const uint32_t shard : shards_of_tensor_[tensor]) {
    if (--missing_[shard] == 0) complete.push_back(shard);
  }
  return complete;
}

}  // namespace tern::worker
