#include "worker/worker_flags.h"

#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/flags/flags.h"
#include "common/metrics/metrics_flags.h"
#include "common/net/pacing_flag.h"
#include "common/net/tls_flags.h"
#include "kernels/payload.h"
#include "worker/codec_config.h"
#include "worker/train_mode.h"

namespace tern::worker {
namespace {

using flags::EnumName;
using flags::FiniteBetween;
using flags::FiniteIn;
using flags::FinitePositive;
using flags::Flag;
using flags::HostPort;
using flags::NonEmpty;
using flags::Switch;

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

// Who this worker is and which shards it talks to.
void AddClusterFlags(CLI::App* app, WorkerOptions* o) {
  constexpr uint32_t kU32Max = std::numeric_limits<uint32_t>::max();
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
}

// How the step's exchange with the shards runs, and how long it waits for
// them.
void AddExchangeFlags(CLI::App* app, WorkerOptions* o) {
  Flag(app, "broadcast_start", &o->broadcast_start,
       "terngrad: start from worker 0's parameters, which it sends with its "
       "join and the shards hand to every worker (every worker of the run "
       "sets it); otherwise each worker builds its own and they must match")
      ->group("Cluster");
  Flag(app, "overlap", &o->overlap,
       "terngrad on the CPU: push each shard's chunks as soon as backward has "
       "produced them, while the rest of backward runs, and decode each "
       "shard's answer as it comes (the same bytes as without it; workers "
       "with and without it can share a run). Shard 0 holds the last layers "
       "with --shard_assignment even or backward, and is pushed first. Not "
       "with codecs that keep error feedback")
      ->group("Cluster");
  Flag(app, "shard_assignment", &o->shard_assignment,
       "which shard owns which chunks; every worker of a run must agree. "
       "even: the model cut into equal runs, shard 0 holding its end, "
       "tensors cut where a run ends (every shard's link carries the same "
       "bytes). balanced: whole chunks of --partition_bytes, largest first "
       "to the least-loaded shard (up to one chunk apart: the rule before "
       "2026-12-01, for shards saved with it). backward: whole chunks in "
       "backward order, contiguous runs of about equal size")
      ->check(CLI::IsMember({"even", "balanced", "backward"}))
      ->group("Cluster");
  Flag(app, "push_order", &o->push_order,
       "together: push to every shard at once. in_turn: push to one shard "
       "after another in shard order, each as soon as the previous shard has "
       "taken its push (not answered it), so that answers come down while "
       "the next pushes go up: for shards on their own host (with a shard "
       "on every worker host every worker would push to shard 0's host "
       "first: keep together there). local_last: push to the shards on other "
       "hosts at once and to this host's own shards (found from this "
       "machine's interface addresses; a host name other than localhost "
       "counts as another host) once the others have taken their pushes, so "
       "that this host's shard does not answer up this host's link while "
       "this worker still pushes up it: for a shard on every worker host "
       "with fp32 or fp16 over a slow link. The same bytes and parameters "
       "every way")
      ->check(CLI::IsMember({"together", "in_turn", "local_last"}))
      ->group("Cluster");
  Flag(app, "rpc_timeout_s", &o->rpc_timeout_s,
       "deadline of every RPC to a shard, in seconds")
      ->check(FinitePositive())
      ->group("Cluster");
  Flag(app, "join_timeout_s", &o->join_timeout_s,
       "how long to keep trying to reach the shards at start, in seconds")
      ->check(FinitePositive())
      ->group("Cluster");
  Flag(app, "straggler_warn_s", &o->straggler_warn_s,
       "log a shard's call still unanswered after this many seconds (a late "
       "worker holds the step; the shard's log names it); 0: never")
      ->check(CLI::NonNegativeNumber)
      ->group("Cluster");
  Flag(app, "server_loss_timeout_s", &o->server_loss_timeout_s,
       "how long to keep retrying a shard that went away mid-run (a shard "
       "restarted with --state_dir resumes the run), in seconds; then the "
       "worker exits with code 128 (transient)")
      ->check(FinitePositive())
      ->group("Cluster");
  net::AddPaceFlag(app, &o->pace_mbit)->group("Cluster");
  net::AddTlsFlags(app, &o->tls, "Cluster");
}

// What this worker trains, on which data and where.
void AddModelAndDataFlags(CLI::App* app, WorkerOptions* o) {
  constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
  Flag(app, "model", &o->model,
       "model to train: lenet, mlp, cifarnet, or PATH.pt, a TorchScript "
       "module (worker/README.md)")
      ->check(CLI::Validator(
          [](std::string& name) -> std::string {
            // IsTorchScriptPath (worker/models.h), without libtorch here.
            return name == "lenet" || name == "mlp" || name == "cifarnet" ||
                           absl::EndsWith(name, ".pt")
                       ? ""
                       : "not lenet, mlp, cifarnet or a PATH.pt";
          },
          "MODEL"))
      ->group("Model and data");
  Flag(app, "loss", &o->loss,
       "cross_entropy (classes) or mse (float32 targets); a TorchScript "
       "module with returns_loss = True computes its own")
      ->check(CLI::IsMember({"cross_entropy", "mse"}))
      ->group("Model and data");
  Flag(app, "dataset", &o->dataset,
       "data set to train on (npy: DIR/{train,test}_{x,y}.npy, see "
       "worker/README.md)")
      ->check(CLI::IsMember(
          {"fashion-mnist", "mnist", "cifar10", "synthetic", "npy"}))
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
  Flag(app, "threads", &o->threads,
       "threads for the model's arithmetic: libtorch's intra-op pool and, "
       "when libblas is OpenBLAS, OpenBLAS's pool")
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
}

// The optimizer and its learning-rate schedule.
void AddOptimizerFlags(CLI::App* app, WorkerOptions* o) {
  constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
  const double kInf = std::numeric_limits<double>::infinity();
  Flag(app, "optimizer", &o->optimizer,
       "sgd, momentum (SGD with --momentum), adam or adagrad")
      ->check(CLI::IsMember({"sgd", "momentum", "adam", "adagrad"}))
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
}

// How gradients travel: the codec, its layouts and what stays fp32.
void AddCommunicationFlags(CLI::App* app, WorkerOptions* o) {
  constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
  const double kInf = std::numeric_limits<double>::infinity();
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
       "terngrad pull layout: bits (ceil(log2(2N+1)) bits a sum), radix "
       "(radix-(2N+1) digits in 64-bit words) or huffman (entropy-coded "
       "per chunk: fewest bytes, most CPU)")
      ->check(CLI::IsMember({"bits", "radix", "huffman"}))
      ->group("Communication");
  Flag(app, "clip", &o->clip,
       "TernGrad clipping at clip*sigma of each chunk; 0 disables clipping")
      ->check(FiniteIn(0, kInf))
      ->group("Communication");
  Flag(app, "clip_rule", &o->clip_rule,
       "TernGrad: worker (each worker clips its gradient at its own "
       "min(clip*sigma_i, max|g_i|) before ternarizing with the shared "
       "scaler, Wen et al. 2017 Sec. 3.3) or shared (clip at the shared "
       "scaler only, tern before issue 18)")
      ->check(CLI::IsMember({"worker", "shared"}))
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
}

// The compressors' own knobs (kernels/codec_options.h).
void AddCompressorFlags(CLI::App* app, WorkerOptions* o) {
  constexpr uint32_t kU32Max = std::numeric_limits<uint32_t>::max();
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
  Flag(app, "drop_survivors", &o->drop_survivors,
       "dropping: how the kept values are sent: values ((index, float32) "
       "pairs, INDEX_VALUE), 1bit (a sign bit -> the chunk's mean of that "
       "sign, INDEX_SIGN: Aji & Heafield's 1-bit average, section 5.4) or "
       "2bit (sign and large/small bits -> the bucket's mean |value|, "
       "INDEX_2BIT: their 2-bit quantization, sections 5.4 and 6)")
      ->check(CLI::IsMember({"values", "1bit", "2bit"}))
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
}

// Checksums, evaluation, metrics, checkpoints and logging.
void AddChecksAndOutputFlags(CLI::App* app, WorkerOptions* o) {
  Flag(app, "check_every", &o->check_every,
       "compare parameter checksums with the shards every N steps (0: only "
       "at the end)")
      ->group("Checks and output");
  Flag(app, "eval_every", &o->eval_every,
       "evaluate on the test set every N steps (0: only at the end)")
      ->group("Checks and output");
  Flag(app, "final_eval", &o->final_eval,
       "evaluate on the test set after the last step as well (false: the "
       "last record has no accuracy, as bench/net.sh runs it)")
      ->group("Checks and output");
  Flag(app, "eval_ema_decay", &o->eval_ema_decay,
       "evaluate an exponential moving average of the parameters with this "
       "decay, ramped as min(decay, (1+t)/(10+t)) (TernGrad evaluates with "
       "0.9999); training is unchanged; 0: evaluate the parameters")
      ->check(FiniteIn(0, 0.999999999))
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
  Flag(app, "save_model", &o->save_model,
       "after the last step, write the trained model to this file: "
       "--model=PATH.pt as a TorchScript file (torch.jit.load), a built-in "
       "model as libtorch's archive of its parameters and buffers "
       "(torch.jit.load(FILE).state_dict()); float32 on the CPU; its "
       "directory is made if missing (empty: none; tern launch gives it to "
       "worker 0 only)")
      ->group("Checks and output");
  Flag(app, "log_level", &o->log_level,
       "trace, debug, info, warn, error, critical or off")
      ->check(flags::LogLevel())
      ->group("Checks and output");
  metrics::AddMetricsFlags(app, &o->metrics, "Checks and output");
}

}  // namespace

// The groups register in the order --help lists them.
void AddWorkerFlags(CLI::App* app, WorkerOptions* options) {
  AddClusterFlags(app, options);
  AddExchangeFlags(app, options);
  AddModelAndDataFlags(app, options);
  AddOptimizerFlags(app, options);
  AddCommunicationFlags(app, options);
  AddCompressorFlags(app, options);
  AddChecksAndOutputFlags(app, options);
}

}  // namespace tern::worker
