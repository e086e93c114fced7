#include "server/shard_run.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/partitioner.h"
#include "core/limits.h"
#include "kernels/codec_registry.h"
#include "server/model_cut.h"

namespace tern::server {
namespace {

absl::Status WithPrefix(const absl::Status& status, absl::string_view prefix) {
  return absl::Status(status.code(),
                      absl::StrCat(prefix, ": ", status.message()));
}

// The fp32 chunk keys, each once and within the model's chunks.
absl::StatusOr<absl::flat_hash_set<uint32_t>> Fp32Keys(
    const std::vector<uint32_t>& listed, size_t num_chunks) {
  absl::flat_hash_set<uint32_t> keys;
  for (const uint32_t key : listed) {
    if (key >= num_chunks) {
      return absl::InvalidArgumentError(
          absl::StrCat("fp32 chunk key ", key, " is beyond the model's ",
                       num_chunks, " chunks"));
    }
    if (!keys.insert(key).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("fp32 chunk key ", key, " is listed twice"));
    }
  }
  return keys;
}

absl::Status CheckFitsMessages(const ShardLimits& limits, uint64_t elements,
                               size_t chunks) {
  const uint64_t bytes = core::Fp32MessageBytes(elements, chunks);
  if (bytes <= limits.max_message_bytes) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "shard %d would own %d elements in %d chunks: up to %d bytes per "
      "message in fp32, more than its limit of %d MiB (--max_message_mb); "
      "raise --max_message_mb of the shards or use more shards",
      limits.shard_index, elements, chunks, bytes,
      limits.max_message_bytes >> 20));
}

absl::Status MakeCodecs(const ShardLimits& limits, const RunConfig& config,
                        ShardRun* run) {
  absl::StatusOr<std::unique_ptr<kernels::Codec>> run_codec =
      limits.make_codec(RunCodecOptions(config));
  if (!run_codec.ok()) return WithPrefix(run_codec.status(), "run config");
  kernels::CodecOptions fp32_options;
  fp32_options.id = kernels::CodecId::kFp32;
  fp32_options.push_layout = kernels::Layout::kRaw;
  fp32_options.pull_layout = kernels::Layout::kRaw;
  absl::StatusOr<std::unique_ptr<kernels::Codec>> fp32_codec =
      kernels::MakeCodec(fp32_options);
  if (!fp32_codec.ok()) return WithPrefix(fp32_codec.status(), "fp32 codec");
  run->run_codec = *std::move(run_codec);
  run->fp32_codec = *std::move(fp32_codec);
  return absl::OkStatus();
}

}  // namespace

void ShardChunk::Open(uint64_t seed, uint64_t step, uint32_t num_workers) {
  kernels::AggregationContext context;
  // The step wraps at 2^32 in the counter, as on the workers.
  context.stream = RandomStream{seed, static_cast<uint32_t>(step), key,
                                kernels::kShardStreamWorker};
  context.group_size = group_size;
  if (codec->UsesErrorFeedback()) context.residual = &residual;
  aggregation = codec->NewAggregation(num_elements, num_workers, context);
}

absl::StatusOr<std::unique_ptr<ShardRun>> ShardRun::Build(
    const JoinRequest& first, const ShardLimits& limits) {
  const RunConfig& config = first.config;
  absl::StatusOr<Partition> partition =
      CutModel(first, ModelLimits{limits.num_shards, limits.max_message_bytes,
                                  "raise --max_message_mb of the shards, use "
                                  "more shards or a larger --partition_bytes"});
  if (!partition.ok()) return partition.status();
  absl::StatusOr<absl::flat_hash_set<uint32_t>> fp32_keys =
      Fp32Keys(config.fp32_chunk_keys, partition->chunks().size());
  if (!fp32_keys.ok()) return fp32_keys.status();

  auto run = std::make_unique<ShardRun>();
  run->keys = partition->ChunksOfShard(limits.shard_index);
  run->shard_elements = partition->ShardElements(limits.shard_index);
  if (absl::Status status =
          CheckFitsMessages(limits, run->shard_elements, run->keys.size());
      !status.ok()) {
    return status;
  }
  if (absl::Status status = MakeCodecs(limits, config, run.get());
      !status.ok()) {
    return status;
  }
  for (const uint32_t key : run->keys) {
    const Chunk& part = partition->chunks()[key];
    auto chunk = std::make_unique<ShardChunk>();
    chunk->key = key;
    chunk->num_elements = part.num_elements;
    chunk->group_size =
        kernels::ColumnGroupSize(first.tensors[part.tensor].shape);
    const bool fp32 = fp32_keys->contains(key);
    chunk->codec = fp32 ? run->fp32_codec.get() : run->run_codec.get();
    chunk->push_layout = fp32 ? kernels::Layout::kRaw : config.push_layout;
    // Scaler sharing is TernGrad's (DESIGN section 3, step 3).
    chunk->shares_scaler = chunk->codec->id() == kernels::CodecId::kTernGrad;
    if (chunk->shares_scaler) {
      chunk->scaler_slot = run->scaler_chunks.size();
      run->scaler_chunks.push_back(chunk.get());
    }
    {
      absl::MutexLock lock(&chunk->mu);
      if (chunk->codec->UsesErrorFeedback()) {
        chunk->residual.assign(chunk->num_elements, 0.0f);
        ++run->feedback_chunks;
      }
      chunk->Open(config.seed, 0, limits.num_workers);
    }
    run->by_key[key] = chunk.get();
    run->chunks.push_back(std::move(chunk));
  }
  run->first_worker = first.worker_id;
  run->config = config;
  run->tensors = first.tensors;
  run->spec_hash = first.param_spec_hash;
  run->initial_checksum = first.param_checksum;
  return run;
}

ShardChunk* ShardRun::Find(uint32_t key) const {
  const auto it = by_key.find(key);
  return it == by_key.end() ? nullptr : it->second;
}

}  // namespace tern::server
