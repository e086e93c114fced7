// Collecting a round: which request is admitted (the GS's admission, per
// data center), its updates decoded without the lock, then added to the
// round open now.
//
// The GS admits by each data center's next round rather than by the open
// round alone (core/admission.h's order is the shard's): a data center
// that lags sends rounds the others closed, and they join the open round.
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "global/round_aggregator.h"

namespace tern::global {
namespace {

absl::Status NoLongerKept(uint64_t round, uint32_t datacenter,
                          uint64_t open_round) {
  return absl::FailedPreconditionError(
      absl::StrCat("round ", round, " of data center ", datacenter,
                   " is no longer kept: the GS is at round ", open_round));
}

// RESOURCE_EXHAUSTED: the data center's calls for `round` already fill
// their places (core::kMaxWaitsPerMember).
absl::Status TooManyWaits(uint32_t datacenter, uint64_t round) {
  return core::TooManyWaitsError(absl::StrCat("data center ", datacenter),
                                 absl::StrCat("round ", round));
}

}  // namespace

void RoundAggregator::SyncRound(const SyncRequest& request, SyncCallback done) {
  // 1. Under the lock: is this request expected, and which chunks are they?
  std::vector<const ChunkSpec*> specs(request.updates.size(), nullptr);
  const kernels::Codec* fp32 = nullptr;
  {
    core::Deferred deferred;
    absl::MutexLock lock(&mu_);
    if (!Admit(request, done, &specs, &deferred)) return;
    fp32 = fp32_codec_.get();
  }

  // 2. Without the lock: validate and decode every update.
  absl::StatusOr<DecodedUpdates> decoded = DecodeUpdates(request, specs, fp32);

  // 3. Under the lock: add the updates to the round open now.
  core::Deferred deferred;
  absl::MutexLock lock(&mu_);
  Add(request, std::move(decoded), std::move(done), &deferred);
}

void RoundAggregator::Refuse(const SyncRequest& request, absl::Status status,
                             SyncCallback done, core::Deferred* deferred) {
  ++stats_.refused;
  LogRefusal(request.datacenter, "round", status,
             "round {} of data center {} refused: {}", request.round,
             request.datacenter, std::string(status.message()));
  deferred->Answer<RoundAnswerPtr>(std::move(done), std::move(status));
}

absl::Status RoundAggregator::CheckSender(uint32_t d) const {
  if (!closed_.ok()) return closed_;
  if (!failed_.ok()) return failed_;
  const uint32_t k = options_.num_datacenters;
  if (d >= k) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown data center ", d, ": the GS serves 0..", k - 1,
                     " (--num_datacenters=", k, ")"));
  }
  if (!registered_[d]) {
    return absl::FailedPreconditionError(absl::StrCat(
        "data center ", d, " has not registered (Register comes first)"));
  }
  return absl::OkStatus();
}

bool RoundAggregator::Admit(const SyncRequest& request, SyncCallback& done,
                            std::vector<const ChunkSpec*>* specs,
                            core::Deferred* deferred) {
  const uint32_t d = request.datacenter;
  const uint64_t round = request.round;
  auto refuse = [&](absl::Status status) {
    mu_.AssertHeld();  // called only below, under the lock
    Refuse(request, std::move(status), std::move(done), deferred);
    return false;
  };
  if (absl::Status status = CheckSender(d); !status.ok()) return refuse(status);
  if (round > open_round_) {
    return refuse(absl::FailedPreconditionError(
        absl::StrCat("round ", round, " of data center ", d,
                     " is in the future: the GS is at round ", open_round_)));
  }
  const RoundAnswerPtr* stored = answers_.Find(round);
  if (round < next_round_[d]) {
    // A retry of a round already counted: counted once, answered alike.
    ++stats_.duplicates;
    if (round == open_round_) {
      // While the round is held, this call's own hold begins now.
      if (!waiters_.Add(
              d, core::WaitDeadline(options_.clock(), options_.hold_timeout),
              done)) {
        return refuse(TooManyWaits(d, round));
      }
      return false;
    }
    if (stored == nullptr) {
      return refuse(absl::FailedPreconditionError(absl::StrCat(
          "round ", round, " of data center ", d,
          " is no longer kept: the GS keeps the answers of the last ",
          KeptRounds(options_.max_lag),
          " rounds (2 x (--max_lag + 1), --max_lag=", options_.max_lag,
          ") and is at round ", open_round_)));
    }
    deferred->Answer<RoundAnswerPtr>(std::move(done), *stored);
    return false;
  }
  if (round > next_round_[d]) {
    return refuse(absl::FailedPreconditionError(absl::StrCat(
        "data center ", d, " sent round ", round, ", but its next round is ",
        next_round_[d],
        " (rounds are sent in order; Register tells the next one)")));
  }
  if (round < open_round_ && stored == nullptr) {
    return refuse(NoLongerKept(round, d, open_round_));
  }
  if (decoding_[d]) {
    // The first copy is still being decoded; a retry finds it counted.
    return refuse(core::InFlightError(core::StepNames{"round", "the GS"},
                                      round, "request",
                                      absl::StrCat("data center ", d)));
  }
  if (absl::Status status = ResolveChunks(request, specs); !status.ok()) {
    return refuse(status);
  }
  decoding_[d] = true;
  return true;
}

