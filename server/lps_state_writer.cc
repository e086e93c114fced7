#include "server/lps_state_writer.h"

#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tern::server {

LpsStateWriter::LpsStateWriter(std::string path, bool sync, Logger logger)
    : path_(std::move(path)),
      sync_(sync),
      logger_(std::move(logger)),
      thread_([this] { Run(); }) {}

LpsStateWriter::~LpsStateWriter() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void LpsStateWriter::Submit(LpsSnapshot snapshot, uint64_t step) {
  absl::MutexLock lock(&mu_);
  if (next_.has_value()) {
    logger_->debug(
        "step {}: the state of step {} was not written yet; the "
        "newer one replaces it",
        step, next_step_);
  }
  next_ = std::move(snapshot);
  next_step_ = step;
}

void LpsStateWriter::Flush() {
  absl::MutexLock lock(&mu_);
  const auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !next_.has_value() && !writing_;
  };
  mu_.Await(absl::Condition(&idle));
}

void LpsStateWriter::Run() {
  while (true) {
    LpsSnapshot snapshot;
    uint64_t step = 0;
    {
      absl::MutexLock lock(&mu_);
      const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return next_.has_value() || stop_;
      };
      mu_.Await(absl::Condition(&ready));
      // Stopping writes what still waits first: the destructor's flush.
      if (!next_.has_value()) return;
      snapshot = *std::move(next_);
      next_.reset();
      step = next_step_;
      writing_ = true;
    }
    const absl::Time start = absl::Now();
    const absl::Status written = WriteLpsState(path_, snapshot, sync_);
    if (written.ok()) {
      logger_->debug("step {}: state written to {} in {:.3f}s", step, path_,
                     absl::ToDoubleSeconds(absl::Now() - start));
    } else {
      // The run goes on; a kill now resumes from the last state written.
      logger_->error("step {}: {}", step, std::string(written.message()));
    }
    absl::MutexLock lock(&mu_);
    writing_ = false;
  }
}

}  // namespace tern::server
