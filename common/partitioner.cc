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

// A run of one tensor's elements that is cut into chunks on its own: the
// whole tensor, or with kEven its part inside one shard's run.
struct Piece {
  uint32_t tensor = 0;
  uint64_t offset = 0;       // in the tensor
  uint64_t flat_offset = 0;  // in the model laid out flat
  uint64_t num_elements = 0;
  uint32_t shard = 0;  // kEven's; the other rules assign chunks later
};

// kEven's runs: counted from the model's last element, shard s holds the
// elements [floor(s T / S), floor((s + 1) T / S)) of T. 128-bit products:
// T and S multiplied would wrap in 64 bits.
class EvenRuns {
 public:
  EvenRuns(uint64_t total, uint32_t num_shards)
      : total_(total), num_shards_(num_shards) {}

  // The shard whose run holds flat element p < T: the largest s with
  // floor(s T / S) <= T - 1 - p, that is ceil((T - p) S / T) - 1.
  uint32_t ShardOf(uint64_t p) const {
    const unsigned __int128 from_end = total_ - p;  // in [1, T]
    return static_cast<uint32_t>((from_end * num_shards_ - 1) / total_);
  }

  // One past the last flat element of shard s's run.
  uint64_t EndOf(uint32_t s) const {
    return total_ - static_cast<uint64_t>(static_cast<unsigned __int128>(s) *
                                          total_ / num_shards_);
  }

 private:
  uint64_t total_;
  uint32_t num_shards_;
};

// A tensor's parts inside each shard's run, appended to `pieces`. An empty
// tensor is one empty piece on the shard of the element after it (shard 0
// at the model's end).
void CutAtRuns(const EvenRuns& runs, uint64_t total, uint32_t tensor,
               uint64_t flat, uint64_t n, std::vector<Piece>& pieces) {
  if (n == 0) {
    const uint32_t shard = flat < total ? runs.ShardOf(flat) : 0;
    pieces.push_back({tensor, 0, flat, 0, shard});
    return;
  }
  for (uint64_t offset = 0; offset < n;) {
    const uint32_t shard = runs.ShardOf(flat + offset);
    const uint64_t end = std::min(n, runs.EndOf(shard) - flat);
    pieces.push_back({tensor, offset, flat + offset, end - offset, shard});
    offset = end;
  }
}

// The pieces of the model: each tensor whole, or with kEven cut at the
// shards' runs (at most S - 1 pieces more than tensors).
std::vector<Piece> CutIntoPieces(absl::Span<const uint64_t> tensor_elements,
                                 uint32_t num_shards,
                                 ShardAssignment assignment) {
  uint64_t total = 0;
  for (const uint64_t n : tensor_elements) total += n;
  const EvenRuns runs(total, num_shards);
  std::vector<Piece> pieces;
  pieces.reserve(tensor_elements.size());
  uint64_t flat = 0;
  for (uint32_t t = 0; t < tensor_elements.size(); ++t) {
    const uint64_t n = tensor_elements[t];
    if (assignment == ShardAssignment::kEven) {
      CutAtRuns(runs, total, t, flat, n, pieces);
    } else {
      pieces.push_back({t, 0, flat, n, 0});
    }
    flat += n;
  }
  return pieces;
}

// The chunks the pieces are cut into, counted before any is made: a model
// of more chunks than keys is refused without allocating them.
absl::StatusOr<uint64_t> CountAllChunks(absl::Span<const Piece> pieces,
                                        uint64_t partition_bytes) {
  const uint64_t max_elements = partition_bytes / sizeof(float);
  uint64_t num_chunks = 0;
  for (const Piece& piece : pieces) {
    const uint64_t k = CountChunks(piece.num_elements, max_elements);
    if (k > std::numeric_limits<uint32_t>::max() - num_chunks) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the model has more than 2^32 - 1 chunks; raise partition_bytes (",
          partition_bytes, ")"));
    }
    num_chunks += k;
  }
  return num_chunks;
}

}  // namespace

const char* ShardAssignmentName(ShardAssignment assignment) {
  switch (assignment) {
    case ShardAssignment::kBackwardOrder:
      return "backward order";
    case ShardAssignment::kEven:
      return "even";
    case ShardAssignment::kBalanced:
      break;
  }
  return "balanced";
}

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
  const std::vector<Piece> pieces =
      CutIntoPieces(tensor_elements, num_shards, assignment);
  absl::StatusOr<uint64_t> num_chunks = CountAllChunks(pieces, partition_bytes);
  if (!num_chunks.ok()) return num_chunks.status();

  Partition partition;
  partition.num_shards_ = num_shards;
  partition.assignment_ = assignment;
  partition.chunks_.reserve(*num_chunks);
  const uint64_t max_elements = partition_bytes / sizeof(float);
  for (const Piece& piece : pieces) {
    const uint64_t n = piece.num_elements;
    const uint64_t k = CountChunks(n, max_elements);
    uint64_t offset = 0;
    for (uint64_t c = 0; c < k; ++c) {
      Chunk chunk;
      chunk.key = static_cast<uint32_t>(partition.chunks_.size());
      chunk.tensor = piece.tensor;
      chunk.offset = piece.offset + offset;
      chunk.num_elements = n / k + (c < n % k ? 1 : 0);
      chunk.flat_offset = piece.flat_offset + offset;
      chunk.shard = piece.shard;
      offset += chunk.num_elements;
      partition.chunks_.push_back(chunk);
    }
    partition.total_elements_ += n;
  }

  if (assignment == ShardAssignment::kBackwardOrder) {
    partition.AssignBackwardOrder();
  } else if (assignment == ShardAssignment::kBalanced) {
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
