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
// same rule (RunConfig.shard_assignment); the values are the proto's.
enum class ShardAssignment {
  // Largest chunk first to the least-loaded shard (the LPT rule): shards
  // within one chunk of each other in size, each holding chunks from
  // anywhere in the model.
  kBalanced = 0,
  // The chunks in backward order (highest key, the model's last layers,
  // first) cut into S contiguous runs of about equal size: shard 0 holds
  // what autograd produces first, so a worker that overlaps communication
  // with the backward pass (--overlap) can push it while the first layers'
  // gradients are still being computed.
  kBackwardOrder = 1,
  // The model laid out flat, counted from its last element, cut into S
  // contiguous runs of equal size (within one element), shard 0 holding the
  // last: a tensor that crosses the end of a run is cut there as well as at
  // partition_bytes. Equal shards keep every link of a co-located run
  // equally loaded (the other rules leave a shard up to one chunk larger,
  // 6% for LeNet over 4 shards), and the order serves --overlap as
  // kBackwardOrder does.
  kEven = 2,
};

// "balanced", "backward order" or "even", for messages and logs.
const char* ShardAssignmentName(ShardAssignment assignment);

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
  // one (the first n % k get one more), max_elements = partition_bytes / 4;
  // with kEven each part of a tensor inside one shard's run is cut so. With
  // kBalanced, chunks go largest first (ties: lower key first) to the
  // shard with the fewest elements so far (ties: lower shard index); with
  // kBackwardOrder and kEven, see ShardAssignment. INVALID_ARGUMENT if
  // partition_bytes < 4, num_shards == 0, or the model has more chunks than
  // fit a uint32 key (counted before any is made).
  static absl::StatusOr<Partition> Create(
      absl::Span<const uint64_t> tensor_elements, uint64_t partition_bytes,
      uint32_t num_shards,
      ShardAssignment assignment = ShardAssignment::kBalanced);

  // The k above: the chunks Create cuts a tensor of `elements` into, for
  // sizing a model before cutting it (core/limits.h); kEven cuts at most
  // S - 1 more in the whole model, one at each end of a run inside a
  // tensor. INVALID_ARGUMENT if partition_bytes < 4.
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
