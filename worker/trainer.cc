#include "worker/trainer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/checksum.h"
#include "common/status_macros.h"
#include "kernels/payload.h"
#include "torch/cuda.h"
#include "worker/join.h"
#include "worker/loss.h"
#include "worker/lps_protocol.h"
#include "worker/optimizer_factory.h"
#include "worker/start_broadcast.h"
#include "worker/terngrad_protocol.h"
#include "worker/worker_flags.h"

namespace tern::worker {
namespace {

// How often a progress line is logged when no evaluation happens.
constexpr absl::Duration kProgressEvery = absl::Seconds(10);
// The test set is evaluated in batches of this many examples. Small enough
// that a batch's activations (LeNet's first: 250 x 20 x 24 x 24 floats,
// 11 MiB) stay under glibc's 32 MiB ceiling for serving a block from the heap:
// at 1000 each of them was a fresh mmap whose pages were faulted in again
// every batch, and lps_protocol_test's 3-step cases took twice as long.
constexpr int64_t kEvalBatch = 250;
// Recoveries in a row without a completed step before Run gives up: a
// server that refuses every step after a rejoin would loop for ever.
constexpr int kMaxRecoveries = 10;

// --device: moves the model there before its parameters are taken, so that
// the optimizer and the ParamBuffer see the GPU tensors.
absl::StatusOr<torch::Device> PlaceModel(const WorkerOptions& options,
                                         Model& model) {
  const torch::Device device(options.device);
  if (!device.is_cuda()) return device;
  if (!torch::cuda::is_available()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--device=", options.device,
        ": libtorch sees no CUDA device (Debian's libtorch is CPU-only; "
        "build against a CUDA libtorch, README 'GPU workers')"));
  }
  if (device.has_index() &&
      device.index() >= static_cast<int>(torch::cuda::device_count())) {
    return absl::FailedPreconditionError(
        absl::StrCat("--device=", options.device, ": libtorch sees ",
                     torch::cuda::device_count(), " CUDA device(s)"));
  }
  model.to(device);
  return device;
}

// TernGrad in --mode=terngrad encodes on the GPU (with `given`, or the
// device's own encoder); the other codecs and the LPS modes copy the
// gradients to the host and encode there, and need no kernels on the
// device. Null: encode on the host.
absl::StatusOr<std::unique_ptr<DeviceEncoder>> ChooseDeviceEncoder(
    const WorkerOptions& options, const kernels::CodecOptions& codec,
    const torch::Device& device, std::unique_ptr<DeviceEncoder> given,
    const Logger& logger) {
  const bool lps_mode = UsesLocalParameterServer(options.mode);
  if (lps_mode || codec.id != kernels::CodecId::kTernGrad) {
    if (!device.is_cpu()) {
      logger->info(
          "--device={}: training on the GPU; --codec={} {}encodes on the "
          "host",
          options.device, kernels::CodecName(options.codec),
          lps_mode
              ? absl::StrCat("in --mode=", TrainModeName(options.mode), " ")
              : "");
    }
    return nullptr;
  }
  if (given == nullptr && !device.is_cpu()) return MakeDeviceEncoder(device);
  return std::move(given);
}

// The progress lines: one per evaluation, else one every kProgressEvery,
// with the mean loss and the rate since the last.
class ProgressLog {
 public:
  ProgressLog(Logger logger, uint64_t steps, absl::Time start)
      : logger_(std::move(logger)), steps_(steps), last_log_(start) {}

  void Add(uint64_t step, const StepRecord& rec,
           const std::optional<Evaluation>& evaluation) {
    ++steps_since_log_;
    loss_since_log_ += rec.loss;
    const absl::Time now = absl::Now();
    if (!evaluation.has_value() && now - last_log_ < kProgressEvery) return;
    const double rate = steps_since_log_ /
                        std::max(1e-9, absl::ToDoubleSeconds(now - last_log_));
    const double loss = loss_since_log_ / steps_since_log_;
    if (evaluation.has_value() && std::isnan(evaluation->accuracy)) {
      logger_->info(
          "step {}/{} loss {:.4f} lr {:.4g} {:.2f} steps/s test loss {:.4f}",
          step + 1, steps_, loss, rec.lr, rate, evaluation->loss);
    } else if (evaluation.has_value()) {
      logger_->info(
          "step {}/{} loss {:.4f} lr {:.4g} {:.2f} steps/s test accuracy "
          "{:.4f} test loss {:.4f}",
          step + 1, steps_, loss, rec.lr, rate, evaluation->accuracy,
          evaluation->loss);
    } else {
      logger_->info("step {}/{} loss {:.4f} lr {:.4g} {:.2f} steps/s", step + 1,
                    steps_, loss, rec.lr, rate);
    }
    last_log_ = now;
    steps_since_log_ = 0;
    loss_since_log_ = 0;
  }

