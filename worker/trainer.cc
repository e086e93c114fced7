#include "worker/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "core/wire.h"
#include "kernels/codec_registry.h"
#include "kernels/sparse_select.h"
#include "kernels/terngrad.h"
#include "worker/checkpoint.h"
#include "worker/codec_config.h"
#include "worker/fingerprint.h"
#include "worker/worker_flags.h"

namespace tern::worker {
namespace {

using tern::v1::JoinRequest;
using tern::v1::PushPullRequest;
using tern::v1::ShareScalersRequest;

// How often a progress line is logged when no evaluation happens.
constexpr absl::Duration kProgressEvery = absl::Seconds(10);
// The test set is evaluated in batches of this many examples.
constexpr int64_t kEvalBatch = 1000;
// The `chunk` of the stream dropping's global threshold is drawn with
// (kernels/sparse_select.h): no chunk has this key.
constexpr uint32_t kGlobalThresholdChunk = 0xFFFFFFFFu;

double SecondsSince(absl::Time start) {
  return absl::ToDoubleSeconds(absl::Now() - start);
}

// Prefixes `status` with the step it happened in.
absl::Status AtStep(uint64_t step, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat("step ", step, ": ", status.message()));
}

bool Every(uint64_t interval, uint64_t step) {
  return interval > 0 && (step + 1) % interval == 0;
}

}  // namespace

Evaluation Evaluate(Model& model, const Dataset& data, int64_t batch_size) {
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
    const torch::Tensor logits = model.forward(images);
    loss_sum += torch::nn::functional::cross_entropy(
                    logits, labels,
                    torch::nn::functional::CrossEntropyFuncOptions().reduction(
                        torch::kSum))
                    .item<double>();
    correct += logits.argmax(1).eq(labels).sum().item<int64_t>();
  }
  model.train();
  if (n == 0) return Evaluation{};
  return Evaluation{static_cast<double>(correct) / n, loss_sum / n};
}

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(
    const WorkerOptions& options, std::shared_ptr<Model> model, TrainTest data,
    Logger logger, std::unique_ptr<DeviceEncoder> encoder) {
  TERN_RETURN_IF_ERROR(ValidateWorkerOptions(options));
  if (model == nullptr) return absl::InvalidArgumentError("no model");
  // The batch stream's own preconditions (enough examples for every worker's
  // batch), checked before the constructor, which throws on them.
  TERN_RETURN_IF_ERROR(ShardedBatches::Validate(
      data.train, options.DataSlice(), options.NumDataSlices(),
      options.batch_size));
  // --device: the model moves before its parameters are taken, so that
  // the optimizer and the ParamBuffer see the GPU tensors.
  const torch::Device device(options.device);
  if (device.is_cuda()) {
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
    model->to(device);
  }
  TERN_ASSIGN_OR_RETURN(ParamBuffer params, ParamBuffer::Create(*model));

  // The run's codec (DESIGN sections 5 and 6): the flags' CodecOptions,
  // the same the shards build from the join.
  Codecs codecs;
  TERN_ASSIGN_OR_RETURN(codecs.options, MakeRunCodecOptions(options));
  kernels::CodecOptions fp32_options;
  fp32_options.id = kernels::CodecId::kFp32;
  fp32_options.push_layout = kernels::Layout::kRaw;
  fp32_options.pull_layout = kernels::Layout::kRaw;
  const bool lps_mode = options.mode != "terngrad";
  // gaia: the workers push fp32 gradients.
  if (options.mode == "gaia") codecs.options = fp32_options;
  const bool terngrad = codecs.options.id == kernels::CodecId::kTernGrad;
  TERN_ASSIGN_OR_RETURN(codecs.run, kernels::MakeCodec(codecs.options));
  TERN_ASSIGN_OR_RETURN(codecs.fp32, kernels::MakeCodec(fp32_options));
  if (lps_mode) {
    // The LPS's weight codecs (server/lps_state.h): ternary in the run's
    // push layout (2bit when the run pushes fp32), int8, fp32.
    kernels::CodecOptions ternary;
    ternary.id = kernels::CodecId::kTernGrad;
    ternary.push_layout =
        terngrad ? codecs.options.push_layout : kernels::Layout::kTernary2Bit;
    kernels::CodecOptions int8;
    int8.id = kernels::CodecId::kInt8;
    for (const kernels::CodecOptions& weight : {ternary, int8, fp32_options}) {
      TERN_ASSIGN_OR_RETURN(codecs.weights[weight.id],
                            kernels::MakeCodec(weight));
    }
  }

  TERN_ASSIGN_OR_RETURN(
      ChunkPlan plan,
      MakeChunkPlan(params.names(), params.tensor_elements(),
                    options.partition_bytes,
                    static_cast<uint32_t>(options.ps.size()),
                    options.fp32_tensors, options.min_compress_elems,
                    /*share_scalers=*/terngrad && !lps_mode));
  TERN_ASSIGN_OR_RETURN(const int max_message_bytes,
                        MessageBytesBound(plan.partition));

  // Column-wise codecs (onebit, adaptive) group each chunk by rows of its
  // tensor, as the shards do (kernels::ColumnGroupSize).
  for (const Chunk& chunk : plan.partition.chunks()) {
    const auto& shape = params.spec().tensors(chunk.tensor).shape();
    codecs.group_sizes.push_back(kernels::ColumnGroupSize(
        absl::MakeConstSpan(shape.data(), shape.size())));
  }
  // Error feedback wraps the run codec; fp32 chunks lose nothing and keep
  // no residual.
  if (codecs.run->UsesErrorFeedback()) {
    codecs.feedback =
        std::make_unique<kernels::ErrorFeedback>(std::move(codecs.run));
    for (const Chunk& chunk : plan.partition.chunks()) {
      if (plan.fp32_chunk[chunk.key]) continue;
      TERN_RETURN_IF_ERROR(
          codecs.feedback->Register(chunk.key, chunk.num_elements));
    }
  }

  TERN_ASSIGN_OR_RETURN(const LrScheduleKind kind,
                        ParseLrScheduleKind(options.lr_schedule));
  TERN_ASSIGN_OR_RETURN(
      LrSchedule schedule,
      LrSchedule::Create(kind, options.lr, options.steps, options.lr_step_every,
                         options.lr_gamma));

  std::unique_ptr<torch::optim::Optimizer> optimizer;
  if (options.optimizer == "adam") {
    if (options.momentum >= 1) {
      return absl::InvalidArgumentError(
          "--momentum (Adam's beta1) must be below 1 with --optimizer=adam");
    }
    optimizer = std::make_unique<torch::optim::Adam>(
        model->parameters(),
        torch::optim::AdamOptions(options.lr)
            .betas(std::make_tuple(options.momentum, 0.999))
            .weight_decay(options.weight_decay));
  } else {
    const double momentum =
        options.optimizer == "momentum" ? options.momentum : 0.0;
    optimizer = std::make_unique<torch::optim::SGD>(
        model->parameters(), torch::optim::SGDOptions(options.lr)
                                 .momentum(momentum)
                                 .weight_decay(options.weight_decay));
  }

  // TernGrad in --mode=terngrad encodes on the GPU; the other codecs and
  // the LPS modes copy the gradients to the host and encode there, and need
  // no kernels on the device.
  std::unique_ptr<DeviceEncoder> device_encoder = std::move(encoder);
  if (lps_mode || codecs.options.id != kernels::CodecId::kTernGrad) {
    if (!device.is_cpu()) {
      logger->info("--device={}: training on the GPU; --codec={} {}encodes on "
                   "the host",
                   options.device, options.codec,
                   lps_mode ? "in --mode=" + options.mode + " " : "");
    }
    device_encoder.reset();
  } else if (device_encoder == nullptr && !device.is_cpu()) {
    TERN_ASSIGN_OR_RETURN(device_encoder, MakeDeviceEncoder(device));
  }

  std::unique_ptr<Trainer> trainer(new Trainer(
      options, std::move(model), std::move(data), std::move(logger),
      std::move(params), std::move(plan), schedule, std::move(codecs),
      std::move(optimizer), device, std::move(device_encoder),
      max_message_bytes));
  TERN_RETURN_IF_ERROR(trainer->RestoreCheckpoint());
  return trainer;
}

