#include "server/gradient_synchronizer.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "kernels/codec_options.h"
#include "kernels/codec_registry.h"

namespace tern::server {
namespace {

double Norm(absl::Span<const float> values) {
  double sum = 0.0;
  for (const float v : values) sum += double{v} * v;
  return std::sqrt(sum);
}

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

bool GradientSynchronizer::NeedsMeanGradient() const {
  return options_.mode != SyncMode::kGaia && !g_thresh_.has_value();
}

bool GradientSynchronizer::RoundDue() const {
  return state_->completed_steps() >= last_round_step_ + options_.sync_every;
}

std::vector<float> GradientSynchronizer::Update(
    const ChunkSync& chunk, absl::Span<const float> weights) const {
  std::vector<float> update(weights.size());
  for (size_t i = 0; i < weights.size(); ++i) {
    update[i] = weights[i] - chunk.last_weights[i];
  }
  for (const WaitingRound& waiting : waiting_) {
    const auto it = waiting.sent_updates.find(chunk.key);
    if (it == waiting.sent_updates.end()) continue;
    for (size_t i = 0; i < update.size(); ++i) update[i] -= it->second[i];
  }
  return update;
}

void GradientSynchronizer::InitThreshold() {
  // G_thresh = ||g||_2 / ||g||_inf of the first round's mean gradient g
  // (Appendix A.2), per element: divided by sqrt(d), i.e. rms(g) / max|g|,
  // so that it is on the scale of the significance (server/WEIGHTGRAD.md).
  double sum_squares = 0.0;
  double max_abs = 0.0;
  uint64_t elements = 0;
  for (const ChunkSync& chunk : chunks_) {
    elements += chunk.last_weights.size();
    if (chunk.gradients == 0) continue;
    const double inverse = 1.0 / static_cast<double>(chunk.gradients);
    for (const float sum : chunk.gradient_sum) {
      const double mean = sum * inverse;
      sum_squares += mean * mean;
      max_abs = std::max(max_abs, std::fabs(mean));
    }
  }
  if (elements == 0 || !(max_abs > 0.0)) return;  // no gradient yet
  g_thresh_ = std::sqrt(sum_squares / static_cast<double>(elements)) / max_abs;
  for (ChunkSync& chunk : chunks_)
    std::vector<float>().swap(chunk.gradient_sum);
  const uint64_t step = state_->completed_steps();
  const uint64_t per_epoch = options_.steps_per_epoch;
  threshold_epoch_ = per_epoch > 0 ? step / per_epoch : 0;
  threshold_lr_ = state_->LearningRate(threshold_epoch_ * per_epoch);
  threshold_momentum_norm_ = state_->MomentumNorm();
}

void GradientSynchronizer::RescaleThreshold() {
  const uint64_t per_epoch = options_.steps_per_epoch;
  if (options_.g_thresh.has_value() || !g_thresh_.has_value() ||
      per_epoch == 0) {
    return;
  }
  const uint64_t epoch = state_->completed_steps() / per_epoch;
  if (epoch <= threshold_epoch_) return;
  // Eq. (13): G^{s+1} = delta_eta * Delta_v * G^s, with delta_eta the ratio
  // of the LR at the start of the new epoch to that of the last rescale's
  // epoch, and Delta_v the ratio of the momentum norms ||v|| now and then.
  // Several epochs crossed in one round multiply once by the ratios over
  // all of them, which is the product of the per-epoch ratios. A ratio
  // whose old value is 0 is undefined and left out.
  const double lr = state_->LearningRate(epoch * per_epoch);
  const double momentum_norm = state_->MomentumNorm();
  double factor = 1.0;
  if (threshold_lr_ > 0.0) factor *= lr / threshold_lr_;
  if (threshold_momentum_norm_ > 0.0) {
    factor *= momentum_norm / threshold_momentum_norm_;
  }
  *g_thresh_ *= factor;
  threshold_epoch_ = epoch;
  threshold_lr_ = lr;
  threshold_momentum_norm_ = momentum_norm;
}

absl::Status GradientSynchronizer::CheckRoundDue(uint64_t round) const {
  if (round != next_round_) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "round %d asked for; the next round is %d", round, next_round_));
  }
  if (!RoundDue()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "round %d is not due: %d of %d local steps since the last round", round,
        state_->completed_steps() - last_round_step_, options_.sync_every));
  }
  return absl::OkStatus();
}

double GradientSynchronizer::RoundThreshold() {
  if (options_.mode == SyncMode::kGaia) return 0.0;
  if (!g_thresh_.has_value()) {
    InitThreshold();
  } else {
    RescaleThreshold();
  }
  // Until a nonzero gradient has set the dynamic threshold, every chunk
  // that moved is significant.
  return g_thresh_.value_or(0.0);
}

