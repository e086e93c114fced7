#include "common/partitioner.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace tern {

namespace {

absl::Status CheckPartitionBytes(uint64_t partition_bytes) {
  if (partition_bytes >= sizeof(float)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "partition_bytes must be at least 4 (one float), got ", partition_bytes));
}

// max(1, ceil(n / max_elements)), without n + max_elements - 1, which wraps
// for n near 2^64.
uint64_t CountChunks(uint64_t n, uint64_t max_elements) {
  return std::max<uint64_t>(1, n / max_elements + (n % max_elements != 0));
}

}  // namespace

absl::StatusOr<uint64_t> Partition::ChunkCount(uint64_t elements,
                                               uint64_t partition_bytes) {
  if (absl::Status status = CheckPartitionBytes(partition_bytes);
      !status.ok()) {
    return status;
  }
  return CountChunks(elements, partition_bytes / sizeof(float));
}

absl::StatusOr<Partition> Partition::Create(
    absl::Span<const uint64_t> tensor_elements, uint64_t partition_bytes,
    uint32_t num_shards, ShardAssignment assignment) {
  if (absl::Status status = CheckPartitionBytes(partition_bytes);
      !status.ok()) {
    return status;
  }
  if (num_shards == 0) {
    return absl::InvalidArgumentError("num_shards must be at least 1");
  }
  const uint64_t max_elements = partition_bytes / sizeof(float);
  // Count first: a model of more chunks than keys is refused before one
  // Chunk is made, and the chunks are made in one allocation.
  uint64_t num_chunks = 0;
  for (const uint64_t n : tensor_elements) {
    const uint64_t k = CountChunks(n, max_elements);
    if (k > std::numeric_limits<uint32_t>::max() - num_chunks) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the model has more than 2^32 - 1 chunks; raise partition_bytes (",
          partition_bytes, ")"));
    }
    num_chunks += k;
  }

  Partition partition;
  partition.num_shards_ = num_shards;
  partition.chunks_.reserve(num_chunks);
  uint64_t flat_offset = 0;
  for (uint32_t t = 0; t < tensor_elements.size(); ++t) {
    const uint64_t n = tensor_elements[t];
    const uint64_t k = CountChunks(n, max_elements);
    uint64_t offset = 0;
    for (uint64_t c = 0; c < k; ++c) {
      Chunk chunk;
      chunk.key = static_cast<uint32_t>(partition.chunks_.size());
      chunk.tensor = t;
      chunk.offset = offset;
      chunk.num_elements = n / k + (c < n % k ? 1 : 0);
      chunk.flat_offset = flat_offset + offset;
      offset += chunk.num_elements;
      partition.chunks_.push_back(chunk);
    }
    flat_offset += n;
  }
  partition.total_elements_ = flat_offset;

  partition.assignment_ = assignment;
  if (assignment == ShardAssignment::kBackwardOrder) {
    partition.AssignBackwardOrder();
  } else {
    partition.AssignBalanced();
  }
  return partition;
}

void Partition::AssignBalanced() {
  // Largest first to the least-loaded shard: the classic LPT rule keeps the
  // shards within one chunk of each other in size.
  std::vector<uint32_t> order(chunks_.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return chunks_[a].num_elements > chunks_[b].num_elements;
  });
  std::vector<uint64_t> load(num_shards_, 0);
  for (uint32_t key : order) {
    const uint32_t shard = static_cast<uint32_t>(
        std::min_element(load.begin(), load.end()) - load.begin());
    chunks_[key].shard = shard;
    load[shard] += chunks_[key].num_elements;
  }
}

void Partition::AssignBackwardOrder() {
  // A chunk goes to the shard whose equal share of the model holds the
  // chunk's midpoint, counted from the last key: the shards' runs are
  // contiguous and each is within one chunk of total / S. Long double: the
  // product of two 64-bit counts would wrap.
  const long double total =
      std::max<long double>(1.0L, static_cast<long double>(total_elements_));
  uint64_t before = 0;  // elements of the higher keys
  for (auto chunk = chunks_.rbegin(); chunk != chunks_.rend(); ++chunk) {
    const long double midpoint = before + chunk->num_elements / 2.0L;
    const uint64_t share =
        static_cast<uint64_t>(midpoint * num_shards_ / total);
    chunk->shard =
        static_cast<uint32_t>(std::min<uint64_t>(share, num_shards_ - 1));
    before += chunk->num_elements;
  }
}

std::vector<uint32_t> Partition::ChunksOfShard(uint32_t shard) const {
  std::vector<uint32_t> keys;
  for (const Chunk& chunk : chunks_) {
    if (chunk.shard == shard) keys.push_back(chunk.key);
  }
  return keys;
}

uint64_t Partition::ShardElements(uint32_t shard) const {
  uint64_t total = 0;
  for (const Chunk& chunk : chunks_) {
    if (chunk.shard == shard) total += chunk.num_elements;
  }
  return total;
}

}  // namespace tern
