#include "server/aggregator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/checksum.h"
#include "server/run_config_check.h"

namespace tern::server {
namespace {

// CheckParams remembers the first checksum of this many recent steps;
// workers run in lockstep, so their reports of one step arrive within a
// step of each other.
constexpr size_t kKeptChecks = 16;

std::string Seconds(absl::Duration duration) {
  return absl::StrCat(absl::ToDoubleSeconds(duration), "s");
}

// RESOURCE_EXHAUSTED: the worker's calls for `step` already fill their
// places at the barrier (core::kMaxWaitsPerMember).
absl::Status TooManyWaits(uint32_t worker, uint64_t step) {
  return core::TooManyWaitsError(absl::StrCat("worker ", worker),
                                 absl::StrCat("step ", step));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Aggregator>> Aggregator::Create(
    AggregatorOptions options, Logger logger) {
  if (options.num_workers == 0) {
    return absl::InvalidArgumentError("--num_workers must be at least 1");
  }
  if (options.num_shards == 0 || options.shard_index >= options.num_shards) {
    return absl::InvalidArgumentError(
        absl::StrCat("--shard_index=", options.shard_index,
                     " is not below --num_shards=", options.num_shards));
  }
  if (options.barrier_timeout <= absl::ZeroDuration() ||
      options.join_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "--barrier_timeout_s and --join_timeout_s must be positive");
  }
  if (options.max_message_bytes == 0) {
    return absl::InvalidArgumentError("--max_message_mb must be positive");
  }
  if (!options.clock) {
    return absl::InvalidArgumentError("the aggregator needs a clock");
  }
  if (options.worker_loss_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "--worker_loss_timeout_s must not be negative");
  }
  if (options.worker_loss_timeout == absl::ZeroDuration()) {
    options.worker_loss_timeout = options.barrier_timeout;
  }
  if (logger == nullptr) logger = MakeNullLogger();
  std::unique_ptr<Aggregator> aggregator(
      new Aggregator(std::move(options), std::move(logger)));
  if (aggregator->options_.state_path.empty()) return aggregator;
  const std::string& path = aggregator->options_.state_path;
  absl::MutexLock lock(&aggregator->mu_);
  aggregator->state_ = std::make_unique<ShardStateWriter>(
      path, aggregator->Limits(), aggregator->options_.state_sync);
  tern::v1::ShardState raw;
  absl::StatusOr<std::optional<ShardSnapshot>> snapshot =
      ReadShardState(path, aggregator->Limits(), &raw);
  if (!snapshot.ok()) return snapshot.status();
  if (!snapshot->has_value()) return aggregator;
  if (absl::Status status = aggregator->Restore(**snapshot, raw);
      !status.ok()) {
    return status;
  }
  return aggregator;
}

absl::Status Aggregator::Restore(const ShardSnapshot& snapshot,
                                 const tern::v1::ShardState& raw) {
  absl::StatusOr<std::unique_ptr<ShardRun>> run =
      ShardRun::Build(snapshot.first_join, Limits());
  if (!run.ok()) {
    return absl::DataLossError(
        absl::StrCat("shard state '", options_.state_path,
                     "': its run cannot be rebuilt: ", run.status().message()));
  }
  run_ = *std::move(run);
  step_ = snapshot.open_step;
  // Worker 0's start, when its join configured the run; otherwise worker 0
  // sends it again with its retried join.
  if (run_->config.broadcast_start && snapshot.first_join.worker_id == 0 &&
      !snapshot.first_join.initial_weights.empty()) {
    start_weights_ = std::make_shared<const std::vector<ChunkPayload>>(
        snapshot.first_join.initial_weights);
    start_checksum_ = snapshot.first_join.param_checksum;
  }
  for (const auto& [worker, step] : snapshot.dropped) {
    active_.Drop(worker, step);
    scalers_.Drop(worker, step_, nullptr);
  }
  active_.MarkDropped(&pushes_.pushed);
  for (const auto& chunk : run_->chunks) {
    absl::MutexLock chunk_lock(&chunk->mu);
    const auto residual = snapshot.residuals.find(chunk->key);
    if (residual != snapshot.residuals.end()) {
      if (residual->second.size() != chunk->residual.size()) {
        return absl::DataLossError(absl::StrCat(
            "shard state '", options_.state_path, "': the residual of chunk ",
            chunk->key, " has ", residual->second.size(), " values, not ",
            chunk->residual.size()));
      }
      chunk->residual = residual->second;
    }
    chunk->Open(run_->config.seed, step_, active_.count());
  }
  scalers_.Configure(run_.get());
  scalers_.Restore(snapshot.last_scalers, snapshot.open_scalers, step_);
  if (snapshot.open_scalers != nullptr) scalers_saved_for_ = step_;
  if (snapshot.last_answer != nullptr) {
    pushes_.answers.Put(step_ - 1, snapshot.last_answer);
  }
  for (uint32_t worker = 0; worker < options_.num_workers; ++worker) {
    joined_.Arrive(worker);
  }
  all_joined_ = true;
  checks_ = snapshot.checks;
  state_->Resume(raw);
  logger_->info("resumed run '{}' at step {} from {}", run_->config.run_id,
                step_, options_.state_path);
  return absl::OkStatus();
}

void Aggregator::SaveState(
    const std::function<absl::Status(ShardStateWriter&)>& write) {
  if (state_ == nullptr) return;
  if (absl::Status status = write(*state_); !status.ok()) {
    refusals_.Warn("state", "write failed",
                   "step {}: the shard's state was not saved, a restart "
                   "would resume from an earlier one: {}",
                   step_, std::string(status.message()));
  }
}

Aggregator::Aggregator(AggregatorOptions options, Logger logger)
    : options_(std::move(options)),
      logger_(std::move(logger)),
      created_(options_.clock()),
      names_{"step", absl::StrCat("shard ", options_.shard_index)},
      refusals_(logger_, options_.clock),
      joined_(options_.num_workers),
      scalers_(options_.num_workers, &names_),
      pushes_(options_.num_workers),
      share_watch_(options_.straggler_warn),
      push_watch_(options_.straggler_warn),
      active_(options_.num_workers) {}

Aggregator::~Aggregator() {
  Close(absl::UnavailableError(
      absl::StrCat("shard ", options_.shard_index, " is shutting down")));
}

ShardLimits Aggregator::Limits() const {
  return ShardLimits{options_.shard_index, options_.num_shards,
                     options_.num_workers, options_.max_message_bytes,
                     options_.make_codec, options_.run_id};
}

// --- checks shared by the calls ---

absl::Status Aggregator::CheckWorker(uint32_t worker) const {
  if (!closed_.ok()) return closed_;
  if (!failed_.ok()) return failed_;
  if (worker >= options_.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown worker ", worker, ": shard ", options_.shard_index,
        " serves workers 0..", options_.num_workers - 1,
        " (--num_workers=", options_.num_workers, ")"));
  }
  // A dropped worker that joined again is served while it catches up.
  if (const std::optional<uint64_t> dropped = active_.dropped_at(worker);
      dropped.has_value() && !active_.returns_at(worker).has_value()) {
    return DroppedError(worker, *dropped);
  }
  if (!joined_.arrived(worker)) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", worker, " has not joined shard ",
                     options_.shard_index, " (Join comes first)"));
  }
  return absl::OkStatus();
}

