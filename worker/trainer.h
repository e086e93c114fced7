// The training loop of `tern worker` in TernGrad mode (DESIGN section 3),
// with every other codec of section 6 over the same protocol: fp32 and
// fp16, and the compressors onebit, threshold, adaptive, dropping (with
// error feedback) and qsgd. Per step t:
//
//   1. forward and backward on this worker's batch (cross-entropy);
//   2. the gradients, laid out flat, are cut into the plan's chunks; each
//      chunk's statistics are computed, and a non-finite one stops the job
//      (the NaN policy: a worker never pushes NaN or Inf; it stops with an
//      error naming the step and the tensor, and the shards' barriers then
//      time out for the other workers);
//   3. TernGrad chunks: local scaler s_ik = LocalScaler(stats, clip), shared
//      through ShareScalers with the chunk's shard, which answers
//      s_k = max_i s_ik;
//   4. codecs with error feedback (kernels/error_feedback.h): every
//      compressed chunk's gradient is compensated in place with its
//      residual; for dropping with --drop_scope=global one threshold is
//      selected over all of them (stream (seed, t, 0xFFFFFFFF, worker id));
//   5. every chunk is encoded (TernGrad with s_k; every codec with the
//      counter-based stream (seed, t, chunk key, worker id) and the group
//      size of its tensor's rows; fp32 chunks raw, never compensated) and
//      pushed to its shard; all shards in parallel;
//   6. the pulled aggregate of each chunk is decoded (the average over the
//      workers) into the gradient buffer and copied into param.grad();
//   7. the optimizer steps with the rate of the schedule.
//
// All workers apply the same bytes with the same code, so replicas stay
// bit-identical; the parameter checksum proves it at join and every
// check_every steps.
//
// --mode=weightgrad|gaia (DESIGN section 4; server/WEIGHTGRAD.md): the one
// shard is the data center's local parameter server (LPS), which holds the
// weights and runs the optimizer. Worker 0 sends the initial weights at
// join, with the optimizer settings in the RunConfig. Per step: forward and
// backward; the NaN check; each chunk encoded (weightgrad: TernGrad with
// this worker's own scaler s_ik, no scaler sharing; gaia and fp32 chunks:
// fp32) and pushed; the answer's weights (ternary, int8 or fp32) decoded
// and loaded into the model; no local optimizer step. Replicas differ by
// design (each draws its own stochastic weights), so there is no
// CheckParams: the answer to the last step is the LPS's final model in
// fp32 with its checksum, which the worker checks its loaded weights
// against, records and logs.
//
// Checkpoints (--checkpoint_dir, TernGrad mode): every --checkpoint_every
// steps and after the last one, the worker writes its parameters, optimizer
// state, error-feedback residuals, next step and data position
// (worker/checkpoint.h). Create restores them when the file exists; Join
// then accepts shards at the checkpoint's next step C, or at C + 1 (they
// completed step C, and answer this worker's repeated push of it from
// their retry cache, so the replica comes back bit-identical). Without a
// checkpoint C is 0. A shard further ahead or behind is refused, naming
// both steps.
//
// Ownership and threads: a Trainer owns its model, data, optimizer and
// buffers and borrows the PsClient and MetricsWriter given to Run. Run is
// called once, from one thread. Several Trainers may run in one process
// (the tests run workers as threads).
#ifndef TERN_WORKER_TRAINER_H_
#define TERN_WORKER_TRAINER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/logging.h"
#include "common/lr_schedule.h"
#include "kernels/codec.h"
#include "kernels/codec_options.h"
#include "kernels/error_feedback.h"
#include "kernels/terngrad.h"
#include "tern/v1/parameter_server.pb.h"
#include "torch/torch.h"
#include "worker/chunk_plan.h"
#include "worker/datasets.h"
#include "worker/device_encoder.h"
#include "worker/models.h"
#include "worker/param_buffer.h"
#include "worker/ps_client.h"
#include "worker/step_metrics.h"
#include "worker/worker_options.h"

namespace tern::worker {

// Test-set accuracy (0..1) and mean cross-entropy.
struct Evaluation {
  double accuracy = 0;
  double loss = 0;
};

// Evaluates `model` on `data` in batches of `batch_size`, without gradients,
// on the device of the model's parameters. Leaves the model in training
// mode.
Evaluation Evaluate(Model& model, const Dataset& data, int64_t batch_size);

class Trainer {
 public:
  // `model` must have been built right after torch::manual_seed(seed) so
  // that every worker starts from the same parameters. INVALID_ARGUMENT for
  // options that do not fit the model (unknown --fp32_tensors, an unknown
  // codec or schedule, a model too large for the shards' messages).
  //
  // `encoder`, when given, replaces the --device's TernGrad encoder (tests
  // run the GPU path's bookkeeping with one that reads host memory).
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(
      const WorkerOptions& options, std::shared_ptr<Model> model,
      TrainTest data, Logger logger,
      std::unique_ptr<DeviceEncoder> encoder = nullptr);

