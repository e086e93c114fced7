#include "worker/worker_flags.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/flags/flags.h"
#include "common/status_macros.h"
#include "kernels/payload.h"
#include "worker/codec_config.h"
#include "worker/train_mode.h"

namespace tern::worker {
namespace {

using flags::FiniteBetween;
using flags::FiniteIn;
using flags::FinitePositive;
using flags::Flag;
using flags::HostPort;
using flags::NonEmpty;
using flags::Switch;

// Reads a name into an enum flag once, at parse time: `parse` turns the
// name into the enum and the transform hands CLI11 its number, which CLI11
// stores into the enum field. A name `parse` refuses fails the parse with
// "'<name>' is not one of <names>".
template <typename Enum, typename Parse>
CLI::Validator EnumName(Parse parse, std::string (*names)(),
                        const std::string& label) {
  return CLI::Validator(
      [parse, names](std::string& input) -> std::string {
        const absl::StatusOr<Enum> value = parse(input);
        if (!value.ok()) {
          return absl::StrCat("'", input, "' is not one of ", names());
        }
        input = std::to_string(
            static_cast<std::underlying_type_t<Enum>>(*value));
        return std::string();
      },
      label);
}

// --mode: terngrad, weightgrad or gaia (worker/train_mode.h).
CLI::Validator TrainModeFlag() {
  return EnumName<TrainMode>(
      [](absl::string_view name) { return ParseTrainMode(name); },
      &TrainModeNames, "{" + TrainModeNames() + "}");
}

// --codec: a gradient codec's name, as ParseGradientCodec reads it.
CLI::Validator GradientCodecFlag() {
  return EnumName<kernels::CodecId>(
      [](absl::string_view name) { return ParseGradientCodec(name); },
      &GradientCodecNames, "CODEC");
}

// "cpu", "cuda" or "cuda:N" (N a device ordinal below 64).
bool IsDeviceName(const std::string& name) {
  if (name == "cpu" || name == "cuda") return true;
  if (!absl::StartsWith(name, "cuda:")) return false;
  uint32_t ordinal = 0;
  return absl::SimpleAtoi(name.substr(5), &ordinal) && ordinal < 64 &&
         name.substr(5) == std::to_string(ordinal);
}

// What --mode=weightgrad|gaia asks of the other flags: one LPS, which runs
// momentum SGD and holds the state, and the gradient codec it decodes.
absl::Status ValidateLpsModeOptions(const WorkerOptions& o) {
  const absl::string_view mode = TrainModeName(o.mode);
  if (o.ps.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--mode=", mode,
                     " takes one --ps (the data center's local "
                     "parameter server), not ",
                     o.ps.size()));
  }
  if (o.optimizer == "adam") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--optimizer=adam with --mode=", mode,
        ": the local parameter server runs momentum SGD (sgd or momentum)"));
  }
  if (o.momentum >= 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--momentum must be below 1 with --mode=", mode));
  }
  if (!o.checkpoint_dir.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--checkpoint_dir with --mode=", mode,
        ": the local parameter server holds the weights and optimizer "
        "state; worker checkpoints are for --mode=terngrad"));
  }
  const bool terngrad = o.codec == kernels::CodecId::kTernGrad;
  if (o.mode == TrainMode::kWeightGrad && !terngrad) {
    return absl::InvalidArgumentError(
        absl::StrCat("--codec=", kernels::CodecName(o.codec),
                     " with --mode=weightgrad: workers push TernGrad "
                     "gradients (--codec=terngrad)"));
  }
  if (o.mode == TrainMode::kGaia && !terngrad &&
      o.codec != kernels::CodecId::kFp32) {
    return absl::InvalidArgumentError(
        absl::StrCat("--codec=", kernels::CodecName(o.codec),
                     " with --mode=gaia: workers push fp32"));
  }
  return absl::OkStatus();
}

}  // namespace