void Aggregator::AnswerAll(const absl::Status& status,
                           core::Deferred* deferred) {
  join_waiters_.AnswerAll(status, deferred);
  scalers_.AnswerAll(status, deferred);
  pushes_.waiters.AnswerAll(status, deferred);
}

void Aggregator::FailRun(absl::Status status, core::Deferred* deferred) {
  if (!failed_.ok()) return;
  failed_ = std::move(status);
  logger_->error("run failed: {}", std::string(failed_.message()));
  AnswerAll(failed_, deferred);
}

// --- Join ---

absl::Status Aggregator::AdmitJoin(const JoinRequest& request) {
  if (!closed_.ok()) return closed_;
  if (!failed_.ok()) return failed_;
  if (absl::Status status = CheckJoinOptions(request, Limits()); !status.ok()) {
    return status;
  }
  if (run_ != nullptr) return CompareWithRun(request, *run_, step_);
  absl::StatusOr<std::unique_ptr<ShardRun>> run =
      ShardRun::Build(request, Limits());
  if (!run.ok()) return run.status();
  run_ = *std::move(run);
  scalers_.Configure(run_.get());
  SaveState([&](ShardStateWriter& state) {
    return state.RunConfigured(request);
  });
  logger_->info(
      "run '{}' configured by worker {}: {} tensors, {} chunks of {} elements "
      "on this shard ({} share scalers, {} keep a residual), codec {}, {} "
      "workers",
      run_->config.run_id, run_->first_worker, run_->tensors.size(),
      run_->chunks.size(), run_->shard_elements, run_->scaler_chunks.size(),
      run_->feedback_chunks, kernels::CodecName(run_->config.codec),
      options_.num_workers);
  return absl::OkStatus();
}