absl::Status RoundAggregator::ResolveChunks(
    const SyncRequest& request, std::vector<const ChunkSpec*>* specs) const {
  absl::flat_hash_set<uint32_t> seen;
  for (size_t i = 0; i < request.updates.size(); ++i) {
    const uint32_t key = request.updates[i].chunk_key;
    auto invalid = [&](absl::string_view what) {
      return absl::InvalidArgumentError(
          absl::StrCat("round ", request.round, ": chunk ", key,
                       " of data center ", request.datacenter, what));
    };
    if (key >= chunks_.size()) {
      return invalid(absl::StrCat(" is not a chunk of the model (",
                                  chunks_.size(), " chunks)"));
    }
    if (!seen.insert(key).second) return invalid(" appears twice");
    (*specs)[i] = &chunks_[key];
  }
  return absl::OkStatus();
}

void RoundAggregator::Add(const SyncRequest& request,
                          absl::StatusOr<DecodedUpdates> decoded,
                          SyncCallback done, core::Deferred* deferred) {
  const uint32_t d = request.datacenter;
  const uint64_t round = request.round;
  decoding_[d] = false;
  if (!decoded.ok()) {
    return Refuse(request, decoded.status(), std::move(done), deferred);
  }
  if (absl::Status serving = !closed_.ok() ? closed_ : failed_; !serving.ok()) {
    deferred->Answer<RoundAnswerPtr>(std::move(done), serving);
    return;
  }
  const absl::Time now = options_.clock();
  // The round may have closed while the updates were decoded: then they
  // are late, like any request for a closed round.
  const bool late = round < open_round_;
  RoundAnswerPtr stored;
  if (late) {
    const RoundAnswerPtr* kept = answers_.Find(round);
    // Not reachable while holds bound the lag; refused rather than added
    // without an answer to give.
    if (kept == nullptr) {
      return Refuse(request, NoLongerKept(round, d, open_round_),
                    std::move(done), deferred);
    }
    stored = *kept;
  }
  // Before anything is added, so that a refusal counts nothing (not
  // reached: a data center's first request of a round finds none of its
  // calls waiting).
  if (!late && !waiters_.Add(d, core::WaitDeadline(now, options_.hold_timeout),
                             done)) {
    return Refuse(request, TooManyWaits(d, round), std::move(done), deferred);
  }
  Accumulate(d, round, *std::move(decoded));
  if (late) {
    ++stats_.late_submissions;
    logger_->info(
        "data center {} sent round {} late: answered with the stored "
        "average; its updates join round {}",
        d, round, open_round_);
    deferred->Answer<RoundAnswerPtr>(std::move(done), std::move(stored));
  } else {
    sent_.Arrive(d);
    if (!first_arrival_.has_value()) first_arrival_ = now;
  }
  // All K may have sent now, or a lagging data center may have caught up
  // enough to release a hold.
  const uint64_t open = open_round_;
  MaybeClose(now, deferred);
  // A late answer leaves the GS now: the state must hold the updates it
  // took (a closing round saved them already).
  if (late && open_round_ == open) SaveState();
}

void RoundAggregator::Accumulate(uint32_t d, uint64_t round,
                                 DecodedUpdates decoded) {
  std::map<uint32_t, std::vector<float>>& sums = sums_[d];
  for (auto& [key, values] : decoded.chunks) {
    auto [it, inserted] = sums.try_emplace(key, std::move(values));
    if (!inserted) {
      std::vector<float>& sum = it->second;
      for (size_t j = 0; j < sum.size(); ++j) sum[j] += values[j];
    }
  }
  exact_chunks_.insert(decoded.exact.begin(), decoded.exact.end());
  contributions_.push_back(Contribution{d, round});
  round_bytes_in_ += decoded.bytes;
  stats_.bytes_in += decoded.bytes;
  next_round_[d] = round + 1;
}

}  // namespace tern::global
