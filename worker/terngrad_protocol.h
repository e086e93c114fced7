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
#ifndef TERN_WORKER_TERNGRAD_PROTOCOL_H_
#define TERN_WORKER_TERNGRAD_PROTOCOL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/payload.h"
#include "torch/torch.h"
#include "worker/chunk_plan.h"
#include "worker/codec_set.h"
#include "worker/device_encoder.h"
#include "worker/param_buffer.h"
#include "worker/step_protocol.h"
#include "worker/worker_options.h"

namespace tern::worker {

class TernGradProtocol : public StepProtocol {
 public:
  // Borrows everything but `device_encoder` (null: encode on the host),
  // which it owns; what it borrows must outlive it.
  TernGradProtocol(const WorkerOptions& options, ParamBuffer& params,
                   const ChunkPlan& plan, CodecSet& codecs,
                   torch::optim::Optimizer& optimizer,
                   std::unique_ptr<DeviceEncoder> device_encoder);

  void AddToJoin(tern::v1::JoinRequest*) const override {}
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
};

}  // namespace tern::worker

#endif  // TERN_WORKER_TERNGRAD_PROTOCOL_H_