 private:
  Logger logger_;
  const uint64_t steps_;
  absl::Time last_log_;
  uint64_t steps_since_log_ = 0;
  double loss_since_log_ = 0;
};

}  // namespace

// What holds the training targets, for errors: "DIR/train_y.npy", or the
// data set's name.
std::string TargetsName(const WorkerOptions& options) {
  if (options.dataset == "npy") {
    return absl::StrCat(options.data_dir, "/train_y.npy");
  }
  return absl::StrCat("--dataset=", options.dataset);
}

Evaluation Evaluate(Model& model, const Dataset& data, int64_t batch_size,
                    LossKind loss) {
  torch::NoGradGuard no_grad;
  model.eval();
  const torch::Device device = model.parameters().front().device();
  const int64_t n = data.images.size(0);
  double loss_sum = 0;
  int64_t correct = 0;
  for (int64_t begin = 0; begin < n; begin += batch_size) {
    const int64_t end = std::min(n, begin + batch_size);
    const torch::Tensor images = data.images.slice(0, begin, end).to(device);
    const torch::Tensor labels = data.labels.slice(0, begin, end).to(device);
    const BatchEvaluation batch = EvaluateBatch(model, loss, images, labels);
    loss_sum += batch.loss_sum;
    correct = batch.correct < 0 ? -1 : correct + batch.correct;
  }
  model.train();
  if (n == 0) return Evaluation{};
  return Evaluation{correct < 0 ? std::numeric_limits<double>::quiet_NaN()
                                : static_cast<double>(correct) / n,
                    loss_sum / n};
}

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(
    const WorkerOptions& options, std::shared_ptr<Model> model, TrainTest data,
    Logger logger, std::unique_ptr<DeviceEncoder> encoder) {
  TERN_RETURN_IF_ERROR(ValidateWorkerOptions(options));
  if (model == nullptr) return absl::InvalidArgumentError("no model");
  // The batch stream's own preconditions (enough examples for every worker's
  // batch), checked before the constructor, which throws on them.
  TERN_RETURN_IF_ERROR(ShardedBatches::Validate(data.train, options.DataSlice(),
                                                options.NumDataSlices(),
                                                options.batch_size));
  TERN_ASSIGN_OR_RETURN(const torch::Device device,
                        PlaceModel(options, *model));
  TERN_ASSIGN_OR_RETURN(const LossKind loss, ParseLoss(options.loss));
  TERN_RETURN_IF_ERROR(
      CheckModelFitsData(*model, loss, data.train, TargetsName(options)));
  TERN_ASSIGN_OR_RETURN(ParamBuffer params, ParamBuffer::Create(*model));
  // Backward then writes the flat buffer the codecs read and the pulls
  // decode into, without a copy each way. --overlap gathers each
  // gradient from its hook instead.
  if (device.is_cpu() && !options.overlap) {
    TERN_RETURN_IF_ERROR(params.BindGradients());
  }
  // The run's codec (DESIGN sections 5 and 6), as the shards build it from
  // the join.
  TERN_ASSIGN_OR_RETURN(const kernels::CodecOptions codec_options,
                        CodecSet::PushOptions(options));
  TERN_ASSIGN_OR_RETURN(const ShardAssignment assignment,
                        ParseShardAssignment(options.shard_assignment));
  TERN_ASSIGN_OR_RETURN(
      ChunkPlan plan,
      MakeChunkPlan(
          params.names(), params.tensor_elements(), options.partition_bytes,
          static_cast<uint32_t>(options.ps.size()), options.fp32_tensors,
          options.min_compress_elems,
          /*share_scalers=*/codec_options.id == kernels::CodecId::kTernGrad &&
              options.mode == TrainMode::kTernGrad,
          assignment));
  TERN_ASSIGN_OR_RETURN(const int max_message_bytes,
                        MessageBytesBound(plan.partition));
  TERN_ASSIGN_OR_RETURN(CodecSet codecs,
                        CodecSet::Create(codec_options, plan, params.spec()));
  TERN_ASSIGN_OR_RETURN(LrSchedule schedule, MakeLrSchedule(options));
  TERN_ASSIGN_OR_RETURN(std::unique_ptr<torch::optim::Optimizer> optimizer,
                        MakeOptimizer(options, model->parameters()));
  TERN_ASSIGN_OR_RETURN(std::unique_ptr<DeviceEncoder> device_encoder,
                        ChooseDeviceEncoder(options, codec_options, device,
                                            std::move(encoder), logger));

  std::unique_ptr<Trainer> trainer(new Trainer(
      options, std::move(model), std::move(data), std::move(logger),
      std::move(params), std::move(plan), schedule, std::move(codecs),
      std::move(optimizer), device, loss, max_message_bytes));
  TERN_RETURN_IF_ERROR(trainer->MakeProtocol(std::move(device_encoder)));
  TERN_ASSIGN_OR_RETURN(trainer->start_step_,
                        trainer->checkpointer_.Restore(trainer->Replica()));
  return trainer;
}

