// The parameters of one WeightGrad local parameter server (LPS) shard
// (DESIGN section 4; Akter & Adnan, KDD 2020, Algorithm 4), as a plain
// class: no protobuf, no gRPC. server/WEIGHTGRAD.md states the update rule,
// the step semantics and every decision the paper leaves open.
//
// The shard holds, for each chunk it owns, the full-precision weights W,
// the momentum buffer v and how many gradients it has applied. Each
// worker's (decoded) gradient is applied on its own the moment it arrives:
// one momentum-SGD step per gradient, no averaging over workers.
//
// Steps: worker i's gradients are numbered by its step t. A *local step* t
// completes once every one of the N workers has had its step-t gradient of
// every chunk applied; completed_steps() counts them, and the gradient
// synchronizer (server/gradient_synchronizer.h) counts its rounds in local
// steps. Per (worker, chunk) steps are applied in order, each once; a
// worker may run at most `max_lead_steps` steps ahead of the oldest
// incomplete local step (its answer comes at once, so it can push step t+1
// before a slower worker has pushed step t).
//
// Thread safety: thread-compatible. The LPS applies gradients one at a time
// (Algorithm 4), so its service holds one mutex around this object and its
// synchronizer; spans returned by the accessors stay valid as long as the
// LpsState lives (chunk buffers are never reallocated), and see every later
// change.
#ifndef TERN_SERVER_LPS_STATE_H_
#define TERN_SERVER_LPS_STATE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/lr_schedule.h"
#include "common/partitioner.h"
#include "common/philox.h"
#include "kernels/codec.h"
#include "kernels/payload.h"

namespace tern::server {

// The scaler the LPS ternarizes a chunk of its own with (its weights W, or
// its update U): TernGrad's local scaler min(clip * sigma, max|x|) over the
// finite values, or max|x| when that is 0. A constant chunk (one element,
// or a BatchNorm scale of ones) has sigma = 0, and the clipped scaler would
// send it as 0 forever; with s = max|x| its ternary is exact. 0 only for an
// all-zero chunk.
float OwnTernaryScaler(absl::Span<const float> values, float clip);

struct LpsStateOptions {
  // N: the workers of this data center, ids [0, N).
  uint32_t num_workers = 1;
  // Heavy-ball momentum m in [0, 1) and L2 weight decay lambda >= 0.
  float momentum = 0.9f;
  float weight_decay = 0.0f;
  // --weight_codec: how QuantizedWeights encodes W for the workers:
  // kTernGrad ("ternary", {-a, 0, +a} per chunk, the default), kInt8 or
  // kFp32.
  kernels::CodecId weight_codec = kernels::CodecId::kTernGrad;
  // Ternary weights: TernGrad's clipping at clip * sigma for the chunk's
  // own scaler (0 disables it), and the layout (TERNARY_2BIT or
  // TERNARY_BASE3).
  float weight_clip = 2.5f;
  kernels::Layout ternary_layout = kernels::Layout::kTernary2Bit;
  // How many steps a worker may be ahead of the oldest incomplete local
  // step (0: fully synchronous, a worker's step t+1 waits for local step t).
  uint32_t max_lead_steps = 1;
};

// One chunk the shard owns, with its initial weights W0.
struct LpsChunk {
  uint32_t key = 0;
  std::vector<float> weights;
};

// What a restarted LPS needs of its LpsState (server/lps_state_file.h):
// per chunk W, v, the applied count and each worker's next step; the
// completed local steps and the open steps' counts.
struct LpsChunkSnapshot {
  uint32_t key = 0;
  std::vector<float> weights;
  std::vector<float> momentum;
  uint64_t applied = 0;
  std::vector<uint64_t> next_step;  // by worker
};
struct LpsStateSnapshot {
  std::vector<LpsChunkSnapshot> chunks;  // in key order
  uint64_t completed_steps = 0;
  std::map<uint64_t, uint64_t> step_counts;
};

struct ApplyResult {
  // True when this gradient was the last one of its local step.
  bool step_completed = false;
  // completed_steps() after the call.
  uint64_t completed_steps = 0;
};

class LpsState {
 public:
  // INVALID_ARGUMENT for options that cannot work (no workers, momentum
  // outside [0, 1), a negative or non-finite decay or clip, a weight codec
  // other than ternary / int8 / fp32), no chunks, duplicate keys, or a
  // non-finite initial weight.
  static absl::StatusOr<std::unique_ptr<LpsState>> Create(
      const LpsStateOptions& options, LrSchedule lr_schedule,
      std::vector<LpsChunk> chunks);

  // The chunks `shard` owns in `partition`, cut from the model's initial
  // weights laid out flat (Chunk::flat_offset), as every process computes
  // them. INVALID_ARGUMENT when `flat_weights` does not have
  // partition.total_elements() values or the shard is out of range.
  static absl::StatusOr<std::unique_ptr<LpsState>> CreateForShard(
      const LpsStateOptions& options, LrSchedule lr_schedule,
      const Partition& partition, uint32_t shard,
      absl::Span<const float> flat_weights);

