#include "server/run_config_check.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/checksum.h"
#include "core/join_check.h"
#include "core/limits.h"

namespace tern::server {
namespace {

std::string DropScopeName(kernels::DropScope scope) {
  return scope == kernels::DropScope::kGlobal ? "global" : "tensor";
}

std::string Quoted(const std::string& text) {
  return absl::StrCat("'", text, "'");
}

std::string KeyList(const std::vector<uint32_t>& keys) {
  return absl::StrCat("[", absl::StrJoin(keys, ","), "]");
}

// The codec parameters, by the workers' flag names.
void CompareCodecParams(const CodecParams& theirs, const CodecParams& ours,
                        core::JoinComparison* compare) {
  const std::string kPrefix = "codec parameter ";
  compare->Field(kPrefix + "sample_size", theirs.sample_size, ours.sample_size)
      .Field(kPrefix + "sampled_means", theirs.sampled_means,
             ours.sampled_means)
      .Field(kPrefix + "tau", theirs.tau, ours.tau)
      .Field(kPrefix + "proportion", theirs.proportion, ours.proportion)
      .Field(kPrefix + "drop_ratio", theirs.drop_ratio, ours.drop_ratio)
      .Field(kPrefix + "drop_scope", DropScopeName(theirs.drop_scope),
             DropScopeName(ours.drop_scope))
      .Field(kPrefix + "drop_survivors",
             std::string(kernels::DropSurvivorsName(theirs.drop_survivors)),
             std::string(kernels::DropSurvivorsName(ours.drop_survivors)))
      .Field(kPrefix + "qsgd_levels", theirs.qsgd_levels, ours.qsgd_levels)
      .Field(kPrefix + "qsgd_bucket", theirs.qsgd_bucket, ours.qsgd_bucket);
}

// The ParamSpec: the workers' hash, then what the partition was computed
// from (the hash is the workers' own).
void CompareModel(const JoinRequest& request, const ShardRun& run,
                  core::JoinComparison* compare) {
  constexpr absl::string_view kSameModel =
      "workers must train the same model (same --model)";
  compare->Texts(request.param_spec_hash == run.spec_hash, "param spec hash",
                 FormatChecksum(request.param_spec_hash),
                 FormatChecksum(run.spec_hash), kSameModel);
  compare->Field("tensor count", request.tensors.size(), run.tensors.size(),
                 kSameModel);
  if (!compare->ok()) return;
  for (size_t i = 0; i < run.tensors.size(); ++i) {
    const TensorSpec& theirs = request.tensors[i];
    const TensorSpec& ours = run.tensors[i];
    compare->Texts(
        theirs.name == ours.name && theirs.shape == ours.shape,
        absl::StrCat("tensor ", i),
        absl::StrCat(Quoted(theirs.name), " ", core::ShapeString(theirs.shape)),
        absl::StrCat(Quoted(ours.name), " ", core::ShapeString(ours.shape)),
        kSameModel);
  }
}

}  // namespace

absl::Status CheckJoinOptions(const JoinRequest& request,
                              const ShardLimits& limits) {
  const uint32_t shard = limits.shard_index;
  const uint32_t worker = request.worker_id;
  const RunConfig& config = request.config;
  if (config.mode != RunMode::kTernGrad) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", worker, " runs --mode=", RunModeName(config.mode),
        ", but shard ", shard, " serves --mode=terngrad (start `tern ps --mode=",
        RunModeName(config.mode), "`)"));
  }
  if (worker >= limits.num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker_id ", worker, " is not below --num_workers=",
                     limits.num_workers, " of shard ", shard));
  }
  if (config.num_workers != limits.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", worker, " runs with num_workers=", config.num_workers,
        ", but shard ", shard, " was started with --num_workers=",
        limits.num_workers));
  }
  if (config.num_shards != limits.num_shards) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker ", worker, " knows ", config.num_shards,
                     " shards, but shard ", shard,
                     " was started with --num_shards=", limits.num_shards));
  }
  if (request.shard_index != shard) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker ", worker, " sent its join for shard ",
                     request.shard_index, " to shard ", shard,
                     " (--ps must list the shards in shard-index order)"));
  }
  if (!limits.run_id.empty() && config.run_id != limits.run_id) {
    // Not named: the caller need not learn which run this shard serves.
    return absl::PermissionDeniedError(absl::StrCat(
        "worker ", worker, " joins another run than the one shard ", shard,
        " serves (tern ps --run_id)"));
  }
  if (!std::isfinite(config.clip) || config.clip < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("clip ", config.clip, " of worker ", worker,
                     " is not a finite number >= 0"));
  }
  return absl::OkStatus();
}

absl::Status CompareWithRun(const JoinRequest& request, const ShardRun& run,
                            uint64_t step) {
  const RunConfig& mine = request.config;
  const RunConfig& first = run.config;
  core::JoinComparison compare(absl::StrCat("worker ", request.worker_id),
                               absl::StrCat("worker ", run.first_worker));
  compare.Field("run_id", Quoted(mine.run_id), Quoted(first.run_id))
      .Field("partition_bytes", mine.partition_bytes, first.partition_bytes)
      .Field("seed", mine.seed, first.seed)
      .Texts(mine.codec == first.codec, "codec", kernels::CodecName(mine.codec),
             kernels::CodecName(first.codec))
      .Texts(mine.push_layout == first.push_layout, "push layout",
             kernels::LayoutName(mine.push_layout),
             kernels::LayoutName(first.push_layout))
      .Texts(mine.pull_layout == first.pull_layout, "pull layout",
             kernels::LayoutName(mine.pull_layout),
             kernels::LayoutName(first.pull_layout))
      .Field("clip", mine.clip, first.clip)
      .Field("broadcast_start", mine.broadcast_start, first.broadcast_start)
      .Texts(mine.shard_assignment == first.shard_assignment,
             "shard assignment", ShardAssignmentName(mine.shard_assignment),
             ShardAssignmentName(first.shard_assignment),
             "every worker must run with the same --shard_assignment");
  CompareCodecParams(mine.codec_params, first.codec_params, &compare);
  compare.Texts(mine.fp32_chunk_keys == first.fp32_chunk_keys,
                "fp32 chunk keys", KeyList(mine.fp32_chunk_keys),
                KeyList(first.fp32_chunk_keys),
                "every worker must keep the same tensors in fp32 "
                "(--fp32_tensors, --min_compress_elems)");
  CompareModel(request, run, &compare);
  // The initial parameters matter only before the first step completes, and
  // not when every worker loads worker 0's (broadcast_start).
  compare.Texts(step != 0 || first.broadcast_start ||
                    request.param_checksum == run.initial_checksum,
                "param checksum", FormatChecksum(request.param_checksum),
                FormatChecksum(run.initial_checksum),
                "workers must start from the same parameters (same --seed "
                "and model)");
  return compare.status();
}

}  // namespace tern::server