Trainer::Trainer(const WorkerOptions& options, std::shared_ptr<Model> model,
                 TrainTest data, Logger logger, ParamBuffer params,
                 ChunkPlan plan, LrSchedule schedule, CodecSet codecs,
                 std::unique_ptr<torch::optim::Optimizer> optimizer,
                 torch::Device device, LossKind loss, int max_message_bytes)
    : options_(options),
      model_(std::move(model)),
      data_(std::move(data)),
      logger_(std::move(logger)),
      params_(std::move(params)),
      plan_(std::move(plan)),
      schedule_(schedule),
      codecs_(std::move(codecs)),
      optimizer_(std::move(optimizer)),
      device_(device),
      loss_(loss),
      batches_(data_.train, options.DataSlice(), options.NumDataSlices(),
               options.batch_size, options.seed),
      max_message_bytes_(max_message_bytes),
      checkpointer_(options_, params_, logger_) {}

absl::Status Trainer::MakeProtocol(std::unique_ptr<DeviceEncoder> encoder) {
  switch (options_.mode) {
    case TrainMode::kTernGrad: {
      TERN_ASSIGN_OR_RETURN(
          protocol_, TernGradProtocol::Create(options_, params_, plan_, codecs_,
                                              *optimizer_, std::move(encoder)));
      return absl::OkStatus();
    }
    case TrainMode::kWeightGrad:
    case TrainMode::kGaia: {
      TERN_ASSIGN_OR_RETURN(
          protocol_,
          LpsProtocol::Create(options_, params_, plan_, codecs_, logger_));
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--mode: ", static_cast<int>(options_.mode),
                   " is not one of ", TrainModeNames()));
}

ReplicaState Trainer::Replica() {
  return ReplicaState{params_, *optimizer_, codecs_.feedback(), batches_};
}

uint64_t Trainer::SpecHash() const {
  // A loaded model is its file: two workers with different files (other
  // code, other weights) are refused at join, naming both files' hashes.
  return model_->file_hash().value_or(params_.spec_hash());
}

tern::v1::JoinRequest Trainer::MakeJoinRequest() const {
  tern::v1::JoinRequest request =
      BaseJoinRequest(options_, plan_, codecs_.options(), params_.spec(),
                      SpecHash(), params_.Checksum());
  protocol_->AddToJoin(&request);
  if (request.config().has_optimizer()) {
    // The LPS rescales WeightGrad's threshold every epoch of local steps
    // (server/WEIGHTGRAD.md); one local step takes a batch of every slice.
    request.mutable_config()->mutable_optimizer()->set_steps_per_epoch(
        batches_.batches_per_epoch());
  }
  return request;
}

