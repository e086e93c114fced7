// Joining the shards (DESIGN sections 2 and 7): the request every worker
// sends (its run configuration, ParamSpec and parameter checksum), and the
// check of the shards' answers: they must own the chunks this worker's
// partition gives them and be at the step this worker resumes at.
//
// A worker resumes at the next step C of its checkpoint (0 without one).
// It accepts shards at C, or at C + 1 (they completed step C, and answer
// this worker's repeated push of it from their retry cache, so the replica
// comes back bit-identical). A shard further ahead or behind is refused,
// naming both steps.
#ifndef TERN_WORKER_JOIN_H_
#define TERN_WORKER_JOIN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kernels/codec_options.h"
#include "tern/v1/parameter_server.pb.h"
#include "worker/chunk_plan.h"
#include "worker/ps_client.h"
#include "worker/worker_options.h"

namespace tern::worker {

// The Join request of worker options.worker_id (shard_index aside): the
// run's configuration with the codec `codec` (and the layouts it writes),
// the plan's fp32 chunks, the model's `spec` with its hash, and the
// checksum of its parameters. The step protocol adds its own part
// (StepProtocol::AddToJoin).
tern::v1::JoinRequest BaseJoinRequest(const WorkerOptions& options,
                                      const ChunkPlan& plan,
                                      const kernels::CodecOptions& codec,
                                      const tern::v1::ParamSpec& spec,
                                      uint64_t spec_hash, uint64_t checksum);

// Where this worker resumes.
struct ResumePoint {
  // The checkpoint's next step; 0 without one.
  uint64_t start_step = 0;
  // The worker's checkpoint file; empty without --checkpoint_dir.
  std::string checkpoint_path;
};

// Checks the shards' `responses` (in shard order, as `client` names them).
// FAILED_PRECONDITION naming the shard when one is at a step this worker
// cannot continue from (with what to do about it), or owns other chunks
// than plan.shard_chunks gives it.
absl::Status CheckJoinResponses(
    const std::vector<tern::v1::JoinResponse>& responses,
    const PsClient& client, const ChunkPlan& plan, const std::string& run_id,
    const ResumePoint& resume);

}  // namespace tern::worker

#endif  // TERN_WORKER_JOIN_H_