Trainer::Trainer(const WorkerOptions& options, std::shared_ptr<Model> model,
                 TrainTest data, Logger logger, ParamBuffer params,
                 ChunkPlan plan, LrSchedule schedule, Codecs codecs,
                 std::unique_ptr<torch::optim::Optimizer> optimizer,
                 torch::Device device,
                 std::unique_ptr<DeviceEncoder> device_encoder,
                 int max_message_bytes)
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
      device_encoder_(std::move(device_encoder)),
      batches_(data_.train, options.DataSlice(), options.NumDataSlices(),
               options.batch_size, options.seed),
      max_message_bytes_(max_message_bytes),
      share_scalers_(codecs_.options.id == kernels::CodecId::kTernGrad &&
                     options.mode == "terngrad"),
      lps_mode_(options.mode != "terngrad"),
      checkpoint_path_(options.checkpoint_dir.empty()
                           ? std::string()
                           : CheckpointPath(options.checkpoint_dir,
                                            options.worker_id)) {
  if (lps_mode_) weights_.resize(params_.total_elements());
}

const kernels::Codec& Trainer::RunCodec() const {
  return codecs_.feedback != nullptr ? codecs_.feedback->codec() : *codecs_.run;
}

const kernels::Codec& Trainer::CodecOf(uint32_t chunk_key) const {
  return plan_.fp32_chunk[chunk_key] ? *codecs_.fp32 : RunCodec();
}