absl::Status Trainer::Join(PsClient& client) {
  if (client.num_shards() != plan_.partition.num_shards()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the client has ", client.num_shards(),
                     " shards but the plan ", plan_.partition.num_shards()));
  }
  const tern::v1::JoinRequest request = MakeJoinRequest();
  first_join_ = request;
  if (model_->file_hash().has_value()) {
    logger_->info("{}: file hash {}{}", model_->description(),
                  FormatChecksum(*model_->file_hash()),
                  model_->returns_loss() ? ", computes its own loss" : "");
  }
  // Worker 0's start travels with a fresh join only (a resumed worker has
  // its checkpoint's parameters).
  const bool broadcast = options_.broadcast_start && start_step_ == 0;
  TERN_ASSIGN_OR_RETURN(
      const std::vector<tern::v1::JoinResponse> responses,
      client.Join(broadcast ? JoinRequestsWithStart(request, plan_, params_,
                                                    codecs_.fp32())
                            : std::vector<tern::v1::JoinRequest>(
                                  client.num_shards(), request)));
  const ResumePoint resume{start_step_, checkpointer_.path()};
  TERN_RETURN_IF_ERROR(
      CheckJoinResponses(responses, client, plan_, options_.run_id, resume));
  catch_up_until_ = std::min(CatchUpUntil(responses, resume), options_.steps);
  if (catch_up_until_ > start_step_) {
    logger_->info(
        "let in again after being dropped: catching up on steps {}..{} from "
        "the shards' kept answers",
        start_step_, catch_up_until_ - 1);
  }
  if (broadcast && options_.worker_id != 0) {
    TERN_RETURN_IF_ERROR(LoadStart(responses, plan_, codecs_.fp32(), &params_));
    logger_->info("loaded worker 0's parameters from the shards (checksum {})",
                  FormatChecksum(params_.Checksum()));
  }
  if (start_step_ > 0) {
    logger_->info("rejoined run '{}' at step {} (shards at step{} {})",
                  options_.run_id, start_step_, responses.size() > 1 ? "s" : "",
                  absl::StrJoin(responses, ",",
                                [](std::string* out, const auto& response) {
                                  absl::StrAppend(out, response.next_step());
                                }));
  }
  logger_->info(
      "joined {} shard(s) as worker {}/{}: {} parameters in {} tensors, {} "
      "chunks ({} in fp32), codec {}{}, checksum {}",
      responses.size(), options_.worker_id, options_.num_workers,
      params_.total_elements(), params_.names().size(),
      plan_.partition.chunks().size(), plan_.fp32_chunk_keys.size(),
      codecs_.run().name(),
      codecs_.feedback() != nullptr ? " with error feedback" : "",
      FormatChecksum(request.param_checksum()));
  return absl::OkStatus();
}

void Trainer::ComputeGradients(PsClient& client, uint64_t step,
                               StepRecord* rec) {
  const absl::Time start = absl::Now();
  auto [images, labels] = batches_.Next();
  model_->zero_grad();
  const torch::Tensor loss =
      BatchLoss(*model_, loss_, images.to(device_), labels.to(device_));
  protocol_->BeforeBackward(client, step);
  loss.backward();
  rec->loss = loss.item<double>();
  rec->compute_s = SecondsSince(start);
}

absl::Status Trainer::Run(PsClient& client, MetricsWriter* metrics,
                          WorkerMetrics* live) {
  TERN_RETURN_IF_ERROR(Join(client));
  model_->train();
  const uint64_t fp32_bytes = sizeof(float) * params_.total_elements();
  const absl::Time start = absl::Now();
  ProgressLog progress(logger_, options_.steps, start);
  // From the joined (or resumed) parameters: a resumed worker's average
  // starts again from its checkpoint's weights (the checkpoint keeps none).
  if (options_.eval_ema_decay > 0) {
    average_.emplace(options_.eval_ema_decay, model_->parameters());
  }
  uint64_t step = start_step_;
  int recoveries = 0;  // since the last completed step
  while (step < options_.steps) {
    StepRecord rec;
    rec.worker = options_.worker_id;
    rec.step = step;
    rec.lr = schedule_.Rate(step);
    rec.fp32_bytes = fp32_bytes;
    const bool catching_up = step < catch_up_until_;
    if (catching_up) {
      TERN_RETURN_IF_ERROR(CatchUp(client, step, &rec));
    } else {
      ComputeGradients(client, step, &rec);
      if (absl::Status stepped = protocol_->Step(client, step, &rec);
          !stepped.ok()) {
        TERN_ASSIGN_OR_RETURN(const uint64_t next,
                              Recover(client, step, stepped, &recoveries));
        // The servers lost steps: train on from `next`. The data stream
        // does not rewind (ShardedBatches only moves forward), so the
        // redone steps see the next batches, not the ones they saw before.
        if (next <= step) {
          step = next;
          continue;
        }
        // next == step + 1: the servers' state holds this step, whose
        // parameters Recover loaded; it completes as if Step had.
      }
    }
    recoveries = 0;
    if (average_.has_value()) average_->Update(step);
    std::optional<Evaluation> evaluation;
    TERN_RETURN_IF_ERROR(
        FinishStep(client, metrics, live, step, start, &rec, &evaluation));
    if (!catching_up) progress.Add(step, rec, evaluation);
    if (rec.final) {
      final_evaluation_ = evaluation;
      final_checksum_ = *rec.param_checksum;
    }
    ++step;
  }
  logger_->info("done: {} steps in {:.1f} s, final checksum {}{}",
                options_.steps, SecondsSince(start),
                FormatChecksum(final_checksum_),
                protocol_->ReplicasIdentical()
                    ? ""
                    : " (the LPS's, after the final synchronization)");
  return absl::OkStatus();
}

