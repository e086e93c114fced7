// Closing a round: T_global, bounded staleness (holds), the average
// A = (1/K) * sum_d U_d and its encoding, and the answers.
#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/philox.h"
#include "global/round_aggregator.h"

namespace tern::global {
namespace {

std::string Seconds(absl::Duration duration) {
  return absl::StrCat(absl::ToDoubleSeconds(duration), "s");
}

// Adds `values` into `sums[key]` (moved in when the key is new).
void AddInto(std::map<uint32_t, std::vector<float>>& sums, uint32_t key,
             std::vector<float>&& values) {
  auto [it, inserted] = sums.try_emplace(key, std::move(values));
  if (inserted) return;
  std::vector<float>& sum = it->second;
  for (size_t j = 0; j < sum.size(); ++j) sum[j] += values[j];
}

}  // namespace

std::vector<uint32_t> RoundAggregator::TooFarBehind() const {
  std::vector<uint32_t> behind;
  for (uint32_t d = 0; d < options_.num_datacenters; ++d) {
    if (!sent_.arrived(d) && open_round_ - next_round_[d] > options_.max_lag) {
      behind.push_back(d);
    }
  }
  return behind;
}

std::string RoundAggregator::DescribeLag(
    const std::vector<uint32_t>& datacenters) const {
  std::vector<std::string> parts;
  const size_t named = std::min(datacenters.size(), core::kMaxNamedMembers);
  for (size_t i = 0; i < named; ++i) {
    const uint32_t d = datacenters[i];
    parts.push_back(registered_[d]
                        ? absl::StrCat(d, " (at round ", next_round_[d], ")")
                        : absl::StrCat(d, " (not registered)"));
  }
  if (named < datacenters.size()) {
    parts.push_back(absl::StrCat("and ", datacenters.size() - named, " more"));
  }
  return absl::StrCat(
      datacenters.size() == 1 ? "data center " : "data centers ",
      absl::StrJoin(parts, ", "));
}

void RoundAggregator::MaybeClose(absl::Time now, core::Deferred* deferred) {
  if (!closed_.ok() || !failed_.ok()) return;
  if (sent_.complete()) {
    CloseRound(now, deferred);
    return;
  }
  if (!first_arrival_.has_value() ||
      now < *first_arrival_ + options_.t_global) {
    return;
  }
  const std::vector<uint32_t> behind = TooFarBehind();
  if (behind.empty()) {
    CloseRound(now, deferred);
    return;
  }
  if (hold_began_.has_value()) return;
  // Every waiting call's hold begins now (ExpireHolds).
  hold_began_ = now;
  ++stats_.holds;
  logger_->warn(
      "round {} held: {} {} more than --max_lag={} rounds behind; the "
      "others' answers wait (at most {} each)",
      open_round_, DescribeLag(behind), behind.size() == 1 ? "lags" : "lag",
      options_.max_lag, Seconds(options_.hold_timeout));
}

void RoundAggregator::ExpireHolds(absl::Time now, core::Deferred* deferred) {
  // A call waits hold_timeout from the later of its arrival (its waiter's
  // deadline) and the hold's start (checked here), under the core's rule.
  if (!hold_began_.has_value() ||
      !core::Expired(core::WaitDeadline(*hold_began_, options_.hold_timeout),
                     now)) {
    return;
  }
  absl::Status status;
  const size_t expired = waiters_.Expire(
      now,
      [&] {
        mu_.AssertHeld();  // Expire calls it here, under the lock
        const std::vector<uint32_t> behind = TooFarBehind();
        status = absl::UnavailableError(absl::StrCat(
            "round ", open_round_, " is held: ", DescribeLag(behind),
            behind.size() == 1 ? " lags" : " lag", " more than --max_lag=",
            options_.max_lag, " rounds behind; retry"));
        return status;
      },
      deferred);
  if (expired == 0) return;
  stats_.hold_timeouts += expired;
  logger_->warn("{} ({} held {} answered after {})",
                std::string(status.message()), expired,
                expired == 1 ? "call" : "calls",
                Seconds(options_.hold_timeout));
}

std::map<uint32_t, std::vector<float>> RoundAggregator::TakeRoundSum() {
  // Summed in data-center order (each data center's own updates already in
  // round order), so the bytes are reproducible.
  std::map<uint32_t, std::vector<float>> total;
  for (std::map<uint32_t, std::vector<float>>& sums : sums_) {
    for (auto& [key, values] : sums) AddInto(total, key, std::move(values));
    sums.clear();
  }
  return total;
}

absl::StatusOr<kernels::Payload> RoundAggregator::EncodeAverage(
    uint32_t key, const ChunkSpec& spec, std::vector<float> average) const {
  kernels::EncodeContext context;
  // Every LPS gets the same bytes: the draws depend only on (seed, round,
  // chunk). Rounds wrap at 2^32 in the stream, far beyond any run.
  context.stream =
      RandomStream{options_.seed, static_cast<uint32_t>(open_round_), key,
                   kGlobalStreamWorker};
  context.scaler = 0.0f;  // the GS's own scaler, from A itself
  return spec.kernel->Encode(average, context);
}

absl::Status RoundAggregator::EncodeAnswer(
    std::map<uint32_t, std::vector<float>> total, RoundAnswer* answer,
    uint64_t* bytes_out) {
  const float divisor = static_cast<float>(options_.num_datacenters);
  for (auto& [key, sum] : total) {
    for (size_t j = 0; j < sum.size(); ++j) {
      sum[j] /= divisor;
      // A backstop: updates within the magnitude rule, at most
      // kMaxRoundSummands of them, cannot overflow (Create).
      if (!std::isfinite(sum[j])) {
        return absl::InternalError(absl::StrCat(
            "round ", open_round_, ": chunk ", key, ": element ", j,
            " of the average overflowed float32 (", sum[j], ")"));
      }
    }
    ChunkSpec spec = chunks_[key];
    if (exact_chunks_.contains(key)) {
      spec = ChunkSpec{spec.num_elements, kernels::CodecId::kFp32,
                       kernels::Layout::kRaw, fp32_codec_.get()};
    }
    absl::StatusOr<kernels::Payload> payload =
        EncodeAverage(key, spec, std::move(sum));
    if (!payload.ok()) {
      return absl::InternalError(
          absl::StrCat("round ", open_round_, ": chunk ", key,
                       ": the average could not be encoded: ",
                       payload.status().message()));
    }
    *bytes_out +=
        payload->data.size() + payload->scalers.size() * sizeof(float);
    answer->average.push_back(ChunkPayload{key, *std::move(payload)});
  }
  return absl::OkStatus();
}

void RoundAggregator::LogClosed(absl::Time now, const RoundAnswer& answer,
                                uint64_t bytes_out) const {
  const absl::Duration open_for =
      first_arrival_.has_value() ? now - *first_arrival_ : absl::ZeroDuration();
  std::string held;
  if (hold_began_.has_value()) {
    held = absl::StrCat(", held ", Seconds(now - *hold_began_));
  }
  const uint64_t open_round = open_round_;
  const size_t late = std::count_if(
      answer.contributions.begin(), answer.contributions.end(),
      [&](const Contribution& c) { return c.round != open_round; });
  logger_->info(
      "round {} closed after {}: {} of {} data centers sent it, {} late "
      "update(s) joined, lagging [{}]{}, {} chunks averaged, {} bytes in, {} "
      "bytes out",
      open_round_, Seconds(open_for), sent_.count(), options_.num_datacenters,
      late, absl::StrJoin(answer.lagging, ","), held, answer.average.size(),
      round_bytes_in_, bytes_out);
}

void RoundAggregator::CloseRound(absl::Time now, core::Deferred* deferred) {
  auto answer = std::make_shared<RoundAnswer>();
  answer->round = open_round_;
  uint64_t bytes_out = 0;
  absl::Status encoded = EncodeAnswer(TakeRoundSum(), answer.get(), &bytes_out);
  exact_chunks_.clear();
  if (!encoded.ok()) {
    FailRun(std::move(encoded), deferred);
    return;
  }
  for (uint32_t d = 0; d < options_.num_datacenters; ++d) {
    if (!sent_.arrived(d)) answer->lagging.push_back(d);
  }
  answer->contributions = std::move(contributions_);
  std::sort(answer->contributions.begin(), answer->contributions.end(),
            [](const Contribution& a, const Contribution& b) {
              return std::pair(a.datacenter, a.round) <
                     std::pair(b.datacenter, b.round);
            });
  LogClosed(now, *answer, bytes_out);
  if (options_.round_closed && first_arrival_.has_value()) {
    options_.round_closed(now - *first_arrival_);
  }
  ++stats_.rounds_closed;
  stats_.bytes_out += bytes_out;

  RoundAnswerPtr shared = std::move(answer);
  waiters_.AnswerAll(shared, deferred);
  answers_.Put(open_round_, std::move(shared));

  ++open_round_;
  first_arrival_.reset();
  hold_began_.reset();
  sent_.Reset();
  contributions_.clear();
  round_bytes_in_ = 0;
  // Before the answers are released (the caller's Deferred, after the
  // lock): a restarted GS gives a retry the same answer.
  SaveState();
}

}  // namespace tern::global
