// TernGrad's push-pull on one shard (DESIGN section 3, step 4): each worker
// pushes every chunk of the shard for the open step, the shard adds them,
// and once all N have pushed every caller gets the aggregate of each chunk.
//
// A push is handled in three phases (Aggregator::PushPull):
//   1. under the shard's lock: admission (core/admission.h) and MatchChunks;
//      the worker is then in flight;
//   2. without it: CheckPush validates every chunk (core::ValidatePayload)
//      and decodes each ONCE, keeping the decoded values (CheckedPush);
//      then AddPush adds them chunk by chunk under each chunk's own lock.
//      Nothing is added unless every chunk is valid;
//   3. under the shard's lock again: the push counts, and the last one
//      completes the step (PushBarrier::Complete).
// TernGrad chunks are never decoded: their header and shared scaler are
// checked, their codes validated (kernels' UnpackTernary), and the codes
// summed as they are (the codec's Add). Other codecs' chunks are decoded
// once (core::DecodeFinite, which also refuses NaN/Inf) and the decoded
// values added (FloatAggregation::AddDecoded).
#ifndef TERN_SERVER_PUSH_PULL_H_
#define TERN_SERVER_PUSH_PULL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/admission.h"
#include "core/barrier.h"
#include "kernels/decoded_values.h"
#include "server/messages.h"
#include "server/scaler_barrier.h"
#include "server/shard_run.h"

namespace tern::server {

// A push's chunks matched to the shard's, in the push's order.
struct MatchedPush {
  std::vector<ShardChunk*> chunks;
  // The shared scaler of each TernGrad chunk (0 for the others).
  std::vector<float> shared_scalers;
  // The worker's slot in the step's aggregations (ActiveWorkers::Slot).
  uint32_t slot = 0;
};

// What CheckPush keeps of a valid push: by chunk, the decoded values, or
// nothing for TernGrad chunks (their codes are added as they are).
struct CheckedPush {
  std::vector<kernels::DecodedValues> values;
};

// Under the shard's lock: INVALID_ARGUMENT for more chunks than the shard
// owns (before anything is sized from the count), a chunk the shard does
// not own, a chunk pushed twice or a chunk missing. `shared` holds the open
// step's shared scalers (null only when the shard has no TernGrad chunk).
absl::StatusOr<MatchedPush> MatchChunks(const PushRequest& request,
                                        const ShardRun& run,
                                        const ScalerAnswer& shared,
                                        uint32_t shard_index);

// Without the shard's lock: validates every chunk and decodes it once;
// INVALID_ARGUMENT "step 0: chunk 1 of worker 0: <what>" for the first
// invalid one. Thread-safe (reads only what never changes).
absl::StatusOr<CheckedPush> CheckPush(const PushRequest& request,
                                      const MatchedPush& matched);

// Adds a checked push chunk by chunk, each under its chunk's lock. On error
// `*added` tells how many chunks were added before it (0: nothing changed).
absl::Status AddPush(const PushRequest& request, const MatchedPush& matched,
                     CheckedPush checked, size_t* added);

// The push side of the open step. Not thread-safe: the Aggregator's mutex
// guards it.
struct PushBarrier {
  explicit PushBarrier(uint32_t num_workers) : pushed(num_workers) {}

  // Finishes every chunk's aggregation into the answer of step `open` and
  // opens each chunk for `open + 1`; INTERNAL when a codec cannot build an
  // aggregate (the run cannot go on). The caller answers the waiters.
  static absl::StatusOr<PushAnswer> Complete(ShardRun& run, uint64_t open,
                                             uint32_t num_workers);

  core::ArrivalSet pushed;
  core::WaiterList<PushAnswer> waiters;
  core::AnswerCache<PushAnswer> answers{1};  // the step just completed
};

}  // namespace tern::server

#endif  // TERN_SERVER_PUSH_PULL_H_