void Aggregator::Join(const JoinRequest& request, Callback<JoinReply> done) {
  core::Deferred deferred;
  absl::MutexLock lock(&mu_);
  const uint32_t worker = request.worker_id;
  auto refuse = [&](absl::Status status) {
    LogRefusal(worker, "join", status, "join of worker {} refused: {}", worker,
               std::string(status.message()));
    deferred.Answer<JoinReply>(std::move(done), std::move(status));
  };
  if (absl::Status status = AdmitJoin(request); !status.ok()) {
    return refuse(std::move(status));
  }
  if (absl::Status status = TakeStartWeights(request); !status.ok()) {
    return refuse(std::move(status));
  }
  if (worker < options_.num_workers && !active_.active(worker)) {
    TakeBack(worker);
  }
  if (joined_.Arrive(worker)) {
    logger_->info("worker {} joined ({} of {})", worker, joined_.count(),
                  options_.num_workers);
  } else {
    logger_->info("worker {} rejoined at step {}", worker, step_);
  }
  const JoinReply reply = JoinAnswer(worker);
  if (!all_joined_ && joined_.complete()) {
    all_joined_ = true;
    logger_->info("all {} workers joined; starting at step {}",
                  options_.num_workers, step_);
    join_waiters_.AnswerAll(reply, &deferred);
  }
  if (all_joined_) {
    deferred.Answer<JoinReply>(std::move(done), reply);
  } else if (!join_waiters_.Add(worker, Deadline(), done)) {
    refuse(core::TooManyWaitsError(absl::StrCat("worker ", worker),
                                   "the join"));
  }
}

// --- ShareScalers ---

void Aggregator::ShareScalers(const ScalerRequest& request,
                              Callback<ScalerAnswer> done) {
  core::Deferred deferred;
  absl::MutexLock lock(&mu_);
  absl::Status status = CheckWorker(request.worker_id);
  if (status.ok()) {
    status = scalers_.Share(request, step_, Deadline(), done, &deferred);
  }
  if (status.ok() && request.step == step_) {
    share_watch_.Arrive(options_.clock());
  }
  // Saved before `deferred` releases the shared scalers to anyone.
  if (scalers_.shared() != nullptr && scalers_saved_for_ != step_) {
    scalers_saved_for_ = step_;
    const ScalerReply& shared = *scalers_.shared();
    SaveState(
        [&](ShardStateWriter& state) { return state.ScalersShared(shared); });
  }
  if (!status.ok()) {
    LogRefusal(request.worker_id, "scalers", status,
               "scalers of worker {} for step {} refused: {}",
               request.worker_id, request.step, std::string(status.message()));
    deferred.Answer<ScalerAnswer>(std::move(done), std::move(status));
  }
}

