// The step of --mode=terngrad (DESIGN section 3), for TernGrad and every
// other gradient codec of section 6 over the same shard protocol. Per
// step t, with the gradients of this worker's batch in the model:
//
//   1. the gradients, laid out flat, are cut into the plan's chunks; each
//      chunk's statistics and local scaler are computed, and a non-finite
//      one stops the job (worker/local_scalers.h);
//   2. TernGrad chunks: the local scalers are shared through ShareScalers
//      with each chunk's shard, which answers s_k = max_i s_ik
//      (worker/scaler_sharing.h);
//   3. codecs with error feedback: every compressed chunk's gradient is
//      compensated in place with its residual; for dropping with
//      --drop_scope=global one threshold is selected over all of them
//      (stream (seed, t, 0xFFFFFFFF, worker id));
//   4. every chunk is encoded (TernGrad with s_k; every codec with the
//      counter-based stream (seed, t, chunk key, worker id) and the group
//      size of its tensor's rows; fp32 chunks raw, never compensated) and
//      pushed to its shard; all shards in parallel (PushPull);
//   5. the pulled aggregate of each chunk is decoded (the average over the
//      workers) into the gradient buffer and copied into param.grad();
//   6. the optimizer steps with the rate of the schedule.
//
// All workers apply the same bytes with the same code, so replicas stay
// bit-identical. On a GPU with the TernGrad codec, steps 1 and 4 run there
// (worker/device_encoder.h) and only packed bytes cross to the host.
//
// With --overlap (worker/terngrad_overlap.cc), steps 1 to 5 run per shard,
// each shard in a thread of its own, started as soon as backward has
// produced the gradient of every tensor the shard's chunks cut (tensor
// hooks; worker/shard_readiness.h); the shards are assigned in backward
// order, so the last layers' shard starts while the first layers'
// gradients are still being computed. Every chunk is encoded and decoded
// exactly as without it (the same scalers, streams and bytes), so a run
// with --overlap ends with the same parameters as one without.
#ifndef TERN_WORKER_TERNGRAD_PROTOCOL_H_
#define TERN_WORKER_TERNGRAD_PROTOCOL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "ATen/core/Tensor.h"
#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "kernels/payload.h"
#include "torch/optim/optimizer.h"
#include "worker/chunk_plan.h"
#include "worker/codec_set.h"
#include "worker/device_encoder.h"
#include "worker/param_buffer.h"
#include "worker/shard_readiness.h"
#include "worker/step_protocol.h"
#include "worker/worker_options.h"

namespace tern::worker {

class TernGradProtocol : public StepProtocol {
 public:
  // Borrows everything but `device_encoder` (null: encode on the host),
  // which it owns; what it borrows must outlive it.
  // With options.overlap, INVALID_ARGUMENT where it cannot overlap: on a
  // GPU, or with a codec that keeps error feedback (its global threshold
  // needs every chunk).
  static absl::StatusOr<std::unique_ptr<TernGradProtocol>> Create(
      const WorkerOptions& options, ParamBuffer& params, const ChunkPlan& plan,
      CodecSet& codecs, torch::optim::Optimizer& optimizer,
      std::unique_ptr<DeviceEncoder> device_encoder);
  ~TernGradProtocol() override;

  void AddToJoin(tern::v1::JoinRequest*) const override {}
  void BeforeBackward(PsClient& client, uint64_t step) override;
  absl::Status Step(PsClient& client, uint64_t step,
                    StepRecord* record) override;
  absl::Status CatchUp(PsClient& client, uint64_t step,
                       StepRecord* record) override;
  bool ReplicasIdentical() const override { return true; }
  absl::Status CheckFinal(uint64_t, uint64_t) const override {
    return absl::OkStatus();
  }

 private:
  using Pushes = std::vector<ShardRequest<tern::v1::PushPullRequest>>;

  TernGradProtocol(const WorkerOptions& options, ParamBuffer& params,
                   const ChunkPlan& plan, CodecSet& codecs,
                   torch::optim::Optimizer& optimizer,
                   std::unique_ptr<DeviceEncoder> device_encoder);

