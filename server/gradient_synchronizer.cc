// GradientSynchronizer: options, creation, the gradients it follows and
// W_last. The threshold and the significance test, the rounds it builds
// and the answers it applies are in gradient_synchronizer_*.cc beside it.
#include "server/gradient_synchronizer.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_format.h"
#include "kernels/codec_options.h"
#include "kernels/codec_registry.h"

namespace tern::server {
namespace {

absl::Status CheckOptions(const SynchronizerOptions& options,
                          const LpsState* state) {
  if (state == nullptr) {
    return absl::InvalidArgumentError("the synchronizer needs an LpsState");
  }
  if (options.sync_every == 0) {
    return absl::InvalidArgumentError("sync_every is 0, want >= 1");
  }
  if (options.g_thresh.has_value() &&
      !(std::isfinite(*options.g_thresh) && *options.g_thresh >= 0.0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "g_thresh is %g, want a finite value >= 0", *options.g_thresh));
  }
  if (!(std::isfinite(options.gaia_threshold) &&
        options.gaia_threshold > 0.0)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("gaia_threshold is %g, want a finite value > 0",
                        options.gaia_threshold));
  }
  if (options.sync_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("sync_timeout is %s, want > 0",
                        absl::FormatDuration(options.sync_timeout)));
  }
  if (!options.clock) {
    return absl::InvalidArgumentError("the synchronizer needs a clock");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<kernels::Codec>> NewCodec(
    kernels::CodecId id, float clip = 2.5f,
    kernels::Layout push_layout = kernels::Layout::kUnspecified) {
  kernels::CodecOptions options;
  options.id = id;
  options.clip = clip;
  options.push_layout = push_layout;
  return kernels::MakeCodec(options);
}

}  // namespace

absl::StatusOr<SyncMode> ParseSyncMode(absl::string_view name) {
  if (name == "ternary") return SyncMode::kTernary;
  if (name == "fp32") return SyncMode::kFp32;
  if (name == "gaia") return SyncMode::kGaia;
  return absl::InvalidArgumentError(absl::StrFormat(
      "unknown sync mode \"%s\" (expected ternary, fp32 or gaia)", name));
}

GradientSynchronizer::GradientSynchronizer(
    SynchronizerOptions options, LpsState* state,
    std::unique_ptr<kernels::Codec> ternary,
    std::unique_ptr<kernels::Codec> fp32)
    : options_(std::move(options)),
      state_(state),
      ternary_(std::move(ternary)),
      fp32_(std::move(fp32)),
      next_round_(options_.first_round),
      last_round_step_(state->completed_steps()),
      g_thresh_(options_.g_thresh) {}

absl::StatusOr<std::unique_ptr<GradientSynchronizer>>
GradientSynchronizer::Create(SynchronizerOptions options, LpsState* state) {
  absl::Status status = CheckOptions(options, state);
  if (!status.ok()) return status;
  absl::StatusOr<std::unique_ptr<kernels::Codec>> ternary = NewCodec(
      kernels::CodecId::kTernGrad, options.clip, options.ternary_layout);
  if (!ternary.ok()) return ternary.status();
  absl::StatusOr<std::unique_ptr<kernels::Codec>> fp32 =
      NewCodec(kernels::CodecId::kFp32);
  if (!fp32.ok()) return fp32.status();
  std::unique_ptr<GradientSynchronizer> sync(new GradientSynchronizer(
      std::move(options), state, *std::move(ternary), *std::move(fp32)));
  // The GS answers in the codec of the updates (global_server.proto):
  // fp32, fp16 or a TernGrad push payload; int8 is accepted as well.
  for (const kernels::CodecId id :
       {kernels::CodecId::kFp32, kernels::CodecId::kFp16,
        kernels::CodecId::kTernGrad, kernels::CodecId::kInt8}) {
    absl::StatusOr<std::unique_ptr<kernels::Codec>> codec = NewCodec(id);
    if (!codec.ok()) return codec.status();
    sync->answer_codecs_[id] = *std::move(codec);
  }
  for (const uint32_t key : state->chunk_keys()) {
    const absl::Span<const float> weights = *state->Weights(key);
    sync->index_[key] = sync->chunks_.size();
    ChunkSync& chunk = sync->chunks_.emplace_back();
    chunk.key = key;
    chunk.last_weights.assign(weights.begin(), weights.end());
  }
  return sync;
}

absl::StatusOr<ApplyResult> GradientSynchronizer::ApplyGradient(
    uint32_t worker, uint64_t step, uint32_t key,
    absl::Span<const float> gradient) {
  absl::StatusOr<ApplyResult> result =
      state_->ApplyGradient(worker, step, key, gradient);
  if (!result.ok()) return result;
  ChunkSync& chunk = chunks_[index_.at(key)];
  // The mean gradient only sets the dynamic threshold, once; after that
  // (and with a fixed threshold, or in the gaia mode) it is not kept.
  if (NeedsMeanGradient()) {
    if (chunk.gradient_sum.size() != gradient.size()) {
      chunk.gradient_sum.assign(gradient.size(), 0.0f);
    }
    for (size_t i = 0; i < gradient.size(); ++i) {
      chunk.gradient_sum[i] += gradient[i];
    }
  }
  double norm2 = 0.0;
  for (const float g : gradient) norm2 += double{g} * g;
  // One step moves W by lr * v; a run of steps that all point the same way
  // reaches |v| = |g| / (1 - m), so this is the length of the path the
  // round's steps would trace if none cancelled another.
  const double momentum = state_->options().momentum;
  chunk.path +=
      state_->LearningRate(step) / (1.0 - momentum) * std::sqrt(norm2);
  ++chunk.gradients;
  return result;
}

absl::StatusOr<absl::Span<const float>> GradientSynchronizer::LastRoundWeights(
    uint32_t key) const {
  const auto it = index_.find(key);
  if (it == index_.end()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("chunk %d is not on this LPS shard", key));
  }
  return absl::Span<const float>(chunks_[it->second].last_weights);
}

}  // namespace tern::server