// --- PushPull ---

absl::StatusOr<std::unique_ptr<MatchedPush>> Aggregator::AdmitPush(
    const PushRequest& request, Callback<PushAnswer>& done,
    core::Deferred* deferred) {
  const uint32_t worker = request.worker_id;
  const uint64_t step = request.step;
  if (absl::Status status = CheckWorker(worker); !status.ok()) return status;
  using Kind = core::Admission<PushAnswer>::Kind;
  const core::Admission<PushAnswer> admission =
      core::Admit(names_, step, step_, pushes_.answers, pushes_.pushed, worker,
                  "push", absl::StrCat("worker ", worker));
  switch (admission.kind) {
    case Kind::kRefused:
      return admission.error;
    case Kind::kCached:  // a retry of the step just completed
      deferred->Answer<PushAnswer>(std::move(done), *admission.cached);
      return nullptr;
    case Kind::kDuplicate:  // counted once, answered with the others
      if (!pushes_.waiters.Add(worker, Deadline(), done)) {
        return TooManyWaits(worker, step);
      }
      return nullptr;
    case Kind::kAdmit:
      break;
  }
  if (!run_->scaler_chunks.empty() && scalers_.shared() == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "step ", step, ": worker ", worker,
        " pushed before the scalers of the step were shared (missing: ",
        scalers_.Missing(), ")"));
  }
  absl::StatusOr<MatchedPush> matched =
      MatchChunks(request, *run_, scalers_.shared(), options_.shard_index);
  if (!matched.ok()) return matched.status();
  pushes_.pushed.Begin(worker);
  matched->slot = active_.Slot(worker);
  return std::make_unique<MatchedPush>(*std::move(matched));
}

void Aggregator::PushPull(const PushRequest& request,
                          Callback<PushAnswer> done) {
  const uint32_t worker = request.worker_id;
  const uint64_t step = request.step;
  auto refuse = [&](absl::Status status, core::Deferred* deferred) {
    LogRefusal(worker, "push", status, "push of worker {} for step {} refused: {}",
               worker, step, std::string(status.message()));
    deferred->Answer<PushAnswer>(std::move(done), std::move(status));
  };

  // 1. Under the lock: is this push expected, and which chunks does it hold?
  std::unique_ptr<MatchedPush> matched;
  {
    core::Deferred deferred;
    absl::MutexLock lock(&mu_);
    absl::StatusOr<std::unique_ptr<MatchedPush>> admitted =
        AdmitPush(request, done, &deferred);
    if (!admitted.ok()) return refuse(admitted.status(), &deferred);
    if (*admitted == nullptr) return;
    matched = *std::move(admitted);
  }

  // 2. Without the lock: validate and decode every chunk once, then add
  // them. Each chunk's own lock serializes the workers adding to it.
  size_t added = 0;
  absl::StatusOr<CheckedPush> checked = CheckPush(request, *matched);
  absl::Status status = checked.status();
  if (checked.ok()) {
    status = AddPush(request, *matched, *std::move(checked), &added);
  }

  // 3. Under the lock: count the push; the last one completes the step.
  core::Deferred deferred;
  absl::MutexLock lock(&mu_);
  if (!status.ok() && added == 0) {
    pushes_.pushed.Abort(worker);
    return refuse(std::move(status), &deferred);
  }
  if (!status.ok()) {
    // Validation passed, the codec's Add refused, and earlier chunks are
    // already in the sum: the step cannot be completed correctly.
    FailRun(absl::InternalError(absl::StrCat(
                "step ", step, ": chunk ", matched->chunks[added]->key,
                " of worker ", worker,
                ": the codec refused a push its decoder accepted, after "
                "other chunks were added: ",
                status.message())),
            &deferred);
    deferred.Answer<PushAnswer>(std::move(done), failed_);
    return;
  }
  pushes_.pushed.Arrive(worker);
  push_watch_.Arrive(options_.clock());
  if (absl::Status serving = !closed_.ok() ? closed_ : failed_; !serving.ok()) {
    deferred.Answer<PushAnswer>(std::move(done), serving);
    return;
  }
  // Not refused: a worker's first push of a step finds none of its calls
  // waiting (they are answered when the step before completes).
  if (!pushes_.waiters.Add(worker, Deadline(), done)) {
    return refuse(TooManyWaits(worker, step), &deferred);
  }
  if (pushes_.pushed.complete()) CompleteStep(&deferred);
}