JoinRequest Trainer::MakeJoinRequest() const {
  JoinRequest request;
  request.set_worker_id(options_.worker_id);
  tern::v1::RunConfig* config = request.mutable_config();
  config->set_run_id(options_.run_id);
  config->set_num_workers(options_.num_workers);
  config->set_num_shards(plan_.partition.num_shards());
  config->set_partition_bytes(options_.partition_bytes);
  config->set_seed(options_.seed);
  // Codec, clip, codec_params and the layouts the codec really writes.
  CodecToRunConfig(codecs_.options, config);
  for (const uint32_t key : plan_.fp32_chunk_keys) {
    config->add_fp32_chunk_keys(key);
  }
  *request.mutable_param_spec() = params_.spec();
  request.set_param_spec_hash(params_.spec_hash());
  request.set_param_checksum(params_.Checksum());
  if (lps_mode_) {
    config->set_mode(options_.mode == "gaia" ? tern::v1::MODE_GAIA
                                             : tern::v1::MODE_WEIGHTGRAD);
    tern::v1::OptimizerConfig* optimizer = config->mutable_optimizer();
    optimizer->set_lr(options_.lr);
    optimizer->set_momentum(options_.optimizer == "momentum" ? options_.momentum
                                                             : 0.0);
    optimizer->set_weight_decay(options_.weight_decay);
    optimizer->set_lr_schedule(options_.lr_schedule);
    optimizer->set_lr_step_every(options_.lr_step_every);
    optimizer->set_lr_gamma(options_.lr_gamma);
    optimizer->set_steps(options_.steps);
    if (options_.worker_id == 0) {
      // The LPS starts from worker 0's weights (every worker's are the
      // same: the checksum says so).
      std::vector<float> flat(params_.total_elements());
      params_.GatherParameters(absl::MakeSpan(flat));
      for (const Chunk& chunk : plan_.partition.chunks()) {
        absl::StatusOr<kernels::Payload> payload =
            codecs_.fp32->Encode(absl::MakeConstSpan(flat).subspan(
                                     chunk.flat_offset, chunk.num_elements),
                                 kernels::EncodeContext());
        tern::v1::ChunkPayload* wire = request.add_initial_weights();
        wire->set_chunk_key(chunk.key);
        // fp32 encoding of finite or not values cannot fail; the LPS
        // refuses non-finite weights.
        if (payload.ok()) {
          core::PayloadToWire(*std::move(payload), wire->mutable_payload());
        }
      }
    }
  }
  return request;
}

absl::Status Trainer::Join(PsClient& client) {
  if (client.num_shards() != plan_.partition.num_shards()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the client has ", client.num_shards(),
                     " shards but the plan ", plan_.partition.num_shards()));
  }
  const JoinRequest request = MakeJoinRequest();
  TERN_ASSIGN_OR_RETURN(const std::vector<tern::v1::JoinResponse> responses,
                        client.Join(request));
  for (uint32_t shard = 0; shard < responses.size(); ++shard) {
    const tern::v1::JoinResponse& response = responses[shard];
    // A shard at start_step_ + 1 completed that step without this worker
    // having applied it (it died in between): the worker pushes it again
    // and the shard answers from its retry cache.
    const uint64_t at = response.next_step();
    if (at != start_step_ && at != start_step_ + 1) {
      const std::string shard_name =
          absl::StrCat("shard ", shard, " (", client.name(shard), ")");
      if (checkpoint_path_.empty() || (start_step_ == 0 && at > 1)) {
        return absl::FailedPreconditionError(absl::StrCat(
            shard_name, " continues run '", options_.run_id, "' at step ", at,
            ", but this worker has no checkpoint to resume from",
            checkpoint_path_.empty()
                ? " (no --checkpoint_dir)"
                : absl::StrCat(" ('", checkpoint_path_, "' does not exist)"),
            "; give the --checkpoint_dir it wrote, restart the job, or use a "
            "new --run_id"));
      }
      if (at > start_step_) {
        return absl::FailedPreconditionError(absl::StrCat(
            shard_name, " is at step ", at, ", but checkpoint '",
            checkpoint_path_, "' resumes at step ", start_step_,
            ": the shards completed steps this worker cannot replay; "
            "checkpoint more often (--checkpoint_every) or restart the job"));
      }
      return absl::FailedPreconditionError(absl::StrCat(
          shard_name, " is at step ", at, ", behind checkpoint '",
          checkpoint_path_, "' at step ", start_step_,
          ": the shard has restarted and lost the run (shards keep no "
          "checkpoints); restart the job with a new --run_id or another "
          "--checkpoint_dir"));
    }
    const std::vector<uint32_t> keys(response.chunk_keys().begin(),
                                     response.chunk_keys().end());
    if (keys != plan_.shard_chunks[shard]) {
      return absl::FailedPreconditionError(absl::StrCat(
          "shard ", shard, " (", client.name(shard), ") owns chunks [",
          absl::StrJoin(keys, ","), "] but this worker's partition gives it [",
          absl::StrJoin(plan_.shard_chunks[shard], ","),
          "]: the shards and workers disagree on the partition"));
    }
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
      RunCodec().name(),
      codecs_.feedback != nullptr ? " with error feedback" : "",
      FormatChecksum(request.param_checksum()));
  return absl::OkStatus();
}