void AddWorkerFlags(CLI::App* app, WorkerOptions* o) {
  constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
  constexpr uint32_t kU32Max = std::numeric_limits<uint32_t>::max();
  const double kInf = std::numeric_limits<double>::infinity();

  // --- cluster ---
  Flag(app, "mode", &o->mode,
       "terngrad: share scalers, push ternary gradients, pull their sum and "
       "step a local optimizer (DESIGN section 3). weightgrad: push the "
       "gradient ternarized with this worker's own scaler to the data "
       "center's local parameter server (one --ps, `tern ps "
       "--mode=weightgrad`), which runs the optimizer (momentum SGD with "
       "--lr, --momentum, --weight_decay and the schedule, sent at join) and "
       "answers with its weights, which this worker loads; the last step's "
       "answer is the final model in fp32, and its checksum is the LPS's. "
       "gaia: the same with fp32 gradients (--codec fp32 or left at its "
       "default)")
      ->transform(TrainModeFlag())
      ->default_str(std::string(TrainModeName(o->mode)))
      ->group("Cluster");
  Flag(app, "worker_id", &o->worker_id,
       "this worker's index in [0, num_workers)")
      ->group("Cluster");
  Flag(app, "num_workers", &o->num_workers, "number of workers in the job")
      ->check(CLI::Range(1u, kU32Max))
      ->group("Cluster");
  Flag(app, "data_slice", &o->data_slice,
       "which slice of the training set this worker reads, in [0, "
       "num_data_slices) (default: its --worker_id)")
      ->group("Cluster");
  Flag(app, "num_data_slices", &o->num_data_slices,
       "how many slices the training set is cut into (0: --num_workers); "
       "geo runs give every worker of every data center its own slice")
      ->group("Cluster");
  Flag(app, "ps", &o->ps,
       "parameter-server shard addresses host:port, comma-separated, in "
       "shard-index order")
      ->delimiter(',')
      ->check(HostPort())
      ->group("Cluster");
  Flag(app, "run_id", &o->run_id,
       "name of the run; every worker and shard must agree on it")
      ->check(NonEmpty())
      ->group("Cluster");
  Flag(app, "seed", &o->seed,
       "run seed: model init, data order and the stochastic rounding")
      ->group("Cluster");
  Flag(app, "rpc_timeout_s", &o->rpc_timeout_s,
       "deadline of every RPC to a shard, in seconds")
      ->check(FinitePositive())
      ->group("Cluster");
  Flag(app, "join_timeout_s", &o->join_timeout_s,
       "how long to keep trying to reach the shards at start, in seconds")
      ->check(FinitePositive())
      ->group("Cluster");

  // --- model and data ---
  Flag(app, "model", &o->model, "model to train")
      ->check(CLI::IsMember({"lenet", "mlp", "cifarnet"}))
      ->group("Model and data");
  Flag(app, "dataset", &o->dataset, "data set to train on")
      ->check(CLI::IsMember({"fashion-mnist", "mnist", "cifar10", "synthetic"}))
      ->group("Model and data");
  Flag(app, "data_dir", &o->data_dir,
       "directory of the data set files (empty: the data set's default)")
      ->group("Model and data");
  Flag(app, "batch_size", &o->batch_size, "examples per step on this worker")
      ->check(CLI::Range(1u, 1u << 20))
      ->group("Model and data");
  Flag(app, "steps", &o->steps, "training steps")
      ->check(CLI::Range(uint64_t{1}, kU64Max))
      ->group("Model and data");
  Flag(app, "threads", &o->threads, "libtorch intra-op threads")
      ->check(CLI::Range(1u, 1024u))
      ->group("Model and data");
  Flag(app, "device", &o->device,
       "cpu, cuda or cuda:N: where the model trains; on a GPU the TernGrad "
       "codec also encodes there (needs a --config=cuda build against a "
       "CUDA libtorch, README 'GPU workers')")
      ->check(CLI::Validator(
          [](std::string& name) -> std::string {
            return IsDeviceName(name) ? "" : "not cpu, cuda or cuda:N";
          },
          "DEVICE"))
      ->group("Model and data");

  // --- optimizer ---
  Flag(app, "optimizer", &o->optimizer,
       "sgd, momentum (SGD with --momentum) or adam")
      ->check(CLI::IsMember({"sgd", "momentum", "adam"}))
      ->group("Optimizer");
  Flag(app, "lr", &o->lr, "base learning rate")
      ->check(FiniteIn(0, kInf))
      ->group("Optimizer");
  Flag(app, "momentum", &o->momentum,
       "momentum of --optimizer=momentum (beta1 of adam)")
      ->check(FiniteIn(0, 1))
      ->group("Optimizer");
  Flag(app, "weight_decay", &o->weight_decay, "L2 weight decay")
      ->check(FiniteIn(0, kInf))
      ->group("Optimizer");
  Flag(app, "lr_schedule", &o->lr_schedule,
       "constant; poly: lr*(1-t/steps)^0.5 (TernGrad); step: "
       "lr*lr_gamma^floor(t/lr_step_every)")
      ->check(CLI::IsMember({"constant", "poly", "step"}))
      ->group("Optimizer");
  Flag(app, "lr_step_every", &o->lr_step_every,
       "step schedule: steps between two decays")
      ->check(CLI::Range(uint64_t{1}, kU64Max))
      ->group("Optimizer");
  Flag(app, "lr_gamma", &o->lr_gamma, "step schedule: decay factor")
      ->check(FiniteIn(0, kInf))
      ->group("Optimizer");

  // --- communication ---
  Flag(app, "codec", &o->codec,
       "gradient codec on the wire: terngrad (Wen et al. 2017); fp32, fp16 "
       "(baselines); onebit (Seide et al. 2014), threshold (Strom 2015), "
       "adaptive (Dryden et al. 2016), dropping (Aji & Heafield 2017) with "
       "error feedback; qsgd (Alistarh et al. 2017). Error-feedback "
       "residuals are part of the worker's checkpoint (--checkpoint_dir)")
      ->transform(GradientCodecFlag())
      ->default_str(kernels::CodecName(o->codec))
      ->group("Communication");
  Flag(app, "packing", &o->packing,
       "terngrad push layout: 2bit (4 codes a byte) or base3 (5 a byte)")
      ->check(CLI::IsMember({"2bit", "base3"}))
      ->group("Communication");
  Flag(app, "sum_packing", &o->sum_packing,
       "terngrad pull layout: bits (ceil(log2(2N+1)) bits a sum) or radix "
       "(radix-(2N+1) digits in 64-bit words)")
      ->check(CLI::IsMember({"bits", "radix"}))
      ->group("Communication");
  Flag(app, "clip", &o->clip,
       "TernGrad clipping at clip*sigma of each chunk; 0 disables clipping")
      ->check(FiniteIn(0, kInf))
      ->group("Communication");
  Flag(app, "fp32_tensors", &o->fp32_tensors,
       "tensors sent in fp32 whatever the codec, by exact name, "
       "comma-separated; 'last' names the model's last weight and bias")
      ->delimiter(',')
      ->check(NonEmpty())
      ->group("Communication");
  Flag(app, "min_compress_elems", &o->min_compress_elems,
       "tensors with fewer elements are sent in fp32")
      ->group("Communication");
  Flag(app, "partition_bytes", &o->partition_bytes,
       "largest chunk, in fp32 bytes (the unit of sharding and of scalers)")
      ->check(CLI::Range(uint64_t{4}, kU64Max))
      ->group("Communication");

  // --- compressors (kernels/codec_options.h) ---
  Flag(app, "tau", &o->tau,
       "threshold (Strom 2015): an error-compensated value reaching +-tau is "
       "sent as +-tau; the rest stays in the residual")
      ->check(FinitePositive())
      ->group("Compressors");
  Flag(app, "proportion", &o->proportion,
       "adaptive (Dryden et al. 2016): the fraction of the non-negative and, "
       "separately, of the negative values sent each step")
      ->check(FiniteBetween(0, 1))
      ->group("Compressors");
  Flag(app, "drop_ratio", &o->drop_ratio,
       "dropping (Aji & Heafield 2017): the fraction R of values dropped, "
       "smallest |value| first; they stay in the residual")
      ->check(FiniteBetween(0, 1))
      ->group("Compressors");
  Flag(app, "drop_scope", &o->drop_scope,
       "dropping: global (one threshold over the whole gradient, selected by "
       "the worker) or tensor (one per chunk: per tensor below "
       "--partition_bytes)")
      ->check(CLI::IsMember({"global", "tensor"}))
      ->group("Compressors");
  Switch(app, "drop_quantize", &o->drop_quantize,
         "dropping: send the survivors as 2-bit codes (sign -> the chunk's "
         "mean of that sign, INDEX_SIGN) instead of (index, float) pairs")
      ->group("Compressors");
  Flag(app, "qsgd_levels", &o->qsgd_levels,
       "qsgd (Alistarh et al. 2017): levels s per sign; a value takes "
       "ceil(log2(2s+1)) bits")
      ->check(CLI::Range(1u, kMaxQsgdLevels))
      ->group("Compressors");
  Flag(app, "qsgd_bucket", &o->qsgd_bucket,
       "qsgd: elements per bucket, each scaled by its own L2 norm")
      ->check(CLI::Range(1u, kU32Max))
      ->group("Compressors");
  Flag(app, "sample_size", &o->sample_size,
       "adaptive and dropping: elements drawn (counter-based RNG) to select "
       "thresholds; onebit with --sampled_means: to estimate the means. A "
       "chunk this small or smaller is used whole")
      ->check(CLI::Range(1u, kU32Max))
      ->group("Compressors");
  Switch(app, "sampled_means", &o->sampled_means,
         "onebit (Seide et al. 2014): estimate each column's two "
         "reconstruction values from --sample_size drawn elements instead of "
         "all of them")
      ->group("Compressors");

  // --- checks and output ---
  Flag(app, "check_every", &o->check_every,
       "compare parameter checksums with the shards every N steps (0: only "
       "at the end)")
      ->group("Checks and output");
  Flag(app, "eval_every", &o->eval_every,
       "evaluate on the test set every N steps (0: only at the end)")
      ->group("Checks and output");
  Flag(app, "metrics_out", &o->metrics_out,
       "JSONL file, one record per step (empty: none)")
      ->group("Checks and output");
  Flag(app, "checkpoint_dir", &o->checkpoint_dir,
       "directory of this worker's checkpoint (worker-<id>.ckpt: parameters, "
       "optimizer state, error-feedback residuals, step, data position); "
       "when the file exists the worker resumes from it and rejoins the "
       "running shards (empty: no checkpoints; --mode=terngrad only)")
      ->group("Checks and output");
  Flag(app, "checkpoint_every", &o->checkpoint_every,
       "write the checkpoint every N steps (also after the last step; 0: "
       "only then)")
      ->group("Checks and output");
  Flag(app, "log_level", &o->log_level,
       "trace, debug, info, warn, error, critical or off")
      ->check(flags::LogLevel())
      ->group("Checks and output");
}