ChunkDecision GradientSynchronizer::Decide(const ChunkSync& chunk,
                                           absl::Span<const float> weights,
                                           double threshold,
                                           std::vector<float>* update) const {
  ChunkDecision decision;
  decision.key = chunk.key;
  if (options_.mode == SyncMode::kGaia) {
    // Gaia's significance filter (Hsieh et al., NSDI 2017): an element
    // travels when its accumulated update is at least gaia_threshold of
    // its current value.
    uint64_t significant = 0;
    for (size_t i = 0; i < update->size(); ++i) {
      const double u = std::fabs((*update)[i]);
      if (u > 0.0 && u >= options_.gaia_threshold * std::fabs(weights[i])) {
        ++significant;
      } else {
        (*update)[i] = 0.0f;
      }
    }
    decision.significance =
        update->empty() ? 0.0
                        : static_cast<double>(significant) / update->size();
    decision.sent = significant > 0;
    return decision;
  }
  // The movement since the chunk was last sent: U less what the last
  // ternary encoding held back (server/WEIGHTGRAD.md).
  std::vector<float> moved = *update;
  if (!chunk.held_back.empty()) {
    for (size_t i = 0; i < moved.size(); ++i) moved[i] -= chunk.held_back[i];
  }
  // A round without a gradient step (all zero, or lr = 0) has no path: what
  // U shows then is rounding or the momentum coasting, and it waits for a
  // round with steps.
  const double norm = Norm(moved);
  if (norm > 0.0 && chunk.path > 0.0) {
    decision.significance = norm / chunk.path;
  }
  decision.sent =
      decision.significance > 0.0 && decision.significance >= threshold;
  return decision;
}

absl::StatusOr<kernels::Payload> GradientSynchronizer::EncodeUpdate(
    uint64_t round, uint32_t key, absl::Span<const float> update,
    std::vector<float>* sent) const {
  const bool ternary = options_.mode == SyncMode::kTernary;
  absl::StatusOr<kernels::Payload> payload;
  if (ternary) {
    kernels::EncodeContext context;
    context.stream = RandomStream{options_.seed, static_cast<uint32_t>(round),
                                  key, kSyncStreamWorker};
    context.scaler = OwnTernaryScaler(update, options_.clip);
    payload = ternary_->Encode(update, context);
  } else {
    // fp32, and gaia for now: a dense fp32 payload whose insignificant
    // elements are 0. NOTE: the gaia mode is to send (index, value) pairs
    // (LAYOUT_INDEX_VALUE) once kernels/index_packing lands; the decoded
    // U_sent is the same either way, so only the bytes change.
    payload = fp32_->Encode(update, kernels::EncodeContext());
  }
  if (!payload.ok()) return payload.status();
  const kernels::Codec& codec = ternary ? *ternary_ : *fp32_;
  sent->assign(update.size(), 0.0f);
  absl::Status status = codec.Decode(*payload, absl::MakeSpan(*sent));
  if (!status.ok()) return status;
  return payload;
}

void GradientSynchronizer::CommitRound(
    std::vector<std::pair<size_t, std::vector<float>>> held_back,
    WaitingRound waiting) {
  for (auto& [index, residual] : held_back) {
    chunks_[index].held_back = std::move(residual);
  }
  for (ChunkSync& chunk : chunks_) {
    std::fill(chunk.gradient_sum.begin(), chunk.gradient_sum.end(), 0.0f);
    chunk.gradients = 0;
    chunk.path = 0.0;
  }
  waiting.sent = options_.clock();
  waiting_.push_back(std::move(waiting));
  last_round_step_ = state_->completed_steps();
  ++next_round_;
}

absl::StatusOr<SyncRound> GradientSynchronizer::BuildRound(uint64_t round) {
  if (absl::Status due = CheckRoundDue(round); !due.ok()) return due;
  const double threshold = RoundThreshold();

  SyncRound request;
  request.round = round;
  request.local_step = state_->completed_steps();
  request.g_thresh = threshold;
  WaitingRound waiting;
  waiting.round = round;
  // The ternary mode's new held-back residuals, committed with the round.
  std::vector<std::pair<size_t, std::vector<float>>> held_back;
  for (size_t index = 0; index < chunks_.size(); ++index) {
    const ChunkSync& chunk = chunks_[index];
    const absl::Span<const float> weights = *state_->Weights(chunk.key);
    std::vector<float> update = Update(chunk, weights);
    const ChunkDecision decision = Decide(chunk, weights, threshold, &update);
    request.decisions.push_back(decision);
    if (!decision.sent) continue;

    std::vector<float> sent;
    absl::StatusOr<kernels::Payload> payload =
        EncodeUpdate(round, chunk.key, update, &sent);
    if (!payload.ok()) return payload.status();
    if (options_.mode == SyncMode::kTernary) {
      for (size_t i = 0; i < update.size(); ++i) update[i] -= sent[i];
      held_back.emplace_back(index, std::move(update));
    }
    waiting.sent_updates[chunk.key] = std::move(sent);
    request.updates.push_back(ChunkPayload{chunk.key, *std::move(payload)});
  }
  CommitRound(std::move(held_back), std::move(waiting));
  return request;
}

