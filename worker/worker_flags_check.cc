// ValidateWorkerOptions and IsDeviceName: the checks of worker_flags.h that
// a flag's own check cannot make (several flags together, or options built
// without a parse).
#include "worker/worker_flags.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/flags/flag_checks.h"
#include "common/metrics/metrics_flags.h"
#include "common/net/tls_flags.h"
#include "common/status_macros.h"
#include "kernels/payload.h"
#include "worker/codec_config.h"
#include "worker/train_mode.h"

namespace tern::worker {
namespace {

// Who the worker is and how it reaches the shards: --num_workers,
// --worker_id, --data_slice, --ps, --run_id, the two timeouts and TLS.
absl::Status ValidateClusterOptions(const WorkerOptions& o) {
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
  TERN_RETURN_IF_ERROR(
      flags::CheckFinitePositive("rpc_timeout_s", o.rpc_timeout_s));
  TERN_RETURN_IF_ERROR(
      flags::CheckFinitePositive("join_timeout_s", o.join_timeout_s));
  TERN_RETURN_IF_ERROR(
      flags::CheckFiniteNonNegative("straggler_warn_s", o.straggler_warn_s));
  TERN_RETURN_IF_ERROR(flags::CheckFinitePositive(
      "server_loss_timeout_s", o.server_loss_timeout_s));
  return net::ValidateTlsFlags(o.tls, net::TlsUse::kConnect);
}

// What one step does: batch, steps, threads, device, chunk size and the
// optimizer's settings.
absl::Status ValidateTrainingOptions(const WorkerOptions& o) {
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
  TERN_RETURN_IF_ERROR(
      flags::CheckFiniteNonNegative("weight_decay", o.weight_decay));
  if (!(o.eval_ema_decay >= 0 && o.eval_ema_decay < 1)) {
    return absl::InvalidArgumentError(
        "--eval_ema_decay must be in [0, 1) (0: no average)");
  }
  if (o.optimizer != "sgd" && o.optimizer != "momentum" &&
      o.optimizer != "adam" && o.optimizer != "adagrad") {
    return absl::InvalidArgumentError(
        absl::StrCat("--optimizer: '", o.optimizer,
                     "' is not sgd, momentum, adam or adagrad"));
  }
  return absl::OkStatus();
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
  if (o.overlap) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--overlap with --mode=", mode,
        ": a worker pushes its whole gradient to its local parameter server "
        "in one message"));
  }
  if (o.broadcast_start) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--broadcast_start with --mode=", mode,
        ": the local parameter server starts from worker 0's weights "
        "already"));
  }
  if (o.eval_ema_decay > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--eval_ema_decay with --mode=", mode,
        ": the local parameter server holds the weights (the workers see "
        "quantized ones between evaluations)"));
  }
  if (o.optimizer == "adam" || o.optimizer == "adagrad") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--optimizer=", o.optimizer, " with --mode=", mode,
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

bool IsDeviceName(const std::string& name) {
  if (name == "cpu" || name == "cuda") return true;
  if (!absl::StartsWith(name, "cuda:")) return false;
  uint32_t ordinal = 0;
  return absl::SimpleAtoi(name.substr(5), &ordinal) && ordinal < 64 &&
         name.substr(5) == std::to_string(ordinal);
}

absl::Status ValidateWorkerOptions(const WorkerOptions& o) {
  TERN_RETURN_IF_ERROR(ValidateClusterOptions(o));
  TERN_RETURN_IF_ERROR(ValidateTrainingOptions(o));
  TERN_RETURN_IF_ERROR(metrics::ValidateMetricsOptions(o.metrics));
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
