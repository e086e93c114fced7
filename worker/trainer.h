// The training loop of `tern worker`: per step, forward and backward on
// this worker's batch (--loss, worker/loss.h), then the mode's exchange with
// the servers (worker/step_protocol.h: TernGradProtocol for --mode=terngrad
// and every gradient codec, LpsProtocol for --mode=weightgrad|gaia), then what
// every mode shares: evaluation every --eval_every steps, the parameter
// check, checkpoints and progress lines.
//
// The check: in --mode=terngrad all workers apply the same bytes with the
// same code, so replicas stay bit-identical, and the parameter checksum
// proves it at join and every --check_every steps (CheckParams). In the LPS
// modes replicas differ by design; the answer to the last step is the
// LPS's final model in fp32 with its checksum, which the worker checks its
// loaded weights against, records and logs.
//
// Checkpoints (--checkpoint_dir, --mode=terngrad): every --checkpoint_every
// steps and after the last one, the worker writes its parameters, optimizer
// state, error-feedback residuals, next step and data position
// (worker/replica_checkpoint.h). Create restores them when the file exists;
// Join then accepts shards at the checkpoint's next step C, or at C + 1
// (worker/join.h). Without a checkpoint C is 0.
//
// Servers that restart behind the worker (an LPS resumed from its
// --state_dir): a step that fails is handed to the protocol's Recover,
// which may rejoin with the first join's request and name the step to
// continue at, possibly a lower one; the loop then trains on from there.
// The data stream does not rewind, and the redone steps' records are
// written again (a record's step may repeat in --metrics_out). After 10
// recoveries in a row without a completed step, Run gives up.
//
// Ownership and threads: a Trainer owns its model, data, optimizer, codecs,
// buffers and step protocol, and borrows the PsClient and MetricsWriter
// given to Run. Run is called once, from one thread. Several Trainers may
// run in one process (the tests run workers as threads).
#ifndef TERN_WORKER_TRAINER_H_
#define TERN_WORKER_TRAINER_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "common/logging.h"
#include "common/lr_schedule.h"
#include "tern/v1/parameter_server.pb.h"
#include "torch/optim/optimizer.h"
#include "worker/chunk_plan.h"
#include "worker/codec_set.h"
#include "worker/datasets.h"
#include "worker/device_encoder.h"
#include "worker/loss.h"
#include "worker/models.h"
#include "worker/param_buffer.h"
#include "worker/parameter_average.h"
#include "worker/ps_client.h"
#include "worker/replica_checkpoint.h"
#include "worker/step_metrics.h"
#include "worker/step_protocol.h"
#include "worker/worker_metrics.h"
#include "worker/worker_options.h"

namespace tern::worker {

// Test-set accuracy (0..1; NaN where it means nothing: --loss=mse, a
// model's own loss) and mean loss.
struct Evaluation {
  double accuracy = 0;
  double loss = 0;
};

// Evaluates `model` on `data` in batches of `batch_size`, without gradients,
// on the device of the model's parameters. Leaves the model in training
// mode.
Evaluation Evaluate(Model& model, const Dataset& data, int64_t batch_size,
                    LossKind loss = LossKind::kCrossEntropy);

class Trainer {
 public:
  // `model` must have been built right after torch::manual_seed(seed) (or
  // loaded from the same file) so that every worker starts from the same
  // parameters. INVALID_ARGUMENT too for a model whose output does not fit
  // the training targets and --loss (CheckModelFitsData). INVALID_ARGUMENT for
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
  // the end. `metrics` (the JSONL file) and `live` (the Prometheus
  // metrics, which see the same records) may be null. Errors name the step
  // they happened in.
  absl::Status Run(PsClient& client, MetricsWriter* metrics,
                   WorkerMetrics* live = nullptr);

  // The evaluation and checksum of the last step, once Run returned OK.
  const std::optional<Evaluation>& final_evaluation() const {
    return final_evaluation_;
  }
  uint64_t final_checksum() const { return final_checksum_; }

 private:
  Trainer(const WorkerOptions& options, std::shared_ptr<Model> model,
          TrainTest data, Logger logger, ParamBuffer params, ChunkPlan plan,
          LrSchedule schedule, CodecSet codecs,
          std::unique_ptr<torch::optim::Optimizer> optimizer,
          torch::Device device, LossKind loss, int max_message_bytes);

  // The ParamSpec hash the shards compare: a loaded model's file hash,
  // else the ParamSpec's.
  uint64_t SpecHash() const;
  // Builds protocol_ for options_.mode; `encoder` is TernGrad's on the GPU
  // (null: encode on the host).
  absl::Status MakeProtocol(std::unique_ptr<DeviceEncoder> encoder);
  // The state a checkpoint saves and restores.
  ReplicaState Replica();
  absl::Status Join(PsClient& client);
  // Step `step`, below catch_up_until_: applies the shards' kept answers
  // (StepProtocol::CatchUp) and logs the catch-up's end; the step then
  // finishes as any other (checks, checkpoint, record).
  absl::Status CatchUp(PsClient& client, uint64_t step, StepRecord* rec);
  // Step `step` failed with `failed`: the step the loop continues at, from
  // the protocol's Recover, which `recoveries` (those since the last
  // completed step) bounds.
  absl::StatusOr<uint64_t> Recover(PsClient& client, uint64_t step,
                                   const absl::Status& failed, int* recoveries);
  // Forward and backward on the next batch; sets the loss and compute_s.
  void ComputeGradients(PsClient& client, uint64_t step, StepRecord* record);
  // After step `step`: evaluation, the parameter check, the metrics record
  // and the checkpoint. Sets `evaluation` when the test set was evaluated.
  absl::Status FinishStep(PsClient& client, MetricsWriter* metrics,
                          WorkerMetrics* live, uint64_t step, absl::Time start,
                          StepRecord* record,
                          std::optional<Evaluation>* evaluation);
  // Sends the checksum of `record` to the shards.
  absl::Status CheckParams(PsClient& client, const StepRecord& record);

  const WorkerOptions options_;
  std::shared_ptr<Model> model_;
  TrainTest data_;
  Logger logger_;
  ParamBuffer params_;
  const ChunkPlan plan_;
  const LrSchedule schedule_;
  CodecSet codecs_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  // Where the model trains (--device).
  const torch::Device device_;
  const LossKind loss_;
  ShardedBatches batches_;
  const int max_message_bytes_;
  const ReplicaCheckpointer checkpointer_;
  uint64_t start_step_ = 0;
  // A worker let in again after the shards dropped it catches up on the
  // steps before this one without computing gradients (worker/join.h).
  uint64_t catch_up_until_ = 0;
  // The mode's exchange with the servers; borrows the members above, so it
  // is declared after them (and destroyed first).
  std::unique_ptr<StepProtocol> protocol_;
  // --eval_ema_decay: what evaluations see; none without it.
  std::optional<ParameterAverage> average_;
  // The request of this worker's first join, which a rejoin repeats.
  tern::v1::JoinRequest first_join_;

  std::optional<Evaluation> final_evaluation_;
  uint64_t final_checksum_ = 0;
};

}  // namespace tern::worker

#endif  // TERN_WORKER_TRAINER_H_