  // The state `snapshot` describes, as Snapshot() took it. INVALID_ARGUMENT
  // naming what does not fit: Create's checks, a momentum of another length
  // than its weights, a non-finite momentum, a next step per worker count
  // other than num_workers, or a next step outside the open local steps.
  static absl::StatusOr<std::unique_ptr<LpsState>> Restore(
      const LpsStateOptions& options, LrSchedule lr_schedule,
      LpsStateSnapshot snapshot);
  LpsStateSnapshot Snapshot() const;

  LpsState(const LpsState&) = delete;
  LpsState& operator=(const LpsState&) = delete;

  // One momentum-SGD step with worker `worker`'s gradient g of chunk `key`
  // for its step `step`, at once (Algorithm 4, line 4), with
  // lr = LearningRate(step):
  //   v <- m * v + (g + lambda * W);   W <- W - lr * v
  // (float arithmetic, element by element, in this order).
  // Nothing is applied unless every check passes:
  //   INVALID_ARGUMENT: worker out of range, unknown chunk, wrong length, a
  //     non-finite gradient value (the push is rejected; DESIGN section 7);
  //   ALREADY_EXISTS: this (worker, chunk, step) was applied already (a
  //     retry; the caller answers it with the current weights);
  //   FAILED_PRECONDITION: a step that skips one of this worker's steps, or
  //     one more than max_lead_steps ahead of the open local step.
  absl::StatusOr<ApplyResult> ApplyGradient(uint32_t worker, uint64_t step,
                                            uint32_t key,
                                            absl::Span<const float> gradient);

  // The chunk's current weights encoded with the weight codec: ternary with
  // the chunk's own scaler (OwnTernaryScaler), stochastic rounding
  // drawn from `stream` (unbiased up to the clipping); int8 with scale
  // max|W| / 127, deterministic; or fp32, exact. INVALID_ARGUMENT for an
  // unknown chunk.
  absl::StatusOr<kernels::Payload> QuantizedWeights(
      uint32_t key, const RandomStream& stream) const;

  // The checksum (common/checksum.h) of the raw little-endian float32
  // bytes of W, chunk after chunk in key order: for a shard that owns every
  // chunk, the same value as the worker's ParamBuffer::Checksum() of the
  // same weights.
  uint64_t Checksum() const;

  // The shard's chunk keys, ascending.
  const std::vector<uint32_t>& chunk_keys() const { return keys_; }
  bool HasChunk(uint32_t key) const { return index_.contains(key); }
  // INVALID_ARGUMENT for an unknown chunk.
  absl::StatusOr<absl::Span<const float>> Weights(uint32_t key) const;
  absl::StatusOr<absl::Span<const float>> Momentum(uint32_t key) const;
  // How many gradients have been applied to the chunk (its step count).
  absl::StatusOr<uint64_t> AppliedCount(uint32_t key) const;
  // Write access to W for the gradient synchronizer, which moves every
  // data center to the global average (W += A - U_sent).
  absl::StatusOr<absl::Span<float>> MutableWeights(uint32_t key);

  // The step of `worker`'s next gradient (of every chunk: a push applies
  // all of them); 0 for a worker out of range.
  uint64_t NextStep(uint32_t worker) const;
  // Local steps every worker has completed; the open step is this number.
  uint64_t completed_steps() const { return completed_steps_; }
  // The LR schedule's rate for local step `step`.
  double LearningRate(uint64_t step) const { return lr_schedule_.Rate(step); }
  // ||v||_2 over every chunk of the shard (the paper's momentum norm,
  // Appendix A.2).
  double MomentumNorm() const;
  const LpsStateOptions& options() const { return options_; }
  uint64_t total_elements() const { return total_elements_; }

 private:
  struct ChunkState {
    uint32_t key = 0;
    std::vector<float> weights;
    std::vector<float> momentum;
    uint64_t applied = 0;
    // By worker: the step of its next gradient of this chunk.
    std::vector<uint64_t> next_step;
  };

  LpsState(const LpsStateOptions& options, LrSchedule lr_schedule,
           std::unique_ptr<kernels::Codec> weight_codec)
      : options_(options),
        lr_schedule_(lr_schedule),
        weight_codec_(std::move(weight_codec)) {}

  // INVALID_ARGUMENT naming the key when the shard does not own it.
  absl::StatusOr<size_t> IndexOf(uint32_t key) const;
  // The index of `key`'s chunk when worker `worker`'s gradient for `step`
  // may be applied there now; ALREADY_EXISTS for a retry of a step applied
  // already, another error for a gradient that does not fit (ApplyGradient).
  absl::StatusOr<size_t> CheckGradient(uint32_t worker, uint64_t step,
                                       uint32_t key,
                                       absl::Span<const float> gradient) const;

  const LpsStateOptions options_;
  const LrSchedule lr_schedule_;
  const std::unique_ptr<kernels::Codec> weight_codec_;

  std::vector<ChunkState> chunks_;  // in key order
  std::vector<uint32_t> keys_;
  absl::flat_hash_map<uint32_t, size_t> index_;
  uint64_t total_elements_ = 0;

  uint64_t completed_steps_ = 0;
  // Step -> gradients applied for it, for the open steps only; a step is
  // complete at N * (number of chunks).
  std::map<uint64_t, uint64_t> step_counts_;
};

}  // namespace tern::server

#endif  // TERN_SERVER_LPS_STATE_H_