void Aggregator::CompleteStep(core::Deferred* deferred) {
  // Before the chunks open the next step: they count its workers.
  ReadmitReturning();
  absl::StatusOr<PushAnswer> answer =
      PushBarrier::Complete(*run_, step_, active_.count());
  if (!answer.ok()) {
    FailRun(answer.status(), deferred);
    return;
  }
  // Saved before `deferred` releases the answer to anyone.
  SaveState([&](ShardStateWriter& state) {
    mu_.AssertHeld();  // SaveState calls it here, under the lock
    return state.StepCompleted(**answer, *run_, checks_);
  });
  pushes_.waiters.AnswerAll(*answer, deferred);
  SizeAnswerCache(**answer);
  pushes_.answers.Put(step_, *std::move(answer));
  pushes_.pushed.Reset();
  active_.MarkDropped(&pushes_.pushed);
  scalers_.CompleteStep(step_, deferred);
  share_watch_.Reset();
  push_watch_.Reset();
  logger_->debug("step {} done", step_);
  ++step_;
}

void Aggregator::SizeAnswerCache(const PushReply& answer) {
  uint64_t bytes = 1;
  for (const ChunkPayload& chunk : answer.chunks) {
    bytes += chunk.payload.data.size() +
             sizeof(float) * chunk.payload.scalers.size();
  }
  const size_t steps = std::max<uint64_t>(1, options_.catch_up_bytes / bytes);
  pushes_.answers.set_capacity(steps);
  scalers_.KeepAnswers(steps);
}

// --- CheckParams, timeouts, shutdown ---

absl::Status Aggregator::CheckParams(uint32_t worker_id, uint64_t step,
                                     uint64_t checksum) {
  core::Deferred deferred;
  absl::MutexLock lock(&mu_);
  if (absl::Status status = CheckWorker(worker_id); !status.ok()) {
    return status;
  }
  const auto it = checks_.find(step);
  if (it == checks_.end()) {
    checks_[step] = {worker_id, checksum};
    while (checks_.size() > kKeptChecks) checks_.erase(checks_.begin());
    return absl::OkStatus();
  }
  const auto [first, first_checksum] = it->second;
  if (checksum != first_checksum) {
    FailRun(absl::FailedPreconditionError(
                absl::StrCat("step ", step, ": param checksum ",
                             FormatChecksum(checksum), " of worker ", worker_id,
                             " differs from ", FormatChecksum(first_checksum),
                             " of worker ", first, ": the replicas diverged")),
            &deferred);
    return failed_;
  }
  return absl::OkStatus();
}

