// The identical start copied from worker 0 (--broadcast_start; the
// tern.torch.broadcast_parameters of python/tern): worker 0 sends each shard
// its parameters of that shard's chunks with its join, and every worker
// loads what the shards hand back, then checks the whole against worker 0's
// checksum. Without it every worker builds its own start (same seed, same
// file) and the shards compare the checksums.
#ifndef TERN_WORKER_START_BROADCAST_H_
#define TERN_WORKER_START_BROADCAST_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "kernels/codec.h"
#include "tern/v1/parameter_server.pb.h"
#include "worker/chunk_plan.h"
#include "worker/param_buffer.h"

namespace tern::worker {

// Adds the fp32 RAW values of `params` of every chunk to the request of the
// chunk's shard (`per_shard`, in shard order, one per shard of the plan):
// worker 0's start, which an LPS always starts from and TernGrad shards
// hand out under broadcast_start.
void AddStartWeights(const ChunkPlan& plan, const ParamBuffer& params,
                     const kernels::Codec& fp32,
                     std::vector<tern::v1::JoinRequest>* per_shard);

// One join request per shard (shard order): `base` with, for worker 0,
// its start (AddStartWeights).
std::vector<tern::v1::JoinRequest> JoinRequestsWithStart(
    const tern::v1::JoinRequest& base, const ChunkPlan& plan,
    const ParamBuffer& params, const kernels::Codec& fp32);

// Whose weights a JoinResponse carries, for LoadStart's messages.
struct StartSource {
  // "worker 0's": --broadcast_start; "the restarted LPS's": a rejoin.
  absl::string_view whose = "worker 0's";
  // Said when a shard sent no weights at all.
  absl::string_view missing_hint =
      " (does every worker of the run set --broadcast_start?)";
};

// Loads the weights of the shards' answers (worker 0's start, or a resumed
// LPS's weights) into `params` (and so into the model's tensors).
// FAILED_PRECONDITION when a shard sent none or not its chunks, or when the
// loaded parameters' checksum is not the answers'; INVALID_ARGUMENT for
// values that do not decode.
absl::Status LoadStart(const std::vector<tern::v1::JoinResponse>& responses,
                       const ChunkPlan& plan, const kernels::Codec& fp32,
                       ParamBuffer* params, const StartSource& source = {});

}  // namespace tern::worker

#endif  // TERN_WORKER_START_BROADCAST_H_
