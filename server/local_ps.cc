// The LPS's creation, expiry and shutdown. Join, pushes and rounds live in
// local_ps_join.cc, local_ps_answer.cc and local_ps_rounds.cc.
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/barrier.h"
#include "server/local_ps.h"

namespace tern::server {

std::string LocalPs::Seconds(absl::Duration duration) {
  return absl::StrCat(absl::ToDoubleSeconds(duration), "s");
}

absl::StatusOr<std::unique_ptr<LocalPs>> LocalPs::Create(LocalPsOptions options,
                                                         Logger logger) {
  if (options.mode == RunMode::kTernGrad) {
    return absl::InvalidArgumentError(
        "the local parameter server runs --mode=weightgrad or gaia");
  }
  if (options.num_workers == 0) {
    return absl::InvalidArgumentError("--num_workers must be at least 1");
  }
  switch (options.weight_codec) {
    case kernels::CodecId::kTernGrad:
    case kernels::CodecId::kInt8:
    case kernels::CodecId::kFp32:
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "--weight_codec: ", kernels::CodecName(options.weight_codec),
          " is not ternary, int8 or fp32"));
  }
  if (options.sync_every == 0) {
    return absl::InvalidArgumentError("--sync_every must be at least 1");
  }
  if (options.sync_timeout <= absl::ZeroDuration() ||
      options.hold_limit <= absl::ZeroDuration() ||
      options.join_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "--sync_timeout_s, --barrier_timeout_s and --join_timeout_s must be "
        "positive");
  }
  if (!options.clock) {
    return absl::InvalidArgumentError("the LPS needs a clock");
  }
  if (logger == nullptr) logger = MakeNullLogger();
  std::unique_ptr<LocalPs> lps(
      new LocalPs(std::move(options), std::move(logger)));
  if (absl::Status resumed = lps->ResumeIfSaved(); !resumed.ok()) {
    return resumed;
  }
  return lps;
}

LocalPs::LocalPs(LocalPsOptions options, Logger logger)
    : options_(std::move(options)),
      logger_(std::move(logger)),
      created_(options_.clock()),
      refusals_(logger_, options_.clock),
      joined_(options_.num_workers) {}

LocalPs::~LocalPs() {
  Close(absl::UnavailableError("the local parameter server is shutting down"));
}

// --- expiry and shutdown ---

absl::Status LocalPs::ExpireWaits(absl::Time now) {
  refusals_.Flush();
  Deferred deferred;
  absl::MutexLock lock(&mu_);
  if (!closed_.ok()) return absl::OkStatus();
  ExpireJoins(now, &deferred);
  Release(now, &deferred);
  if (!joined_.complete() &&
      core::JoinPhaseExpired(created_, now, options_.join_timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("only ", joined_.count(), " of ", options_.num_workers,
                     " workers joined within ", Seconds(options_.join_timeout),
                     " (--join_timeout_s)"));
  }
  return failed_;
}

void LocalPs::AnswerAll(const absl::Status& status, Deferred* deferred) {
  join_waiters_.AnswerAll(status, deferred);
  for (PushWaiter& waiter : push_waiters_) {
    deferred->Answer<PushAnswer>(std::move(waiter.done), status);
  }
  push_waiters_.clear();
}

void LocalPs::Close(absl::Status status) {
  Deferred deferred;
  absl::MutexLock lock(&mu_);
  if (!closed_.ok()) return;
  closed_ = std::move(status);
  AnswerAll(closed_, &deferred);
}

void LocalPs::Fail(absl::Status status) {
  Deferred deferred;
  absl::MutexLock lock(&mu_);
  if (!failed_.ok()) return;
  failed_ = std::move(status);
  logger_->error("run failed: {}", std::string(failed_.message()));
  AnswerAll(failed_, &deferred);
}

uint32_t LocalPs::joined_workers() const {
  absl::MutexLock lock(&mu_);
  return joined_.count();
}

uint64_t LocalPs::completed_steps() const {
  absl::MutexLock lock(&mu_);
  return state_ == nullptr ? 0 : state_->completed_steps();
}

bool LocalPs::finished() const {
  absl::MutexLock lock(&mu_);
  return final_ == Final::kDone;
}

uint64_t LocalPs::checksum() const {
  absl::MutexLock lock(&mu_);
  return state_ == nullptr ? 0 : state_->Checksum();
}

}  // namespace tern::server
