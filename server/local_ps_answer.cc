// Pushes and the LPS's answer policy: a push is checked, decoded once and
// applied whole, then answered with W when the answer may go (the lead, a
// GS hold, the run's last step; local_ps.h), or held up to hold_limit
// under the core's expiry rule (core::Expired).
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/philox.h"
#include "core/barrier.h"
#include "core/payload_validation.h"
#include "server/local_ps.h"

namespace tern::server {
namespace {

// The magnitude rule for the LPS's own state (core/payload_validation.h,
// global/README.md): a gradient within the rule is applied only if no
// weight or velocity it produces can leave it either, so one worker's
// push (core::ValidatePayload refuses a scaler like 3.4e38 already; here
// codes * scaler within the rule that the learning rate or the momentum
// would carry beyond it) cannot make W inf for every worker and data
// center. LpsState::ApplyGradient computes
//   v' = m * v + (g + lambda * W);   W' = W - lr * v'
// so |v'| <= m|v| + |g| + lambda|W| and |W'| <= |W| + |lr| |v'|. The bound
// is taken in double (it cannot overflow there) before anything changes.
absl::Status CheckStepMagnitude(const LpsState& state, uint64_t step,
                                uint32_t key, absl::Span<const float> g) {
  const absl::StatusOr<absl::Span<const float>> weights = state.Weights(key);
  const absl::StatusOr<absl::Span<const float>> momentum = state.Momentum(key);
  // A chunk or length the state does not have: ApplyGradient refuses it.
  if (!weights.ok() || !momentum.ok() || g.size() != weights->size()) {
    return absl::OkStatus();
  }
  const absl::Span<const float> w = *weights;
  const absl::Span<const float> v = *momentum;
  const double lr = std::fabs(state.LearningRate(step));
  const double m = state.options().momentum;
  const double decay = state.options().weight_decay;
  constexpr double kBound = core::kMaxMagnitude;
  for (size_t i = 0; i < g.size(); ++i) {
    const double velocity = m * std::fabs(v[i]) + std::fabs(g[i]) +
                            decay * std::fabs(w[i]);
    const double weight = std::fabs(w[i]) + lr * velocity;
    if (velocity > kBound || weight > kBound) {
      return absl::InvalidArgumentError(absl::StrCat(
          "applying it could take element ", i, "'s ",
          velocity > kBound ? "velocity" : "weight", " to ",
          velocity > kBound ? velocity : weight, " (gradient ", g[i],
          ", lr ", lr, "), beyond ", core::kMaxMagnitude,
          " (the magnitude rule: the LPS keeps its weights and velocities "
          "within 1e30; see global/README.md)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LocalPs::CheckWorker(uint32_t worker) const {
  if (!closed_.ok()) return closed_;
  if (!failed_.ok()) return failed_;
  if (worker >= options_.num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown worker ", worker, ": the LPS serves workers 0..",
                     options_.num_workers - 1));
  }
  if (!joined_.arrived(worker) && resumed_at_.has_value()) {
    return absl::OutOfRangeError(
        absl::StrCat("the LPS restarted from its state at local step ",
                     *resumed_at_, "; rejoin (worker ", worker,
                     " resumes at step ", state_->NextStep(worker), ")"));
  }
  if (!joined_.arrived(worker) || state_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", worker, " has not joined (Join comes first)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> LocalPs::Apply(const PushRequest& request) {
  const uint32_t w = request.worker_id;
  const uint64_t step = request.step;
  const size_t num_chunks = chunk_elements_.size();
  if (request.chunks.size() != num_chunks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step ", step, ": worker ", w, " pushed ", request.chunks.size(),
        " chunks; the LPS owns ", num_chunks));
  }
  // Decode everything first: nothing is applied unless every chunk is valid.
  std::vector<std::vector<float>> gradients(num_chunks);
  for (uint32_t key = 0; key < num_chunks; ++key) {
    const ChunkPayload& chunk = request.chunks[key];
    auto invalid = [&](const std::string& what) {
      return absl::InvalidArgumentError(
          absl::StrCat("step ", step, ": chunk ", chunk.chunk_key,
                       " of worker ", w, ": ", what));
    };
    if (chunk.chunk_key != key) {
      return invalid(absl::StrCat("expected chunk ", key,
                                  " here (chunks in key order, each once)"));
    }
    const bool fp32 = gradient_codec_ == nullptr || fp32_chunk_[key];
    const kernels::Codec& codec = fp32 ? *fp32_codec_ : *gradient_codec_;
    core::PayloadExpectation expect;
    expect.codec = fp32 ? kernels::CodecId::kFp32 : kernels::CodecId::kTernGrad;
    expect.num_elements = chunk_elements_[key];
    expect.reader = "this LPS";
    gradients[key].resize(chunk_elements_[key]);
    // Header first (codec, format version, size, summands, scalers), then
    // the bytes, decoded once, then what applying them would do; a NaN/Inf
    // gradient, or one beyond the magnitude rule, is refused here, before
    // any chunk of the push is applied.
    absl::Status valid = core::ValidatePayload(chunk.payload, expect);
    if (valid.ok()) {
      valid = core::DecodeFinite(codec, chunk.payload,
                                 absl::MakeSpan(gradients[key]));
    }
    if (valid.ok()) {
      valid = CheckStepMagnitude(*state_, step, key, gradients[key]);
    }
    if (!valid.ok()) return invalid(std::string(valid.message()));
  }
  bool retry = false;
  for (uint32_t key = 0; key < num_chunks; ++key) {
    absl::StatusOr<ApplyResult> result =
        sync_->ApplyGradient(w, step, key, gradients[key]);
    if (absl::IsAlreadyExists(result.status())) {
      retry = true;  // a retry: the push was applied before, all of it
      continue;
    }
    if (!result.ok()) return result.status();
    if (result->step_completed) {
      if (absl::Status status = OnStepCompleted(); !status.ok()) return status;
    }
  }
  return retry;
}

bool LocalPs::CanAnswer(uint64_t step, absl::Time now) const {
  if (options_.global && sync_->MustHold(now)) return false;
  if (step + 1 >= config_.optimizer.steps) return final_ == Final::kDone;
  // The worker's next push, step + 1, must be within the lead.
  return step + 1 <= state_->completed_steps() + kMaxLead;
}

absl::StatusOr<PushAnswer> LocalPs::Answer(uint32_t worker, uint64_t step,
                                           bool fp32_weights) const {
  auto reply = std::make_shared<PushReply>();
  reply->step = step;
  // The last step's answer is the final model itself, in fp32: every
  // worker leaves with the weights every data center ends with, and its
  // own checksum equals the LPS's.
  const bool last = step + 1 >= config_.optimizer.steps;
  for (const uint32_t key : state_->chunk_keys()) {
    const RandomStream stream{config_.seed, static_cast<uint32_t>(step), key,
                              kWeightStreamBit | worker};
    absl::StatusOr<kernels::Payload> payload =
        last || fp32_weights
            ? fp32_codec_->Encode(*state_->Weights(key),
                                  kernels::EncodeContext())
            : state_->QuantizedWeights(key, stream);
    if (!payload.ok()) return payload.status();
    reply->chunks.push_back(ChunkPayload{key, *std::move(payload)});
  }
  if (last) reply->param_checksum = state_->Checksum();
  return PushAnswer(std::move(reply));
}

void LocalPs::Release(absl::Time now, Deferred* deferred) {
  if (state_ == nullptr) return;
  const bool gs_hold = options_.global && sync_->MustHold(now);
  if (gs_hold != holding_) {
    holding_ = gs_hold;
    if (gs_hold) {
      if (options_.metrics != nullptr) options_.metrics->HoldBegan();
      logger_->warn(
          "holding the workers: {} has not answered round {} for {} "
          "(--sync_timeout_s)",
          options_.global_name, sync_->next_round() - sync_->rounds_waiting(),
          Seconds(options_.sync_timeout));
    } else {
      logger_->info("the global server answered: releasing the workers");
    }
  }
  std::vector<PushWaiter> kept;
  for (PushWaiter& waiter : push_waiters_) {
    if (CanAnswer(waiter.step, now)) {
      deferred->Answer<PushAnswer>(std::move(waiter.done),
                                   Answer(waiter.worker, waiter.step,
                                          waiter.fp32_weights));
    } else if (core::Expired(waiter.deadline, now)) {
      const bool for_gs =
          gs_hold || (waiter.step + 1 >= config_.optimizer.steps &&
                      final_ != Final::kTraining);
      absl::Status status =
          for_gs ? absl::UnavailableError(absl::StrCat(
                       "step ", waiter.step, " of worker ", waiter.worker,
                       " held for ", Seconds(options_.hold_limit), ": ",
                       options_.global_name, " has not answered (",
                       sync_->rounds_waiting(),
                       " round(s) wait for an answer; --barrier_timeout_s)"))
                 : absl::DeadlineExceededError(absl::StrCat(
                       "step ", waiter.step, " of worker ", waiter.worker,
                       " waited ", Seconds(options_.hold_limit),
                       " for local step ", state_->completed_steps(),
                       " to complete: some worker did not push it"));
      logger_->warn("{}", std::string(status.message()));
      deferred->Answer<PushAnswer>(std::move(waiter.done), std::move(status));
    } else {
      kept.push_back(std::move(waiter));
    }
  }
  push_waiters_ = std::move(kept);
}

size_t LocalPs::WaitingPushes(uint32_t worker, uint64_t step) const {
  return std::count_if(push_waiters_.begin(), push_waiters_.end(),
                       [&](const PushWaiter& waiter) {
                         return waiter.worker == worker && waiter.step == step;
                       });
}

void LocalPs::PushPull(const PushRequest& request, core::Callback<PushAnswer> done) {
  Deferred deferred;
  absl::MutexLock lock(&mu_);
  const uint32_t w = request.worker_id;
  auto refuse = [&](absl::Status status) {
    LogRefusal(w, "push", status, "push of worker {} for step {} refused: {}",
               w, request.step, std::string(status.message()));
    deferred.Answer<PushAnswer>(std::move(done), std::move(status));
  };
  if (absl::Status status = CheckWorker(w); !status.ok()) {
    return refuse(status);
  }
  if (request.step >= config_.optimizer.steps) {
    return refuse(absl::FailedPreconditionError(
        absl::StrCat("step ", request.step, " is beyond the run's ",
                     config_.optimizer.steps, " steps")));
  }
  // Before anything is decoded: a call that waits was applied, so more of
  // them are copies, and nothing of this one is kept.
  if (WaitingPushes(w, request.step) >= core::kMaxWaitsPerMember) {
    return refuse(core::TooManyWaitsError(absl::StrCat("worker ", w),
                                          absl::StrCat("step ", request.step)));
  }
  absl::StatusOr<bool> applied = Apply(request);
  if (!applied.ok()) {
    if (absl::IsInternal(applied.status())) {
      failed_ = applied.status();
      logger_->error("run failed: {}", std::string(failed_.message()));
      AnswerAll(failed_, &deferred);
    }
    return refuse(applied.status());
  }
  const absl::Time now = options_.clock();
  push_waiters_.push_back(
      PushWaiter{w, request.step, request.fp32_weights,
                 core::WaitDeadline(now, options_.hold_limit),
                 std::move(done)});
  Release(now, &deferred);
}

}  // namespace tern::server