absl::Status Trainer::CatchUp(PsClient& client, uint64_t step,
                              StepRecord* rec) {
  // No batch was trained on: the record says so with a NaN (null) loss.
  rec->loss = std::numeric_limits<double>::quiet_NaN();
  TERN_RETURN_IF_ERROR(protocol_->CatchUp(client, step, rec));
  if (step + 1 == catch_up_until_) {
    logger_->info("caught up at step {}: training from step {} on", step,
                  step + 1);
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> Trainer::Recover(PsClient& client, uint64_t step,
                                          const absl::Status& failed,
                                          int* recoveries) {
  if (*recoveries >= kMaxRecoveries) {
    return absl::Status(
        failed.code(),
        absl::StrCat(failed.message(), " (after ", *recoveries,
                     " recoveries in a row without a completed step)"));
  }
  TERN_ASSIGN_OR_RETURN(const uint64_t next,
                        protocol_->Recover(client, step, failed, first_join_));
  *recoveries += 1;
  return next;
}

absl::Status Trainer::FinishStep(PsClient& client, MetricsWriter* metrics,
                                 WorkerMetrics* live, uint64_t step,
                                 absl::Time start, StepRecord* rec,
                                 std::optional<Evaluation>* evaluation) {
  const bool final = step + 1 == options_.steps;
  if ((final && options_.final_eval) || Every(options_.eval_every, step)) {
    const absl::Time eval_start = absl::Now();
    if (average_.has_value()) average_->Swap();  // the average in
    *evaluation = Evaluate(*model_, data_.test, kEvalBatch, loss_);
    if (average_.has_value()) average_->Swap();  // the replica back
    rec->eval_s = SecondsSince(eval_start);
    if (!std::isnan((*evaluation)->accuracy)) {
      rec->test_accuracy = (*evaluation)->accuracy;
    }
    rec->test_loss = (*evaluation)->loss;
  }
  const bool identical = protocol_->ReplicasIdentical();
  const bool check = identical && (final || Every(options_.check_every, step));
  if (check) rec->param_checksum = params_.Checksum();
  if (!identical && final) {
    // Replicas differ by design; the check is the servers' final checksum.
    const uint64_t loaded = params_.Checksum();
    TERN_RETURN_IF_ERROR(protocol_->CheckFinal(step, loaded));
    rec->param_checksum = loaded;
  }
  rec->final = final;
  rec->wall_s = SecondsSince(start);
  // The record goes out before the check, so a divergence leaves the
  // checksum that disagreed in the metrics.
  if (metrics != nullptr) TERN_RETURN_IF_ERROR(metrics->Write(*rec));
  if (live != nullptr) live->Observe(*rec);
  if (check) TERN_RETURN_IF_ERROR(CheckParams(client, *rec));
  // After the checks: a checkpoint holds a replica the shards vouched for.
  if (checkpointer_.enabled() &&
      (final || Every(options_.checkpoint_every, step))) {
    if (absl::Status saved = checkpointer_.Save(Replica(), step + 1);
        !saved.ok()) {
      return AtStep(step, saved);
    }
    if (live != nullptr) live->CheckpointWritten(absl::Now());
  }
  return absl::OkStatus();
}

absl::Status Trainer::CheckParams(PsClient& client, const StepRecord& rec) {
  tern::v1::CheckParamsRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_step(rec.step);
  request.set_param_checksum(*rec.param_checksum);
  const absl::Status checked = client.CheckParams(request);
  if (absl::IsFailedPrecondition(checked)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "step ", rec.step, ": this replica's parameters (checksum ",
        FormatChecksum(*rec.param_checksum),
        ") differ from another worker's: ", checked.message()));
  }
  if (!checked.ok()) return AtStep(rec.step, checked);
  return absl::OkStatus();
}

}  // namespace tern::worker
