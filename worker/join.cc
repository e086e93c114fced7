#include "worker/join.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/codec_config.h"

namespace tern::worker {
namespace {

// The oldest step a shard answering `response` can still answer a push of.
uint64_t OldestKept(const tern::v1::JoinResponse& response) {
  if (response.has_oldest_kept_step()) return response.oldest_kept_step();
  return response.next_step() == 0 ? 0 : response.next_step() - 1;
}

// Shard `shard` is at step `at`, and this worker cannot continue with it
// from resume.start_step: why.
absl::Status WrongStep(const std::string& shard_name, uint64_t at,
                       uint64_t oldest_kept, const std::string& run_id,
                       const ResumePoint& resume) {
  const std::string& path = resume.checkpoint_path;
  if (path.empty() || (resume.start_step == 0 && at > 1)) {
    return absl::FailedPreconditionError(absl::StrCat(
        shard_name, " continues run '", run_id, "' at step ", at,
        ", but this worker has no checkpoint to resume from",
        path.empty() ? " (no --checkpoint_dir)"
                     : absl::StrCat(" ('", path, "' does not exist)"),
        "; give the --checkpoint_dir it wrote, restart the job, or use a "
        "new --run_id"));
  }
  if (at > resume.start_step) {
    return absl::FailedPreconditionError(absl::StrCat(
        shard_name, " is at step ", at, " and keeps the answers from step ",
        oldest_kept, " on, but checkpoint '", path, "' resumes at step ",
        resume.start_step,
        ": the shards completed steps this worker cannot replay; "
        "checkpoint more often (--checkpoint_every), give the shards a "
        "larger --catch_up_mb, or restart the job"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      shard_name, " is at step ", at, ", behind checkpoint '", path,
      "' at step ", resume.start_step,
      ": the shard has restarted and lost the run (shards keep no "
      "checkpoints); restart the job with a new --run_id or another "
      "--checkpoint_dir"));
}

}  // namespace

tern::v1::JoinRequest BaseJoinRequest(const WorkerOptions& options,
                                      const ChunkPlan& plan,
                                      const kernels::CodecOptions& codec,
                                      const tern::v1::ParamSpec& spec,
                                      uint64_t spec_hash, uint64_t checksum) {
  tern::v1::JoinRequest request;
  request.set_worker_id(options.worker_id);
  tern::v1::RunConfig* config = request.mutable_config();
  config->set_run_id(options.run_id);
  config->set_num_workers(options.num_workers);
  config->set_num_shards(plan.partition.num_shards());
  config->set_partition_bytes(options.partition_bytes);
  config->set_seed(options.seed);
  config->set_broadcast_start(options.broadcast_start);
  config->set_shard_assignment(
      static_cast<tern::v1::ShardAssignment>(plan.partition.assignment()));
  // Codec, clip, codec_params and the layouts the codec really writes.
  CodecToRunConfig(codec, config);
  for (const uint32_t key : plan.fp32_chunk_keys) {
    config->add_fp32_chunk_keys(key);
  }
  *request.mutable_param_spec() = spec;
  request.set_param_spec_hash(spec_hash);
  request.set_param_checksum(checksum);
  return request;
}

absl::Status CheckJoinResponses(
    const std::vector<tern::v1::JoinResponse>& responses,
    const PsClient& client, const ChunkPlan& plan, const std::string& run_id,
    const ResumePoint& resume) {
  for (uint32_t shard = 0; shard < responses.size(); ++shard) {
    const tern::v1::JoinResponse& response = responses[shard];
    // A shard past start_step completed steps without this worker having
    // applied them (it died in between, or was dropped): the worker pushes
    // them again and the shard answers from the answers it keeps.
    const uint64_t at = response.next_step();
    const uint64_t oldest = OldestKept(response);
    if (at < resume.start_step || oldest > resume.start_step) {
      return WrongStep(
          absl::StrCat("shard ", shard, " (", client.name(shard), ")"), at,
          oldest, run_id, resume);
    }
    const std::vector<uint32_t> keys(response.chunk_keys().begin(),
                                     response.chunk_keys().end());
    if (keys != plan.shard_chunks[shard]) {
      return absl::FailedPreconditionError(absl::StrCat(
          "shard ", shard, " (", client.name(shard), ") owns chunks [",
          absl::StrJoin(keys, ","), "] but this worker's partition gives it [",
          absl::StrJoin(plan.shard_chunks[shard], ","),
          "]: the shards and workers disagree on the partition"));
    }
  }
  return absl::OkStatus();
}

uint64_t CatchUpUntil(const std::vector<tern::v1::JoinResponse>& responses,
                      const ResumePoint& resume) {
  bool let_in_again = false;
  uint64_t until = UINT64_MAX;
  for (const tern::v1::JoinResponse& response : responses) {
    const uint64_t live_from = response.has_live_from_step()
                                   ? response.live_from_step()
                                   : response.next_step();
    let_in_again |= live_from > response.next_step();
    until = std::min(until, live_from);
  }
  return let_in_again ? std::max(until, resume.start_step) : resume.start_step;
}

}  // namespace tern::worker
