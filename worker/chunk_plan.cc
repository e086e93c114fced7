#include "worker/chunk_plan.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tern::worker {

absl::StatusOr<std::vector<bool>> SelectFp32Tensors(
    absl::Span<const std::string> names, absl::Span<const uint64_t> elements,
    absl::Span<const std::string> fp32_tensors, uint64_t min_compress_elems) {
  if (names.size() != elements.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(names.size(), " tensor names but ", elements.size(),
                     " element counts"));
  }
  std::vector<bool> fp32(names.size(), false);
  for (size_t t = 0; t < names.size(); ++t) {
    if (elements[t] < min_compress_elems) fp32[t] = true;
  }
  for (const std::string& wanted : fp32_tensors) {
    bool found = false;
    if (wanted == kLastLayer) {
      for (size_t t = names.size(); t-- > 0;) {
        if (!absl::EndsWith(names[t], "weight")) continue;
        fp32[t] = true;
        found = true;
        const std::string prefix =
            names[t].substr(0, names[t].size() - std::string("weight").size());
        for (size_t b = 0; b < names.size(); ++b) {
          if (names[b] == prefix + "bias") fp32[b] = true;
        }
        break;
      }
    } else {
      for (size_t t = 0; t < names.size(); ++t) {
        if (names[t] == wanted) {
          fp32[t] = true;
          found = true;
        }
      }
    }
    if (!found) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--fp32_tensors: '", wanted, "' is not a tensor of the model (",
          wanted == kLastLayer ? "no tensor name ends in 'weight'; " : "",
          "tensors: ", absl::StrJoin(names, ", "), ")"));
    }
  }
  return fp32;
}

absl::StatusOr<ShardAssignment> ParseShardAssignment(absl::string_view name) {
  if (name == "even") return ShardAssignment::kEven;
  if (name == "balanced") return ShardAssignment::kBalanced;
  if (name == "backward") return ShardAssignment::kBackwardOrder;
  return absl::InvalidArgumentError(
      absl::StrCat("--shard_assignment: '", name,
                   "' is not even, balanced or backward"));
}

absl::StatusOr<ChunkPlan> MakeChunkPlan(
    absl::Span<const std::string> names, absl::Span<const uint64_t> elements,
    uint64_t partition_bytes, uint32_t num_shards,
    absl::Span<const std::string> fp32_tensors, uint64_t min_compress_elems,
    bool share_scalers, ShardAssignment assignment) {
  absl::StatusOr<std::vector<bool>> fp32_tensor =
      SelectFp32Tensors(names, elements, fp32_tensors, min_compress_elems);
  if (!fp32_tensor.ok()) return fp32_tensor.status();
  absl::StatusOr<Partition> partition =
      Partition::Create(elements, partition_bytes, num_shards, assignment);
  if (!partition.ok()) return partition.status();

  ChunkPlan plan{*std::move(partition), {}, {}, {}, {}};
  const std::vector<Chunk>& chunks = plan.partition.chunks();
  plan.fp32_chunk.resize(chunks.size());
  plan.shard_chunks.resize(num_shards);
  plan.shard_scaler_chunks.resize(num_shards);
  for (const Chunk& chunk : chunks) {
    const bool fp32 = (*fp32_tensor)[chunk.tensor];
    plan.fp32_chunk[chunk.key] = fp32;
    if (fp32) plan.fp32_chunk_keys.push_back(chunk.key);
    plan.shard_chunks[chunk.shard].push_back(chunk.key);
    if (share_scalers && !fp32) {
      plan.shard_scaler_chunks[chunk.shard].push_back(chunk.key);
    }
  }
  return plan;
}

}  // namespace tern::worker
