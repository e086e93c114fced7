// TernGrad's scaler sharing (DESIGN section 3, step 3): the worker sends
// every shard its local scalers s_ik of the TernGrad chunks that shard owns,
// and each shard answers, once all workers have sent, s_k = max_i s_ik.
// Every shard takes part, also one without TernGrad chunks (an empty list):
// the shards run the same two barriers per step whatever they own.
#ifndef TERN_WORKER_SCALER_SHARING_H_
#define TERN_WORKER_SCALER_SHARING_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "worker/chunk_plan.h"
#include "worker/ps_client.h"
#include "worker/step_metrics.h"

namespace tern::worker {

// Replaces `scalers` (by chunk key, this worker's local ones) of the chunks
// in plan.shard_scaler_chunks with the shared ones, and adds the messages'
// sizes to `record`. The shards' errors name the step; INTERNAL naming the
// shard when an answer is for another step, misses a chunk, or holds a
// chunk twice, one the shard does not share, or a negative or non-finite
// scaler.
absl::Status ShareScalers(PsClient& client, const ChunkPlan& plan,
                          uint32_t worker_id, uint64_t step,
                          std::vector<float>* scalers, StepRecord* record);

// The same with the shards in `shards` only (--overlap shares each shard's
// scalers once its gradients are complete); replaces only their chunks'
// scalers, so threads may share disjoint shards' scalers at once.
absl::Status ShareScalersWith(PsClient& client, const ChunkPlan& plan,
                              uint32_t worker_id, uint64_t step,
                              const std::vector<uint32_t>& shards,
                              std::vector<float>* scalers, StepRecord* record);

}  // namespace tern::worker

#endif  // TERN_WORKER_SCALER_SHARING_H_
