// Which chunk travels how (DESIGN sections 2 and 3): the partition of the
// model into chunks and shards, which chunks stay in fp32 whatever the run's
// codec (--fp32_tensors, --min_compress_elems: the TernGrad paper keeps the
// last classifier layer in full precision), and which chunks take part in
// scaler sharing. Every worker computes the same plan from the same inputs.
#ifndef TERN_WORKER_CHUNK_PLAN_H_
#define TERN_WORKER_CHUNK_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/partitioner.h"

namespace tern::worker {

// The name in --fp32_tensors that stands for the model's last weight and
// its bias (the classifier layer).
inline constexpr char kLastLayer[] = "last";

// Marks the tensors that stay in fp32: those named in `fp32_tensors`
// (exact names, or kLastLayer: the last tensor whose name ends in "weight"
// and the tensor of the same prefix ending in "bias", if any) and those with
// fewer than `min_compress_elems` elements. INVALID_ARGUMENT naming an entry
// of `fp32_tensors` that matches no tensor (listing the names there are).
absl::StatusOr<std::vector<bool>> SelectFp32Tensors(
    absl::Span<const std::string> names, absl::Span<const uint64_t> elements,
    absl::Span<const std::string> fp32_tensors, uint64_t min_compress_elems);

// The rule --shard_assignment names: "even", "balanced" or "backward"
// (common/partitioner.h). INVALID_ARGUMENT naming the three otherwise.
absl::StatusOr<ShardAssignment> ParseShardAssignment(absl::string_view name);

struct ChunkPlan {
  Partition partition;
  // By chunk key: true when the chunk travels in fp32.
  std::vector<bool> fp32_chunk;
  // The keys of the fp32 chunks, ascending (RunConfig.fp32_chunk_keys).
  std::vector<uint32_t> fp32_chunk_keys;
  // By shard: the keys it owns, ascending.
  std::vector<std::vector<uint32_t>> shard_chunks;
  // By shard: the keys whose scalers are shared with it (TernGrad chunks),
  // ascending; all empty when the run does not share scalers.
  std::vector<std::vector<uint32_t>> shard_scaler_chunks;
};

// Partitions tensors of `elements` (named `names`) into chunks of at most
// `partition_bytes` over `num_shards` shards, and applies
// SelectFp32Tensors. `share_scalers` is true for TernGrad runs.
absl::StatusOr<ChunkPlan> MakeChunkPlan(
    absl::Span<const std::string> names, absl::Span<const uint64_t> elements,
    uint64_t partition_bytes, uint32_t num_shards,
    absl::Span<const std::string> fp32_tensors, uint64_t min_compress_elems,
    bool share_scalers,
    ShardAssignment assignment = ShardAssignment::kBalanced);

}  // namespace tern::worker

#endif  // TERN_WORKER_CHUNK_PLAN_H_