  // The size bound of messages to and from the shards for this model
  // (PsClientOptions::max_message_bytes).
  int max_message_bytes() const { return max_message_bytes_; }
  const ChunkPlan& plan() const { return plan_; }
  const ParamBuffer& params() const { return params_; }

  // The step Run starts at: 0, or a restored checkpoint's next step.
  uint64_t start_step() const { return start_step_; }

  // The Join request this worker sends every shard (shard_index aside).
  tern::v1::JoinRequest MakeJoinRequest() const;

  // Joins the shards, trains options.steps steps, evaluates and checks at
  // the end. `metrics` may be null. Errors name the step they happened in.
  absl::Status Run(PsClient& client, MetricsWriter* metrics);

  // The evaluation and checksum of the last step, once Run returned OK.
  const std::optional<Evaluation>& final_evaluation() const {
    return final_evaluation_;
  }
  uint64_t final_checksum() const { return final_checksum_; }

 private:
  struct StepTimes {
    double compute_s = 0, encode_s = 0, network_s = 0, decode_s = 0;
  };
  // The run's codec and what goes with it.
  struct Codecs {
    kernels::CodecOptions options;
    // The run codec; null when `feedback` owns it (UsesErrorFeedback()).
    std::unique_ptr<kernels::Codec> run;
    std::unique_ptr<kernels::ErrorFeedback> feedback;
    std::unique_ptr<kernels::Codec> fp32;
    // By chunk key: EncodeContext::group_size, the row length of the
    // chunk's tensor (kernels::ColumnGroupSize).
    std::vector<uint64_t> group_sizes;
    // weightgrad/gaia: decoders of the LPS's weights, by codec.
    std::map<kernels::CodecId, std::unique_ptr<kernels::Codec>> weights;
  };

  Trainer(const WorkerOptions& options, std::shared_ptr<Model> model,
          TrainTest data, Logger logger, ParamBuffer params, ChunkPlan plan,
          LrSchedule schedule, Codecs codecs,
          std::unique_ptr<torch::optim::Optimizer> optimizer,
          torch::Device device, std::unique_ptr<DeviceEncoder> device_encoder,
          int max_message_bytes);

  absl::Status Join(PsClient& client);
  // Restores options_.checkpoint_dir's checkpoint of this worker, if there
  // is one, and sets start_step_. FAILED_PRECONDITION when it belongs to
  // another run, worker or model; DATA_LOSS when it does not read back.
  absl::Status RestoreCheckpoint();
  // Writes the checkpoint whose next step is `next_step`.
  absl::Status SaveCheckpoint(uint64_t next_step) const;
  // One synchronous step; fills the traffic and timing fields of `record`.
  absl::Status Step(PsClient& client, uint64_t step, StepRecord* record);
  // The step of --mode=weightgrad|gaia: push the gradient, load the weights.
  absl::Status LpsStep(PsClient& client, uint64_t step, StepRecord* record);
  // Stats and local scalers of every chunk; FAILED_PRECONDITION on a
  // non-finite gradient. With `device_stats` (one per chunk, from the GPU)
  // the host buffer is not read.
  absl::Status ComputeScalers(
      uint64_t step, std::vector<float>* scalers,
      const std::vector<kernels::ChunkStats>* device_stats = nullptr) const;
  // The TernGrad pushes of every compressed chunk, encoded on the GPU from
  // `gradients` (the flat device buffer), by chunk key.
  absl::StatusOr<std::vector<std::optional<kernels::Payload>>>
  EncodeOnDevice(uint64_t step, const float* gradients,
                 const std::vector<float>& scalers);
  // Error feedback: adds each compressed chunk's residual to its gradient
  // in place; returns dropping's global threshold (0: each chunk selects
  // its own).
  absl::StatusOr<float> Compensate(uint64_t step);
  const kernels::Codec& RunCodec() const;
  const kernels::Codec& CodecOf(uint32_t chunk_key) const;

  const WorkerOptions options_;
  std::shared_ptr<Model> model_;
  TrainTest data_;
  Logger logger_;
  ParamBuffer params_;
  ChunkPlan plan_;
  LrSchedule schedule_;
  Codecs codecs_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  // Where the model trains (--device), and TernGrad's kernels there (null
  // on the CPU, and for other codecs, which encode on the host).
  const torch::Device device_;
  std::unique_ptr<DeviceEncoder> device_encoder_;
  ShardedBatches batches_;
  const int max_message_bytes_;
  const bool share_scalers_;
  // --mode=weightgrad|gaia.
  const bool lps_mode_;
  // The weights the LPS answered with, flat (lps_mode_).
  std::vector<float> weights_;
  // The LPS's checksum from the answer to the last step (lps_mode_).
  uint64_t lps_checksum_ = 0;

  // --checkpoint_dir's file for this worker; empty: no checkpoints.
  const std::string checkpoint_path_;
  uint64_t start_step_ = 0;

  std::optional<Evaluation> final_evaluation_;
  uint64_t final_checksum_ = 0;
};

}  // namespace tern::worker

#endif  // TERN_WORKER_TRAINER_H_