absl::Status ValidateWorkerOptions(const WorkerOptions& o) {
  if (o.num_workers == 0) {
    return absl::InvalidArgumentError("--num_workers must be at least 1");
  }
  if (o.worker_id >= o.num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("--worker_id=", o.worker_id,
                     " is not below --num_workers=", o.num_workers));
  }
  if (o.num_data_slices != 0 && o.data_slice >= o.num_data_slices) {
    return absl::InvalidArgumentError(
        absl::StrCat("--data_slice=", o.data_slice,
                     " is not below --num_data_slices=", o.num_data_slices));
  }
  if (o.ps.empty()) {
    return absl::InvalidArgumentError(
        "--ps is empty: give the shard addresses (host:port, comma-separated)");
  }
  for (const std::string& address : o.ps) {
    if (address.empty() || address.find(':') == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--ps: '", address, "' is not an address of the form host:port"));
    }
  }
  if (o.run_id.empty()) {
    return absl::InvalidArgumentError("--run_id must not be empty");
  }
  if (!(o.rpc_timeout_s > 0) || !std::isfinite(o.rpc_timeout_s)) {
    return absl::InvalidArgumentError("--rpc_timeout_s must be a number > 0");
  }
  if (!(o.join_timeout_s > 0) || !std::isfinite(o.join_timeout_s)) {
    return absl::InvalidArgumentError("--join_timeout_s must be a number > 0");
  }
  if (o.batch_size == 0) {
    return absl::InvalidArgumentError("--batch_size must be at least 1");
  }
  if (o.steps == 0) {
    return absl::InvalidArgumentError("--steps must be at least 1");
  }
  if (o.threads == 0) {
    return absl::InvalidArgumentError("--threads must be at least 1");
  }
  if (!IsDeviceName(o.device)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--device: '", o.device, "' is not cpu, cuda or cuda:N"));
  }
  if (o.partition_bytes < 4) {
    return absl::InvalidArgumentError(
        "--partition_bytes must be at least 4 (one float)");
  }
  if (!(o.momentum >= 0 && o.momentum <= 1)) {
    return absl::InvalidArgumentError("--momentum must be in [0, 1]");
  }
  if (!(o.weight_decay >= 0) || !std::isfinite(o.weight_decay)) {
    return absl::InvalidArgumentError(
        "--weight_decay must be a finite number >= 0");
  }
  if (o.optimizer != "sgd" && o.optimizer != "momentum" &&
      o.optimizer != "adam") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--optimizer: '", o.optimizer, "' is not sgd, momentum or adam"));
  }
  if (!IsKnownTrainMode(o.mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--mode: ", static_cast<int>(o.mode),
                     " is not one of ", TrainModeNames()));
  }
  if (UsesLocalParameterServer(o.mode)) {
    TERN_RETURN_IF_ERROR(ValidateLpsModeOptions(o));
  }
  // --codec, --clip, --packing, --sum_packing and the compressors' flags.
  return MakeRunCodecOptions(o).status();
}

}  // namespace tern::worker