absl::Status Aggregator::ExpireWaits(absl::Time now) {
  refusals_.Flush();
  core::Deferred deferred;
  absl::MutexLock lock(&mu_);
  const std::string within =
      absl::StrCat(" within ", Seconds(options_.barrier_timeout));
  // Each list's message is built only when one of its calls expired.
  std::string message;
  auto expired = [&message](std::string text) {
    message = std::move(text);
    return absl::DeadlineExceededError(message);
  };
  auto log = [&](size_t calls) {
    if (calls == 0) return;
    logger_->warn("{} ({} pending {} answered)", message, calls,
                  calls == 1 ? "call" : "calls");
  };
  // Before the waits expire: a lost worker's policy answers them first.
  HandleWorkerLoss(now, &deferred);
  log(join_waiters_.Expire(
      now,
      [&] {
        mu_.AssertHeld();  // Expire calls it here, under the lock
        return expired(absl::StrCat(joined_.Missing(), " did not join shard ",
                                    options_.shard_index, within));
      },
      &deferred));
  if (const size_t calls = scalers_.Expire(now, step_, within, &deferred)) {
    message = absl::StrCat("step ", step_, ": ", scalers_.Missing(),
                           " did not share scalers", within);
    log(calls);
  }
  log(pushes_.waiters.Expire(
      now,
      [&] {
        mu_.AssertHeld();  // Expire calls it here, under the lock
        return expired(absl::StrCat("step ", step_, ": ",
                                    pushes_.pushed.Missing(), " did not push",
                                    within));
      },
      &deferred));
  WarnStragglers(now);
  if (!all_joined_ &&
      core::JoinPhaseExpired(created_, now, options_.join_timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat(joined_.Missing(), " of ", options_.num_workers,
                     " did not join shard ", options_.shard_index, " within ",
                     Seconds(options_.join_timeout), " (--join_timeout_s)"));
  }
  return absl::OkStatus();
}

void Aggregator::WarnStragglers(absl::Time now) {
  if (run_ == nullptr || !failed_.ok()) return;
  if (scalers_.shared() == nullptr && share_watch_.Due(now)) {
    logger_->warn("step {}: still waiting for {} to share scalers, {} after "
                  "the first worker did (a straggler? --straggler_warn_s)",
                  step_, scalers_.Missing(),
                  absl::FormatDuration(share_watch_.Waited(now)));
  }
  if (!pushes_.pushed.complete() && push_watch_.Due(now)) {
    logger_->warn("step {}: still waiting for {} to push, {} after the "
                  "first worker did (a straggler? --straggler_warn_s)",
                  step_, pushes_.pushed.Missing(),
                  absl::FormatDuration(push_watch_.Waited(now)));
  }
}

Aggregator::Waiting Aggregator::WaitingFor() const {
  absl::MutexLock lock(&mu_);
  const absl::Time now = options_.clock();
  Waiting waiting;
  waiting.step = step_;
  if (run_ == nullptr || !failed_.ok()) return waiting;
  // The watches' clocks run from their barrier's first arrival only.
  if (scalers_.shared() == nullptr && share_watch_.Started()) {
    waiting.waiting_for = absl::StrCat(scalers_.Missing(), " to share scalers");
    waiting.waited = share_watch_.Waited(now);
  } else if (!pushes_.pushed.complete() && push_watch_.Started()) {
    waiting.waiting_for = absl::StrCat(pushes_.pushed.Missing(), " to push");
    waiting.waited = push_watch_.Waited(now);
  }
  return waiting;
}

void Aggregator::Close(absl::Status status) {
  core::Deferred deferred;
  absl::MutexLock lock(&mu_);
  if (!closed_.ok()) return;
  closed_ = std::move(status);
  logger_->info("closing: {}", std::string(closed_.message()));
  AnswerAll(closed_, &deferred);
}

uint64_t Aggregator::step() const {
  absl::MutexLock lock(&mu_);
  return step_;
}

uint32_t Aggregator::joined_workers() const {
  absl::MutexLock lock(&mu_);
  return joined_.count();
}

bool Aggregator::all_joined() const {
  absl::MutexLock lock(&mu_);
  return all_joined_;
}

size_t Aggregator::waiting_pushes() const {
  absl::MutexLock lock(&mu_);
  return pushes_.waiters.size();
}

absl::Status Aggregator::run_status() const {
  absl::MutexLock lock(&mu_);
  return failed_;
}

}  // namespace tern::server
