// GradientSynchronizer's significance test and its threshold: set once from
// the first round's mean gradient, rescaled at epoch boundaries
// (Appendix A.2; server/WEIGHTGRAD.md).
#include <algorithm>
#include <cmath>
#include <vector>

#include "server/gradient_synchronizer.h"

namespace tern::server {
namespace {

double Norm(absl::Span<const float> values) {
  double sum = 0.0;
  for (const float v : values) sum += double{v} * v;
  return std::sqrt(sum);
}

}  // namespace

bool GradientSynchronizer::NeedsMeanGradient() const {
  return options_.mode != SyncMode::kGaia && !g_thresh_.has_value();
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

std::optional<ThresholdRescale> GradientSynchronizer::RescaleThreshold() {
  const uint64_t per_epoch = options_.steps_per_epoch;
  if (options_.g_thresh.has_value() || !g_thresh_.has_value() ||
      per_epoch == 0) {
    return std::nullopt;
  }
  const uint64_t epoch = state_->completed_steps() / per_epoch;
  if (epoch <= threshold_epoch_) return std::nullopt;
  // Eq. (13): G^{s+1} = delta_eta * Delta_v * G^s, with delta_eta the ratio
  // of the LR at the start of the new epoch to that of the last rescale's
  // epoch, and Delta_v the ratio of the momentum norms ||v|| now and then.
  // Several epochs crossed in one round multiply once by the ratios over
  // all of them, which is the product of the per-epoch ratios. A ratio
  // whose old value is 0 is undefined and left out.
  const double lr = state_->LearningRate(epoch * per_epoch);
  const double momentum_norm = state_->MomentumNorm();
  ThresholdRescale rescale;
  rescale.epoch = epoch;
  if (threshold_lr_ > 0.0) rescale.lr_ratio = lr / threshold_lr_;
  if (threshold_momentum_norm_ > 0.0) {
    rescale.momentum_ratio = momentum_norm / threshold_momentum_norm_;
  }
  rescale.old_threshold = *g_thresh_;
  *g_thresh_ *= rescale.lr_ratio * rescale.momentum_ratio;
  rescale.new_threshold = *g_thresh_;
  threshold_epoch_ = epoch;
  threshold_lr_ = lr;
  threshold_momentum_norm_ = momentum_norm;
  return rescale;
}

double GradientSynchronizer::RoundThreshold(
    std::optional<ThresholdRescale>* rescale) {
  if (options_.mode == SyncMode::kGaia) return 0.0;
  if (!g_thresh_.has_value()) {
    InitThreshold();
  } else {
    *rescale = RescaleThreshold();
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

}  // namespace tern::server