absl::Status Trainer::RestoreCheckpoint() {
  if (checkpoint_path_.empty()) return absl::OkStatus();
  absl::StatusOr<tern::v1::WorkerCheckpoint> checkpoint =
      ReadCheckpoint(checkpoint_path_);
  if (absl::IsNotFound(checkpoint.status())) {
    logger_->info("no checkpoint at {}: starting at step 0",
                  checkpoint_path_);
    return absl::OkStatus();
  }
  if (!checkpoint.ok()) return checkpoint.status();
  CheckpointIdentity expected;
  expected.run_id = options_.run_id;
  expected.worker_id = options_.worker_id;
  expected.num_workers = options_.num_workers;
  expected.codec = options_.codec;
  expected.param_spec_hash = params_.spec_hash();
  expected.num_params = params_.total_elements();
  expected.steps = options_.steps;
  TERN_RETURN_IF_ERROR(
      CheckCheckpointIdentity(*checkpoint, expected, checkpoint_path_));
  auto data_loss = [&](absl::string_view what) {
    return absl::DataLossError(
        absl::StrCat("checkpoint '", checkpoint_path_, "': ", what));
  };

  std::vector<float> flat(params_.total_elements());
  std::memcpy(flat.data(), checkpoint->params().data(),
              checkpoint->params().size());
  params_.ScatterParameters(flat);
  if (params_.Checksum() != checkpoint->param_checksum()) {
    return data_loss(absl::StrCat(
        "the parameters have checksum ", FormatChecksum(params_.Checksum()),
        ", but the checkpoint records ",
        FormatChecksum(checkpoint->param_checksum()), " (a corrupt file)"));
  }
  try {
    torch::serialize::InputArchive archive;
    std::istringstream in(checkpoint->optimizer_state());
    archive.load_from(in);
    optimizer_->load(archive);
  } catch (const c10::Error& e) {
    return data_loss(absl::StrCat("the optimizer state does not load: ",
                                  e.what_without_backtrace()));
  }
  if (codecs_.feedback != nullptr) {
    if (absl::Status restored =
            codecs_.feedback->RestoreState(checkpoint->residual_state());
        !restored.ok()) {
      return data_loss(absl::StrCat("the error-feedback residuals: ",
                                    restored.message()));
    }
  } else if (!checkpoint->residual_state().empty()) {
    return data_loss("it holds residuals, but the codec has no error feedback");
  }
  batches_.Seek(checkpoint->data_position());
  start_step_ = checkpoint->next_step();
  logger_->info("restored checkpoint {}: resuming at step {} of {}, checksum {}",
                checkpoint_path_, start_step_, options_.steps,
                FormatChecksum(checkpoint->param_checksum()));
  return absl::OkStatus();
}

absl::Status Trainer::SaveCheckpoint(uint64_t next_step) const {
  const absl::Time start = absl::Now();
  tern::v1::WorkerCheckpoint checkpoint;
  checkpoint.set_format_version(kCheckpointFormatVersion);
  checkpoint.set_run_id(options_.run_id);
  checkpoint.set_worker_id(options_.worker_id);
  checkpoint.set_num_workers(options_.num_workers);
  checkpoint.set_codec(options_.codec);
  checkpoint.set_param_spec_hash(params_.spec_hash());
  checkpoint.set_steps(options_.steps);
  checkpoint.set_next_step(next_step);
  checkpoint.set_data_position(batches_.position());
  std::vector<float> flat(params_.total_elements());
  params_.GatherParameters(absl::MakeSpan(flat));
  checkpoint.set_params(std::string(reinterpret_cast<const char*>(flat.data()),
                                    flat.size() * sizeof(float)));
  checkpoint.set_param_checksum(params_.Checksum());
  {
    torch::serialize::OutputArchive archive;
    optimizer_->save(archive);
    std::ostringstream out;
    archive.save_to(out);
    checkpoint.set_optimizer_state(std::move(out).str());
  }
  if (codecs_.feedback != nullptr) {
    checkpoint.set_residual_state(codecs_.feedback->SaveState());
  }
  TERN_RETURN_IF_ERROR(WriteCheckpoint(checkpoint_path_, checkpoint));
  logger_->info("checkpoint for step {} written to {} ({:.1f} MiB, {:.2f} s)",
                next_step, checkpoint_path_,
                checkpoint.ByteSizeLong() / double(1 << 20),
                SecondsSince(start));
  return absl::OkStatus();
}

