// Joining the shards (DESIGN sections 2 and 7): the request every worker
// sends (its run configuration, ParamSpec and parameter checksum), and the
// check of the shards' answers: they must own the chunks this worker's
// partition gives them and be at the step this worker resumes at.
//
// A worker resumes at the next step C of its checkpoint (0 without one).
// It accepts shards at C, or ahead of C as far as the answers they keep
// reach (JoinResponse.oldest_kept_step, --catch_up_mb): it pushes the
// steps from C again and the shards answer them from what they kept, so
// the replica comes back bit-identical. Without oldest_kept_step (the
// LPS), C + 1 at most. A shard further ahead or behind is refused, naming
// both steps.
//
// A worker dropped by --on_worker_loss=shrink and let in again is counted
// by each shard from its live_from_step on (the step after the shard's
// open one); it catches up until then (CatchUpUntil).
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
// The steps from resume.start_step up to the returned one are caught up
// on without computing a gradient (StepProtocol::CatchUp): the lowest
// live_from_step of `responses` where a shard let this worker in again
// after dropping it (live_from_step above next_step); otherwise
// resume.start_step (a restarted worker's pushes of those steps were
// counted, and it computes them again so that its own state, data position
// and residuals, is the undisturbed run's).
uint64_t CatchUpUntil(const std::vector<tern::v1::JoinResponse>& responses,
                      const ResumePoint& resume);

absl::Status CheckJoinResponses(
    const std::vector<tern::v1::JoinResponse>& responses,
    const PsClient& client, const ChunkPlan& plan, const std::string& run_id,
    const ResumePoint& resume);

}  // namespace tern::worker

#endif  // TERN_WORKER_JOIN_H_
