// The deterministic partitioner (DESIGN section 2): tensors are cut into
// chunks of at most `partition_bytes` (fp32-equivalent) and the chunks are
// assigned to S shards, so that every process computes the same map from
// (tensor sizes, S, partition_bytes) with no coordination.
#ifndef TERN_COMMON_PARTITIONER_H_
#define TERN_COMMON_PARTITIONER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace tern {

inline constexpr uint64_t kDefaultPartitionBytes = 4ull << 20;  // 4 MiB

// How chunks are assigned to shards. Every process of a run must use the
// same rule (RunConfig.shard_assignment).
enum class ShardAssignment {
  // Largest chunk first to the least-loaded shard (the LPT rule): shards
  // within one chunk of each other in size, each holding chunks from
  // anywhere in the model.
  kBalanced,
  // The chunks in backward order (highest key, the model's last layers,
  // first) cut into S contiguous runs of about equal size: shard 0 holds
  // what autograd produces first, so a worker that overlaps communication
  // with the backward pass (--overlap) can push it while the first layers'
  // gradients are still being computed.
  kBackwardOrder,
};

// "balanced" or "backward order", for messages and logs.
inline const char* ShardAssignmentName(ShardAssignment assignment) {
  return assignment == ShardAssignment::kBackwardOrder ? "backward order"
                                                       : "balanced";
}

struct Chunk {
  // Number of the chunk in the whole model, from 0 in tensor order.
  uint32_t key = 0;
  uint32_t tensor = 0;
  // Element range [offset, offset + num_elements) inside the tensor.
  uint64_t offset = 0;
  uint64_t num_elements = 0;
  // Offset of the chunk's first element in the model's parameters laid out
  // flat, one tensor after another (the buffer a GPU kernel sees).
  uint64_t flat_offset = 0;
  uint32_t shard = 0;
};

class Partition {
 public:
  // Cuts tensors of the given element counts into chunks and assigns them to
  // `num_shards` shards. A tensor of n elements becomes
  // k = max(1, ceil(n / max_elements)) chunks whose sizes differ by at most
  // one (the first n % k get one more), max_elements = partition_bytes / 4.
  // With kBalanced, chunks go largest first (ties: lower key first) to the
  // shard with the fewest elements so far (ties: lower shard index); with
  // kBackwardOrder, see ShardAssignment. INVALID_ARGUMENT if partition_bytes <
  // 4, num_shards == 0, or the model has more chunks than fit a uint32 key
  // (counted before any is made).
  static absl::StatusOr<Partition> Create(
      absl::Span<const uint64_t> tensor_elements, uint64_t partition_bytes,
      uint32_t num_shards,
      ShardAssignment assignment = ShardAssignment::kBalanced);

  // The k above: the chunks Create cuts a tensor of `elements` into, for
  // sizing a model before cutting it (core/limits.h). INVALID_ARGUMENT if
  // partition_bytes < 4.
  static absl::StatusOr<uint64_t> ChunkCount(uint64_t elements,
                                             uint64_t partition_bytes);

  // All chunks, in key order (chunks()[k].key == k).
  const std::vector<Chunk>& chunks() const { return chunks_; }
  uint32_t num_shards() const { return num_shards_; }
  ShardAssignment assignment() const { return assignment_; }
  uint64_t total_elements() const { return total_elements_; }

  // Keys of the chunks `shard` owns, ascending.
  std::vector<uint32_t> ChunksOfShard(uint32_t shard) const;
  // Elements `shard` owns.
  uint64_t ShardElements(uint32_t shard) const;

 private:
  Partition() = default;

  void AssignBalanced();
  void AssignBackwardOrder();

  std::vector<Chunk> chunks_;
  uint32_t num_shards_ = 0;
  ShardAssignment assignment_ = ShardAssignment::kBalanced;
  uint64_t total_elements_ = 0;
};

}  // namespace tern

#endif  // TERN_COMMON_PARTITIONER_H_