absl::Status Trainer::ComputeScalers(
    uint64_t step, std::vector<float>* scalers,
    const std::vector<kernels::ChunkStats>* device_stats) const {
  const std::vector<Chunk>& chunks = plan_.partition.chunks();
  scalers->assign(chunks.size(), 0.0f);
  const float clip = static_cast<float>(options_.clip);
  for (const Chunk& chunk : chunks) {
    if (chunk.num_elements == 0) continue;
    const kernels::ChunkStats stats =
        device_stats != nullptr
            ? (*device_stats)[chunk.key]
            : kernels::ComputeStats(params_.ChunkGradients(chunk));
    // ComputeStats leaves NaN and Inf out of the moments and counts them.
    if (stats.nonfinite > 0 || !std::isfinite(stats.stddev()) ||
        !std::isfinite(stats.max_abs)) {
      // The NaN policy (DESIGN section 7): stop rather than push NaN/Inf.
      return absl::FailedPreconditionError(absl::StrCat(
          "step ", step, ": the gradient of tensor '",
          params_.names()[chunk.tensor], "' (chunk ", chunk.key, ") has ",
          stats.nonfinite,
          " non-finite value(s); stopping instead of pushing them (lower "
          "--lr, or check the data)"));
    }
    (*scalers)[chunk.key] = kernels::LocalScaler(stats, clip);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::optional<kernels::Payload>>>
Trainer::EncodeOnDevice(uint64_t step, const float* gradients,
                        const std::vector<float>& scalers) {
  std::vector<Chunk> compressed;
  std::vector<float> chunk_scalers;
  for (const Chunk& chunk : plan_.partition.chunks()) {
    if (plan_.fp32_chunk[chunk.key]) continue;
    compressed.push_back(chunk);
    chunk_scalers.push_back(scalers[chunk.key]);
  }
  // The stream's chunk is each chunk's key (DESIGN section 2), set by the
  // kernels per chunk.
  const RandomStream stream{options_.seed, static_cast<uint32_t>(step), 0,
                            options_.worker_id};
  absl::StatusOr<std::vector<kernels::Payload>> payloads =
      device_encoder_->EncodeTernGrad(gradients, params_.total_elements(),
                                      compressed, chunk_scalers, stream,
                                      LayoutsOf(codecs_.options).push);
  if (!payloads.ok()) return AtStep(step, payloads.status());
  std::vector<std::optional<kernels::Payload>> by_key(
      plan_.partition.chunks().size());
  for (size_t i = 0; i < compressed.size(); ++i) {
    by_key[compressed[i].key] = std::move((*payloads)[i]);
  }
  return by_key;
}

absl::StatusOr<float> Trainer::Compensate(uint64_t step) {
  const std::vector<Chunk>& chunks = plan_.partition.chunks();
  std::vector<absl::Span<const float>> compensated;
  for (const Chunk& chunk : chunks) {
    if (plan_.fp32_chunk[chunk.key]) continue;
    const absl::Span<float> values = params_.ChunkGradients(chunk);
    if (absl::Status status = codecs_.feedback->Compensate(chunk.key, values);
        !status.ok()) {
      return AtStep(
          step,
          absl::Status(status.code(),
                       absl::StrCat("compensating chunk ", chunk.key, " of '",
                                    params_.names()[chunk.tensor],
                                    "': ", status.message())));
    }
    compensated.push_back(values);
  }
  const kernels::CodecOptions& options = codecs_.options;
  if (options.id != kernels::CodecId::kDropping ||
      options.drop_scope != kernels::DropScope::kGlobal) {
    return 0.0f;
  }
  // Aji & Heafield select one threshold over the whole gradient: the worker
  // draws it from all compensated chunks at once, keyed by the chunk number
  // no chunk has.
  const RandomStream stream{options_.seed, static_cast<uint32_t>(step),
                            kGlobalThresholdChunk, options_.worker_id};
  return kernels::SampledMagnitudeThreshold(compensated, options.drop_ratio,
                                            options.sample_size, stream);
}

absl::Status Trainer::LpsStep(PsClient& client, uint64_t step,
                              StepRecord* rec) {
  const std::vector<Chunk>& chunks = plan_.partition.chunks();

  // 1. Gradients of this worker's batch, at the weights the LPS sent.
  absl::Time phase = absl::Now();
  auto [images, labels] = batches_.Next();
  model_->zero_grad();
  const torch::Tensor loss = torch::nn::functional::cross_entropy(
      model_->forward(images.to(device_)), labels.to(device_));
  loss.backward();
  rec->loss = loss.item<double>();
  params_.GatherGradients();
  rec->compute_s = SecondsSince(phase);

  // 2. Own scalers (and the NaN check); every chunk encoded and pushed.
  phase = absl::Now();
  std::vector<float> scalers;
  TERN_RETURN_IF_ERROR(ComputeScalers(step, &scalers));
  std::vector<ShardRequest<PushPullRequest>> pushes(1);
  PushPullRequest& push = pushes[0].request;
  push.set_worker_id(options_.worker_id);
  push.set_step(step);
  // Evaluate the LPS's model, not one quantized draw of it (the answer to
  // the last step is fp32 anyway).
  push.set_fp32_weights(Every(options_.eval_every, step));
  for (const Chunk& chunk : chunks) {
    kernels::EncodeContext context;
    context.stream = RandomStream{options_.seed, static_cast<uint32_t>(step),
                                  chunk.key, options_.DataSlice()};
    // No scaler sharing: the LPS applies each gradient on its own, so the
    // worker's own s_ik = min(c * sigma, max|g|) is the scaler.
    context.scaler = plan_.fp32_chunk[chunk.key] ? 0.0f : scalers[chunk.key];
    absl::StatusOr<kernels::Payload> payload =
        CodecOf(chunk.key).Encode(params_.ChunkGradients(chunk), context);
    if (!payload.ok()) {
      return AtStep(
          step, absl::Status(payload.status().code(),
                             absl::StrCat("encoding chunk ", chunk.key, ": ",
                                          payload.status().message())));
    }
    tern::v1::ChunkPayload* wire = push.add_chunks();
    wire->set_chunk_key(chunk.key);
    core::PayloadToWire(*std::move(payload), wire->mutable_payload());
    rec->push_bytes += core::PayloadBytes(wire->payload());
  }
  rec->push_msg_bytes += push.ByteSizeLong();
  rec->encode_s = SecondsSince(phase);

  phase = absl::Now();
  absl::StatusOr<std::vector<tern::v1::PushPullResponse>> pulls =
      client.PushPull(std::move(pushes));
  if (!pulls.ok()) return AtStep(step, pulls.status());
  rec->network_s = SecondsSince(phase);

  // 3. Load the LPS's weights into the model.
  phase = absl::Now();
  const tern::v1::PushPullResponse& pull = (*pulls)[0];
  rec->pull_msg_bytes += pull.ByteSizeLong();
  const auto lps_error = [&](const std::string& what) {
    return absl::InternalError(
        absl::StrCat("step ", step, ": LPS (", client.name(0), "): ", what));
  };
  if (pull.step() != step) {
    return lps_error(absl::StrCat("answered for step ", pull.step()));
  }
  if (static_cast<size_t>(pull.chunks_size()) != chunks.size()) {
    return lps_error(absl::StrCat("answered with ", pull.chunks_size(),
                                  " chunks, expected ", chunks.size()));
  }
  for (int i = 0; i < pull.chunks_size(); ++i) {
    const tern::v1::ChunkPayload& wire = pull.chunks(i);
    const uint32_t key = wire.chunk_key();
    if (key != static_cast<uint32_t>(i)) {
      return lps_error(absl::StrCat("chunk ", key, " where chunk ", i,
                                    " belongs (key order, each once)"));
    }
    rec->pull_bytes += core::PayloadBytes(wire.payload());
    absl::StatusOr<kernels::Payload> payload =
        core::PayloadFromWire(wire.payload());
    absl::Status decoded = payload.status();
    if (decoded.ok()) {
      const auto codec = codecs_.weights.find(payload->codec);
      decoded = codec == codecs_.weights.end()
                    ? absl::InvalidArgumentError(absl::StrCat(
                          "weights in ", kernels::CodecName(payload->codec),
                          " (expected terngrad, int8 or fp32)"))
                    : codec->second->Decode(*payload,
                                            absl::MakeSpan(weights_).subspan(
                                                chunks[key].flat_offset,
                                                chunks[key].num_elements));
    }
    if (!decoded.ok()) {
      return absl::Status(
          decoded.code(),
          absl::StrCat("step ", step, ": LPS (", client.name(0), "): chunk ",
                       key, " of '", params_.names()[chunks[key].tensor],
                       "': ", decoded.message()));
    }
  }
  for (const float w : weights_) {
    if (!std::isfinite(w)) {
      return lps_error("the weights hold a non-finite value");
    }
  }
  params_.ScatterParameters(weights_);
  if (pull.param_checksum() != 0) lps_checksum_ = pull.param_checksum();
  rec->decode_s = SecondsSince(phase);
  return absl::OkStatus();
}

absl::Status Trainer::Step(PsClient& client, uint64_t step, StepRecord* rec) {
  if (lps_mode_) return LpsStep(client, step, rec);
  const std::vector<Chunk>& chunks = plan_.partition.chunks();
  const uint32_t num_shards = plan_.partition.num_shards();

  // 1. Gradients of this worker's batch.
  absl::Time phase = absl::Now();
  auto [images, labels] = batches_.Next();
  model_->zero_grad();
  const torch::Tensor loss = torch::nn::functional::cross_entropy(
      model_->forward(images.to(device_)), labels.to(device_));
  loss.backward();
  rec->loss = loss.item<double>();
  // On a GPU with TernGrad the gradients stay there; only fp32 chunks
  // (encoded raw, on the host) are copied over.
  const float* device_gradients = nullptr;
  if (device_encoder_ != nullptr) {
    device_gradients = params_.GatherDeviceGradients();
    for (const Chunk& chunk : chunks) {
      if (plan_.fp32_chunk[chunk.key]) params_.CopyChunkToHost(chunk);
    }
  } else {
    params_.GatherGradients();
  }
  rec->compute_s = SecondsSince(phase);

  // 2. Statistics and local scalers.
  phase = absl::Now();
  std::vector<float> scalers;
  if (device_encoder_ != nullptr) {
    absl::StatusOr<std::vector<kernels::ChunkStats>> stats =
        device_encoder_->Stats(device_gradients, params_.total_elements(),
                               chunks);
    if (!stats.ok()) return AtStep(step, stats.status());
    TERN_RETURN_IF_ERROR(ComputeScalers(step, &scalers, &*stats));
  } else {
    TERN_RETURN_IF_ERROR(ComputeScalers(step, &scalers));
  }
  rec->encode_s += SecondsSince(phase);

  // 3. Scaler sharing: s_k = max_i s_ik from each TernGrad chunk's shard.
  // Every shard takes part, also one without TernGrad chunks (an empty
  // list): the shards run the same two barriers per step whatever they own.
  if (share_scalers_) {
    phase = absl::Now();
    std::vector<ShardRequest<ShareScalersRequest>> requests;
    for (uint32_t shard = 0; shard < num_shards; ++shard) {
      const std::vector<uint32_t>& keys = plan_.shard_scaler_chunks[shard];
      ShardRequest<ShareScalersRequest> request;
      request.shard = shard;
      request.request.set_worker_id(options_.worker_id);
      request.request.set_step(step);
      for (const uint32_t key : keys) {
        auto* scaler = request.request.add_scalers();
        scaler->set_chunk_key(key);
        scaler->set_scaler(scalers[key]);
      }
      rec->push_msg_bytes += request.request.ByteSizeLong();
      requests.push_back(std::move(request));
    }
    std::vector<uint32_t> asked;
    for (const auto& request : requests) asked.push_back(request.shard);
    absl::StatusOr<std::vector<tern::v1::ShareScalersResponse>> responses =
        client.ShareScalers(std::move(requests));
    if (!responses.ok()) return AtStep(step, responses.status());
    for (size_t r = 0; r < responses->size(); ++r) {
      const auto& response = (*responses)[r];
      const uint32_t shard = asked[r];
      rec->pull_msg_bytes += response.ByteSizeLong();
      const std::vector<uint32_t>& keys = plan_.shard_scaler_chunks[shard];
      std::vector<bool> seen(chunks.size(), false);
      size_t answered = 0;
      for (const tern::v1::ChunkScaler& shared : response.scalers()) {
        const uint32_t key = shared.chunk_key();
        if (!std::binary_search(keys.begin(), keys.end(), key) || seen[key] ||
            !std::isfinite(shared.scaler()) || shared.scaler() < 0) {
          return absl::InternalError(absl::StrCat(
              "step ", step, ": shard ", shard, " (", client.name(shard),
              ") answered ShareScalers with an unexpected, repeated or "
              "invalid scaler ",
              shared.scaler(), " for chunk ", key));
        }
        seen[key] = true;
        scalers[key] = shared.scaler();
        ++answered;
      }
      if (answered != keys.size() || response.step() != step) {
        return absl::InternalError(absl::StrCat(
            "step ", step, ": shard ", shard, " (", client.name(shard),
            ") answered ShareScalers for step ", response.step(), " with ",
            answered, " of ", keys.size(), " scalers"));
      }
    }
    rec->network_s += SecondsSince(phase);
  }

  // 4. Encode every chunk and push it to its shard; with error feedback,
  // every compressed chunk is compensated first (and dropping's global
  // threshold selected over all of them).
  phase = absl::Now();
  float threshold = 0.0f;
  if (codecs_.feedback != nullptr) {
    TERN_ASSIGN_OR_RETURN(threshold, Compensate(step));
  }
  std::vector<std::optional<kernels::Payload>> device_payloads;
  if (device_encoder_ != nullptr) {
    TERN_ASSIGN_OR_RETURN(device_payloads,
                          EncodeOnDevice(step, device_gradients, scalers));
  }
  std::vector<ShardRequest<PushPullRequest>> pushes(num_shards);
  for (uint32_t shard = 0; shard < num_shards; ++shard) {
    pushes[shard].shard = shard;
    pushes[shard].request.set_worker_id(options_.worker_id);
    pushes[shard].request.set_step(step);
    for (const uint32_t key : plan_.shard_chunks[shard]) {
      const Chunk& chunk = chunks[key];
      kernels::EncodeContext context;
      // Draws are a pure function of (seed, step, chunk, worker, element):
      // DESIGN section 2. The step wraps at 2^32 in the counter.
      context.stream = RandomStream{options_.seed, static_cast<uint32_t>(step),
                                    key, options_.worker_id};
      const bool fp32 = plan_.fp32_chunk[key];
      context.scaler = fp32 ? 0.0f : scalers[key];
      context.threshold = fp32 ? 0.0f : threshold;
      context.group_size = codecs_.group_sizes[key];
      absl::StatusOr<kernels::Payload> payload =
          !fp32 && device_encoder_ != nullptr
              ? *std::move(device_payloads[key])
          : !fp32 && codecs_.feedback != nullptr
              ? codecs_.feedback->EncodeCompensated(
                    key, params_.ChunkGradients(chunk), context)
              : CodecOf(key).Encode(params_.ChunkGradients(chunk), context);
      if (!payload.ok()) {
        return AtStep(
            step,
            absl::Status(payload.status().code(),
                         absl::StrCat("encoding chunk ", key, " of '",
                                      params_.names()[chunk.tensor],
                                      "': ", payload.status().message())));
      }
      tern::v1::ChunkPayload* wire = pushes[shard].request.add_chunks();
      wire->set_chunk_key(key);
      core::PayloadToWire(*std::move(payload), wire->mutable_payload());
      rec->push_bytes += core::PayloadBytes(wire->payload());
    }
    rec->push_msg_bytes += pushes[shard].request.ByteSizeLong();
  }
  rec->encode_s += SecondsSince(phase);

  phase = absl::Now();
  absl::StatusOr<std::vector<tern::v1::PushPullResponse>> pulls =
      client.PushPull(std::move(pushes));
  if (!pulls.ok()) return AtStep(step, pulls.status());
  rec->network_s += SecondsSince(phase);

  // 5. Decode the averages into the gradient buffer.
  phase = absl::Now();
  std::vector<bool> seen(chunks.size(), false);
  for (uint32_t shard = 0; shard < num_shards; ++shard) {
    const tern::v1::PushPullResponse& pull = (*pulls)[shard];
    rec->pull_msg_bytes += pull.ByteSizeLong();
    const auto shard_error = [&](const std::string& what) {
      return absl::InternalError(absl::StrCat("step ", step, ": shard ", shard,
                                              " (", client.name(shard),
                                              "): PushPull answer: ", what));
    };
    if (pull.step() != step) {
      return shard_error(absl::StrCat("it is for step ", pull.step()));
    }
    if (static_cast<size_t>(pull.chunks_size()) !=
        plan_.shard_chunks[shard].size()) {
      return shard_error(absl::StrCat(pull.chunks_size(), " chunks, expected ",
                                      plan_.shard_chunks[shard].size()));
    }
    for (const tern::v1::ChunkPayload& wire : pull.chunks()) {
      const uint32_t key = wire.chunk_key();
      if (key >= chunks.size() || chunks[key].shard != shard || seen[key]) {
        return shard_error(
            absl::StrCat("chunk ", key, " is not this shard's or repeated"));
      }
      seen[key] = true;
      rec->pull_bytes += core::PayloadBytes(wire.payload());
      absl::StatusOr<kernels::Payload> payload =
          core::PayloadFromWire(wire.payload());
      absl::Status decoded = payload.status();
      if (decoded.ok()) {
        decoded =
            CodecOf(key).Decode(*payload, params_.ChunkGradients(chunks[key]));
      }
      if (!decoded.ok()) {
        return absl::Status(
            decoded.code(),
            absl::StrCat("step ", step, ": shard ", shard, " (",
                         client.name(shard), "): chunk ", key, " of '",
                         params_.names()[chunks[key].tensor],
                         "': ", decoded.message()));
      }
    }
  }

  // 6. Apply: every replica runs the same update on the same bytes.
  params_.ScatterGradients();
  for (auto& group : optimizer_->param_groups())
    group.options().set_lr(rec->lr);
  optimizer_->step();
  rec->decode_s = SecondsSince(phase);
  return absl::OkStatus();
}

absl::Status Trainer::Run(PsClient& client, MetricsWriter* metrics) {
  TERN_RETURN_IF_ERROR(Join(client));
  model_->train();
  const uint64_t fp32_bytes = sizeof(float) * params_.total_elements();
  const absl::Time start = absl::Now();
  absl::Time last_log = start;
  uint64_t steps_since_log = 0;
  double loss_since_log = 0;

  for (uint64_t step = start_step_; step < options_.steps; ++step) {
    StepRecord rec;
    rec.worker = options_.worker_id;
    rec.step = step;
    rec.lr = schedule_.Rate(step);
    rec.fp32_bytes = fp32_bytes;
    TERN_RETURN_IF_ERROR(Step(client, step, &rec));
    ++steps_since_log;
    loss_since_log += rec.loss;

    const bool final = step + 1 == options_.steps;
    std::optional<Evaluation> evaluation;
    if (final || Every(options_.eval_every, step)) {
      const absl::Time eval_start = absl::Now();
      evaluation = Evaluate(*model_, data_.test, kEvalBatch);
      rec.eval_s = SecondsSince(eval_start);
      rec.test_accuracy = evaluation->accuracy;
      rec.test_loss = evaluation->loss;
    }
    // weightgrad/gaia: replicas differ by design; the check is the LPS's
    // final checksum, which the final answer's fp32 weights must match.
    const bool check =
        !lps_mode_ && (final || Every(options_.check_every, step));
    if (check) rec.param_checksum = params_.Checksum();
    if (lps_mode_ && final) {
      const uint64_t loaded = params_.Checksum();
      if (loaded != lps_checksum_) {
        return absl::InternalError(absl::StrCat(
            "step ", step, ": the final weights from the LPS have checksum ",
            FormatChecksum(loaded), ", but the LPS reports ",
            FormatChecksum(lps_checksum_)));
      }
      rec.param_checksum = loaded;
    }
    rec.final = final;
    rec.wall_s = SecondsSince(start);
    // The record goes out before the check, so a divergence leaves the
    // checksum that disagreed in the metrics.
    if (metrics != nullptr) TERN_RETURN_IF_ERROR(metrics->Write(rec));

    if (check) {
      tern::v1::CheckParamsRequest request;
      request.set_worker_id(options_.worker_id);
      request.set_step(step);
      request.set_param_checksum(*rec.param_checksum);
      const absl::Status checked = client.CheckParams(request);
      if (absl::IsFailedPrecondition(checked)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "step ", step, ": this replica's parameters (checksum ",
            FormatChecksum(*rec.param_checksum),
            ") differ from another worker's: ", checked.message()));
      }
      if (!checked.ok()) return AtStep(step, checked);
    }

    // After the checks: a checkpoint holds a replica the shards vouched for.
    if (!checkpoint_path_.empty() &&
        (final || Every(options_.checkpoint_every, step))) {
      if (absl::Status saved = SaveCheckpoint(step + 1); !saved.ok()) {
        return AtStep(step, saved);
      }
    }

    const absl::Time now = absl::Now();
    if (evaluation.has_value() || now - last_log >= kProgressEvery) {
      const double rate = steps_since_log /
                          std::max(1e-9, absl::ToDoubleSeconds(now - last_log));
      if (evaluation.has_value()) {
        logger_->info(
            "step {}/{} loss {:.4f} lr {:.4g} {:.2f} steps/s test accuracy "
            "{:.4f} test loss {:.4f}",
            step + 1, options_.steps, loss_since_log / steps_since_log, rec.lr,
            rate, evaluation->accuracy, evaluation->loss);
      } else {
        logger_->info("step {}/{} loss {:.4f} lr {:.4g} {:.2f} steps/s",
                      step + 1, options_.steps,
                      loss_since_log / steps_since_log, rec.lr, rate);
      }
      last_log = now;
      steps_since_log = 0;
      loss_since_log = 0;
    }
    if (final) {
      final_evaluation_ = evaluation;
      final_checksum_ = *rec.param_checksum;
    }
  }
  logger_->info(
      "done: {} steps in {:.1f} s, final checksum {}{}", options_.steps,
      SecondsSince(start), FormatChecksum(final_checksum_),
      lps_mode_ ? " (the LPS's, after the final synchronization)" : "");
  return absl::OkStatus();
}

}  // namespace tern::worker