  // --- --overlap (terngrad_overlap.cc) ---
  // One shard's steps 1 to 5, on a thread of its own.
  struct ShardFlight {
    std::thread thread;
    absl::Status status;
    StepRecord record;
  };
  // A tensor's gradient hook: copies the gradient and starts the shards it
  // completes.
  void OnGradient(uint32_t tensor, const at::Tensor& gradient);
  void Launch(const std::vector<uint32_t>& shards)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(overlap_mu_);
  absl::Status RunShard(uint32_t shard, StepRecord* record);
  // Starts the shards whose tensors had no hook call (unused parameters),
  // waits for every shard and steps the optimizer.
  absl::Status FinishOverlapped(uint64_t step, StepRecord* record);
  void JoinFlights();

  // Steps 3 and 4 for one shard: its push, encoded with `scalers` (by
  // key) and `threshold`; TernGrad chunks encoded on the GPU come from
  // `device_payloads` (by key; null without a GPU).
  absl::StatusOr<tern::v1::PushPullRequest> EncodeShardPush(
      uint64_t step, uint32_t shard, const std::vector<float>& scalers,
      const std::vector<float>& local_scalers, float threshold,
      std::vector<std::optional<kernels::Payload>>* device_payloads,
      StepRecord* record) const;
  // Step 5 for one shard's answer.
  absl::Status DecodeShardPull(const PsClient& client, uint64_t step,
                               uint32_t shard, tern::v1::PushPullResponse pull,
                               StepRecord* record);
  // Step 6.
  void StepOptimizer(double lr);
  // Sends `pushes` and waits for their answers (PsClient::PushPull), adding
  // the wait to record->network_s; errors name the step.
  absl::StatusOr<std::vector<tern::v1::PushPullResponse>> Exchange(
      PsClient& client, uint64_t step, Pushes pushes, StepRecord* record);

  // Gathers the gradients: into the host buffer, or on a GPU into the
  // device buffer, which it returns (fp32 chunks also to the host).
  const float* GatherGradients();
  // Step 1: the local scalers of every chunk.
  absl::StatusOr<std::vector<float>> Scalers(uint64_t step,
                                             const float* device_gradients);
  // Steps 3 and 4: every shard's push, with the shared `scalers` and this
  // worker's own `local_scalers` s_ik (the clip bounds of
  // ClipRule::kWorker).
  absl::StatusOr<Pushes> EncodePushes(uint64_t step,
                                      const float* device_gradients,
                                      const std::vector<float>& scalers,
                                      const std::vector<float>& local_scalers,
                                      StepRecord* record);
  // The TernGrad pushes of every compressed chunk, encoded on the GPU from
  // `gradients` (the flat device buffer), by chunk key.
  absl::StatusOr<std::vector<std::optional<kernels::Payload>>> EncodeOnDevice(
      uint64_t step, const float* gradients, const std::vector<float>& scalers,
      const std::vector<float>& local_scalers);
  // Steps 5 and 6: decodes the shards' answers and steps the optimizer.
  absl::Status Apply(const PsClient& client, uint64_t step,
                     std::vector<tern::v1::PushPullResponse> pulls,
                     StepRecord* record);
  // Step 5: the shards' answers into the gradient buffer (their bytes move
  // out of `pulls`, which are read once).
  absl::Status DecodePulls(const PsClient& client, uint64_t step,
                           std::vector<tern::v1::PushPullResponse> pulls,
                           StepRecord* record);

  const WorkerOptions& options_;
  ParamBuffer& params_;
  const ChunkPlan& plan_;
  CodecSet& codecs_;
  torch::optim::Optimizer& optimizer_;
  // TernGrad's kernels on the GPU (null on the CPU, and for other codecs,
  // which encode on the host).
  const std::unique_ptr<DeviceEncoder> device_encoder_;
  // TernGrad shares scalers; the other codecs do not.
  const bool share_scalers_;

  // --overlap: null without it. The hooks (on the backward thread) and the
  // shards' threads share what overlap_mu_ guards; each shard's thread
  // writes only its own chunks of the buffers and of scalers_.
  std::unique_ptr<ShardReadiness> readiness_;
  absl::Mutex overlap_mu_;
  bool armed_ ABSL_GUARDED_BY(overlap_mu_) = false;
  PsClient* client_ = nullptr;
  uint64_t step_ = 0;
  std::vector<ShardFlight> flights_;
  // By chunk key: the local scalers, replaced by the shared ones.
  std::vector<float> scalers_;
  std::vector<float> local_scalers_;
};

}  // namespace tern::worker

#endif  // TERN_WORKER_TERNGRAD_PROTOCOL_H_
