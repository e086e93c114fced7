// The aggregator's life: creation, the clock's tick, failure and shutdown,
// and what it reports. Registration, collection and closing live in
// round_registration.cc, round_collection.cc and round_closing.cc.
#include "global/round_aggregator.h"

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tern::global {

absl::StatusOr<std::unique_ptr<RoundAggregator>> RoundAggregator::Create(
    RoundAggregatorOptions options, Logger logger) {
  if (options.num_datacenters == 0) {
    return absl::InvalidArgumentError("--num_datacenters must be at least 1");
  }
  if (options.t_global <= absl::ZeroDuration() ||
      options.hold_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "--t_global_s and --hold_timeout_s must be positive");
  }
  // The magnitude rule bounds each update; this bounds how many add up
  // (kMaxRoundSummands), so a round's sum cannot overflow.
  const uint64_t summands = uint64_t{options.num_datacenters} *
                            (uint64_t{options.max_lag} + 2);
  if (summands > kMaxRoundSummands) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--num_datacenters=", options.num_datacenters, " with --max_lag=",
        options.max_lag, " lets a round add ", summands,
        " updates into one element (K * (max_lag + 2)), more than ",
        kMaxRoundSummands,
        ": sums of values up to 1e30 could overflow float32"));
  }
  if (options.max_message_bytes == 0) {
    return absl::InvalidArgumentError("--max_message_mb must be positive");
  }
  if (!options.clock) {
    return absl::InvalidArgumentError("the round aggregator needs a clock");
  }
  if (logger == nullptr) logger = MakeNullLogger();
  std::unique_ptr<RoundAggregator> aggregator(
      new RoundAggregator(std::move(options), std::move(logger)));
  if (aggregator->options_.state_path.empty()) return aggregator;
  absl::StatusOr<std::optional<GsSnapshot>> snapshot =
      ReadGsState(aggregator->options_.state_path);
  if (!snapshot.ok()) return snapshot.status();
  if (snapshot->has_value()) {
    absl::MutexLock lock(&aggregator->mu_);
    if (absl::Status status = aggregator->Restore(**snapshot); !status.ok()) {
      return status;
    }
  }
  return aggregator;
}

RoundAggregator::RoundAggregator(RoundAggregatorOptions options, Logger logger)
    : options_(std::move(options)),
      logger_(std::move(logger)),
      refusals_(logger_, options_.clock),
      sent_(options_.num_datacenters),
      answers_(KeptRounds(options_.max_lag)) {
  const uint32_t k = options_.num_datacenters;
  registered_.assign(k, false);
  next_round_.assign(k, 0);
  decoding_.assign(k, false);
  sums_.resize(k);
}

RoundAggregator::~RoundAggregator() {
  Close(absl::UnavailableError("the global server is shutting down"));
}

void RoundAggregator::Tick(absl::Time now) {
  refusals_.Flush();
  core::Deferred deferred;
  absl::MutexLock lock(&mu_);
  MaybeClose(now, &deferred);
  ExpireHolds(now, &deferred);
}

void RoundAggregator::FailRun(absl::Status status, core::Deferred* deferred) {
  if (!failed_.ok()) return;
  failed_ = std::move(status);
  logger_->error("run failed: {}", std::string(failed_.message()));
  waiters_.AnswerAll(failed_, deferred);
}

void RoundAggregator::Close(absl::Status status) {
  core::Deferred deferred;
  absl::MutexLock lock(&mu_);
  if (!closed_.ok()) return;
  closed_ = std::move(status);
  logger_->info("closing at round {}: {}", open_round_,
                std::string(closed_.message()));
  waiters_.AnswerAll(closed_, &deferred);
}

uint64_t RoundAggregator::open_round() const {
  absl::MutexLock lock(&mu_);
  return open_round_;
}

std::vector<uint64_t> RoundAggregator::lags() const {
  absl::MutexLock lock(&mu_);
  std::vector<uint64_t> lags(options_.num_datacenters, 0);
  for (uint32_t d = 0; d < options_.num_datacenters; ++d) {
    if (registered_[d] && next_round_[d] < open_round_) {
      lags[d] = open_round_ - next_round_[d];
    }
  }
  return lags;
}

bool RoundAggregator::holding() const {
  absl::MutexLock lock(&mu_);
  return hold_began_.has_value();
}

RoundStats RoundAggregator::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

absl::Status RoundAggregator::run_status() const {
  absl::MutexLock lock(&mu_);
  return failed_;
}

}  // namespace tern::global