absl::StatusOr<SyncRound> GradientSynchronizer::BuildFinalRound(
    uint64_t round) {
  if (round != next_round_) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "final round %d asked for; the next round is %d", round, next_round_));
  }
  if (!waiting_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("final round %d: round %d still waits for its answer",
                        round, waiting_.front().round));
  }
  SyncRound request;
  request.round = round;
  request.local_step = state_->completed_steps();
  WaitingRound waiting;
  waiting.round = round;
  for (const ChunkSync& chunk : chunks_) {
    const absl::Span<const float> weights = *state_->Weights(chunk.key);
    std::vector<float> update = Update(chunk, weights);
    absl::StatusOr<kernels::Payload> payload =
        fp32_->Encode(update, kernels::EncodeContext());
    if (!payload.ok()) return payload.status();
    request.decisions.push_back(ChunkDecision{chunk.key, 1.0, true});
    waiting.sent_updates[chunk.key] = std::move(update);
    request.updates.push_back(ChunkPayload{chunk.key, *std::move(payload)});
  }
  for (ChunkSync& chunk : chunks_) {
    std::fill(chunk.gradient_sum.begin(), chunk.gradient_sum.end(), 0.0f);
    chunk.gradients = 0;
    chunk.path = 0.0;
    // Everything travels: nothing is held back any more.
    std::vector<float>().swap(chunk.held_back);
  }
  waiting.sent = options_.clock();
  waiting_.push_back(std::move(waiting));
  last_round_step_ = state_->completed_steps();
  ++next_round_;
  return request;
}

absl::StatusOr<const kernels::Codec*> GradientSynchronizer::AnswerCodec(
    kernels::CodecId id) const {
  const auto it = answer_codecs_.find(id);
  if (it == answer_codecs_.end()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("codec %s; answers are fp32, fp16, terngrad or int8",
                        kernels::CodecName(id)));
  }
  return it->second.get();
}

absl::Status GradientSynchronizer::ApplyAnswer(
    uint64_t round, absl::Span<const ChunkPayload> average) {
  if (waiting_.empty()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "an answer to round %d, but no round waits for one", round));
  }
  const WaitingRound& waiting = waiting_.front();
  if (round != waiting.round) {
    return absl::FailedPreconditionError(
        absl::StrFormat("an answer to round %d, but round %d waits for its "
                        "answer first",
                        round, waiting.round));
  }
  // Decode and check everything before anything changes.
  std::vector<std::pair<size_t, std::vector<float>>> decoded;
  absl::flat_hash_set<uint32_t> seen;
  for (const ChunkPayload& chunk : average) {
    const auto it = index_.find(chunk.chunk_key);
    if (it == index_.end()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("answer to round %d has chunk %d, which is not on "
                          "this LPS shard",
                          round, chunk.chunk_key));
    }
    if (!seen.insert(chunk.chunk_key).second) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "answer to round %d has chunk %d twice", round, chunk.chunk_key));
    }
    absl::StatusOr<const kernels::Codec*> codec =
        AnswerCodec(chunk.payload.codec);
    std::vector<float> values(chunks_[it->second].last_weights.size());
    absl::Status status =
        codec.ok() ? (*codec)->Decode(chunk.payload, absl::MakeSpan(values))
                   : codec.status();
    if (!status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("answer to round %d, chunk %d: %s", round,
                          chunk.chunk_key, status.message()));
    }
    for (size_t i = 0; i < values.size(); ++i) {
      if (!std::isfinite(values[i])) {
        return absl::InvalidArgumentError(
            absl::StrFormat("answer to round %d, chunk %d has %g at element "
                            "%d",
                            round, chunk.chunk_key, values[i], i));
      }
    }
    decoded.emplace_back(it->second, std::move(values));
  }
  for (const auto& [key, sent] : waiting.sent_updates) {
    if (!seen.contains(key)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "chunk %d was sent in round %d but the answer lacks it", key, round));
    }
  }

  for (const auto& [index, answer] : decoded) {
    ChunkSync& chunk = chunks_[index];
    const absl::Span<float> weights = *state_->MutableWeights(chunk.key);
    const auto sent_it = waiting.sent_updates.find(chunk.key);
    const float* sent = sent_it == waiting.sent_updates.end()
                            ? nullptr
                            : sent_it->second.data();
    for (size_t i = 0; i < answer.size(); ++i) {
      // W += A - U_sent, written as W_last + A + (what stays in U): when
      // everything was sent exactly (fp32), the residual is exactly 0 and
      // every data center lands on the same bits, W = W_last + A.
      const float residual =
          (weights[i] - chunk.last_weights[i]) - (sent ? sent[i] : 0.0f);
      chunk.last_weights[i] += answer[i];
      weights[i] = chunk.last_weights[i] + residual;
    }
  }
  waiting_.pop_front();
  last_answer_time_ = options_.clock();
  return absl::OkStatus();
}

bool GradientSynchronizer::MustHold(absl::Time now) const {
  if (waiting_.empty()) return false;
  const absl::Time since = std::max(waiting_.front().sent, last_answer_time_);
  return now - since >= options_.sync_timeout;
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
