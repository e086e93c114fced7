// The TernGrad step of one parameter-server shard (DESIGN section 3) with
// the failure semantics of section 7, as a plain class: no protobuf, no
// gRPC (server/ps_service.h adapts it to the wire). server/README.md states
// the protocol and every decision the design leaves open.
//
// Per step t the shard runs two barriers over the N workers:
//   ShareScalers(t): each worker sends its local scalers s_ik of the shard's
//     TernGrad chunks; once all N have sent, every caller gets
//     s_k = max_i s_ik (server/scaler_barrier.h).
//   PushPull(t): each worker pushes every chunk of the shard, encoded; the
//     shard adds them (Aggregation::Add); once all N have pushed, every
//     caller gets Aggregation::Finish() of each chunk and the shard moves on
//     to step t + 1 (server/push_pull.h). Codecs that are not Summable()
//     decode, average and re-encode (kernels/float_aggregation.h); for those
//     with UsesErrorFeedback() the shard keeps one residual per chunk across
//     steps, which Finish() updates once per step.
// Before step 0, Join is a barrier too: a worker's Join is answered once all
// N workers have joined (later joins, e.g. of a restarted worker, at once),
// so workers start step 0 together. The first join fixes the run
// (server/shard_run.h); later ones must match it (server/run_config_check.h).
//
// The mechanics are the server core's (core/README.md): answers go through a
// core::Deferred, arrivals are core::ArrivalSets, retries and stale or future
// steps follow core::Admit, and every pending call -- a join included --
// expires by the core's one rule: barrier_timeout after its arrival.
//
// Refusals are logged at a bounded rate per worker and kind
// (common/refusal_log.h); ExpireWaits logs the summaries of those left out.
//
// Callbacks: each asynchronous method calls its `done` exactly once, either
// before it returns (an error, a cached answer, or the call completed the
// barrier) or later from the thread that completes the barrier, from
// ExpireWaits or from Close. `done` is never called with the aggregator's
// lock held, so it may call back into the aggregator.
//
// Thread safety: every method may be called from any thread at once.
// Pushes of different workers are decoded and added in parallel (one lock
// per chunk); the shard's state is behind one mutex held only briefly.
#ifndef TERN_SERVER_AGGREGATOR_H_
#define TERN_SERVER_AGGREGATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "common/refusal_log.h"
#include "core/admission.h"
#include "core/barrier.h"
#include "core/deferred.h"
#include "core/limits.h"
#include "core/straggler_watch.h"
#include "kernels/codec.h"
#include "kernels/codec_options.h"
#include "kernels/codec_registry.h"
#include "server/messages.h"
#include "server/push_pull.h"
#include "server/scaler_barrier.h"
#include "server/shard_run.h"
#include "server/shard_state.h"
#include "server/worker_loss.h"

namespace tern::server {

struct AggregatorOptions {
  uint32_t shard_index = 0;
  uint32_t num_shards = 1;
  uint32_t num_workers = 1;
  // How long a pending barrier call (Join, ShareScalers, PushPull) waits
  // for the last worker before it is answered DEADLINE_EXCEEDED (the core's
  // expiry rule, core/barrier.h).
  absl::Duration barrier_timeout = absl::Seconds(50);
  // How long after its creation the shard waits for all N workers to join;
  // ExpireWaits reports it.
  absl::Duration join_timeout = absl::Seconds(300);
  // The shard's gRPC message limit: Join refuses a model whose share on
  // this shard would not fit in fp32 (the widest encoding).
  uint64_t max_message_bytes = 64ull << 20;
  // `tern ps --run_id`: a Join naming another run is refused before it
  // can configure anything; empty: the first joiner names the run.
  std::string run_id;
  // --straggler_warn_s: once a barrier (scalers or pushes) has waited this
  // long since its first arrival, the workers it still waits for are
  // logged by name, once per step, before any timeout fires; zero: never.
  absl::Duration straggler_warn = absl::Seconds(10);
  // `tern ps --state_dir`: the file of this shard's state
  // (server/shard_state.h), written before answers are released and read
  // back by Create, which resumes the run it holds; empty: no state.
  std::string state_path;
  // fsync each state write (--state_sync).
  bool state_sync = false;
  // --on_worker_loss and --worker_loss_timeout_s (server/worker_loss.h):
  // what happens once a barrier of the open step has waited
  // worker_loss_timeout since its first arrival for a worker; zero: the
  // barrier timeout; InfiniteDuration: never (waits expire by the barrier
  // rule alone, as in the tests of that rule).
  WorkerLossPolicy on_worker_loss = WorkerLossPolicy::kStop;
  absl::Duration worker_loss_timeout = absl::ZeroDuration();
  // --catch_up_mb: the answers of the latest completed steps are kept up
  // to this many bytes (at least the last one), so that a worker coming
  // back from an older checkpoint (a restart, or a dropped worker let in
  // again) catches up on them; see server/README.md, "Lost workers".
  uint64_t catch_up_bytes = 128ull << 20;
  // Where "now" comes from for the deadlines of pending calls; tests pass
  // a fake clock.
  std::function<absl::Time()> clock = [] { return absl::Now(); };
  // Builds the run's codec from the first join's options
  // (RunCodecOptions); tests pass codecs of their own. fp32 chunks always
  // use kernels' fp32 codec.
  std::function<absl::StatusOr<std::unique_ptr<kernels::Codec>>(
      const kernels::CodecOptions&)>
      make_codec = kernels::MakeCodec;
};

template <typename T>
using Callback = core::Callback<T>;

// The message-size bound (core/limits.h), under the name the LPS and the
// tests know.
using core::Fp32MessageBytes;

class Aggregator {
 public:
  // INVALID_ARGUMENT for options that cannot work (no workers, shard_index
  // not below num_shards, a timeout that is not positive); with a
  // state_path whose file exists, ReadShardState's errors, or the error of
  // a run it cannot rebuild.
  static absl::StatusOr<std::unique_ptr<Aggregator>> Create(
      AggregatorOptions options, Logger logger);

  Aggregator(const Aggregator&) = delete;
  Aggregator& operator=(const Aggregator&) = delete;
  ~Aggregator();

  // The first successful join fixes the run config, the ParamSpec, its hash
  // and the initial parameter checksum, and builds the shard's chunks and
  // codecs; a later join must match them (FAILED_PRECONDITION naming both
  // values). INVALID_ARGUMENT when the request does not fit this shard's
  // options. Answered once all N workers have joined.
  void Join(const JoinRequest& request, Callback<JoinReply> done);

  // Scaler sharing of one step: `request` holds one finite scaler >= 0 for
  // each TernGrad chunk of the shard (none when it has none). Answered with
  // s_k = max_i s_ik once all N workers have sent theirs.
  void ShareScalers(const ScalerRequest& request, Callback<ScalerAnswer> done);

  // One worker's push of every chunk of the shard for one step. Nothing is
  // added unless every chunk is valid. Answered with the aggregates once all
  // N workers have pushed. Nothing of `request` is kept once this returns
  // (DESIGN section 7: memory stays bounded): an admitted push is added
  // into the chunks' sums before, and a duplicate of a counted push waits
  // for the step's answer with its callback alone. At most
  // core::kMaxWaitsPerMember calls of one worker wait for a step (a Join
  // or ShareScalers alike); one more is RESOURCE_EXHAUSTED at once.
  void PushPull(const PushRequest& request, Callback<PushAnswer> done);

  // Compares `checksum` with the first one reported for `step`; a mismatch
  // marks the run failed (every later call, of any worker, gets that
  // FAILED_PRECONDITION naming the step and both checksums).
  absl::Status CheckParams(uint32_t worker_id, uint64_t step,
                           uint64_t checksum);

  // Answers DEADLINE_EXCEEDED to every pending call whose deadline is at or
  // before `now`, naming the step and the workers that did not arrive. The
  // step stays open: a late worker still completes it, and a worker that
  // retries gets the answer. Returns DEADLINE_EXCEEDED once `now` is past
  // the join timeout while some worker has never joined.
  absl::Status ExpireWaits(absl::Time now);

  // Answers every pending call with `status` and every later call too
  // (graceful shutdown: UNAVAILABLE, which workers treat as transient).
  void Close(absl::Status status);

  // What the open step waits for, as the shard's straggler warning names
  // it (tern.v1.WaitingResponse): the workers that have not shared their
  // scalers, or else those that have not pushed, once a first worker has;
  // empty `waiting_for` when nobody is awaited.
  struct Waiting {
    uint64_t step = 0;
    std::string waiting_for;
    absl::Duration waited;
  };
  Waiting WaitingFor() const;

  // The open step: the one the shard waits for pushes of.
  uint64_t step() const;
  bool all_joined() const;
  // Workers that have joined (N once all have).
  uint32_t joined_workers() const;
  // PushPull calls waiting for the open step's answer, duplicates included.
  size_t waiting_pushes() const;
  // OK, or why the run failed (replicas diverged, a codec broke).
  absl::Status run_status() const;

 private:
  Aggregator(AggregatorOptions options, Logger logger);

  ShardLimits Limits() const;
  // The deadline of a call arriving now.
  absl::Time Deadline() const {
    return core::WaitDeadline(options_.clock(), options_.barrier_timeout);
  }
  // Logs a refused call's line at a bounded rate (common/refusal_log.h),
  // counted under the worker it names and `call` with the status code.
  template <typename... Args>
  void LogRefusal(uint32_t worker, absl::string_view call,
                  const absl::Status& status,
                  spdlog::format_string_t<Args...> format, Args&&... args) {
    refusals_.Warn(MemberKey("worker", worker, options_.num_workers),
                   RefusalReason(call, status), format,
                   std::forward<Args>(args)...);
  }
  // The error for calls of `worker` while the shard cannot serve them
  // (closed, failed, not configured, unknown or not joined worker).
  absl::Status CheckWorker(uint32_t worker) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fixes the run from the first joiner, or compares a later one with it.
  absl::Status AdmitJoin(const JoinRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // broadcast_start (aggregator_start.cc): keeps worker 0's initial weights
  // of this shard's chunks from its join; INVALID_ARGUMENT for weights that
  // are not exactly those chunks in fp32 RAW with values within the
  // magnitude rule, for none from worker 0, or for any from another worker
  // or without broadcast_start.
  absl::Status TakeStartWeights(const JoinRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The answer to `worker`'s join: with worker 0's weights under
  // broadcast_start.
  JoinReply JoinAnswer(uint32_t worker) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A dropped worker joined again (shrink): it is let in at the step after
  // the open one and catches up until then (aggregator_worker_loss.cc).
  void TakeBack(uint32_t worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // CompleteStep: lets in the returning workers whose step is the next one.
  void ReadmitReturning() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Keeps as many completed steps' answers as catch_up_bytes holds, by
  // the size of `answer`, the latest.
  void SizeAnswerCache(const PushReply& answer)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Phase 1 of PushPull: whether the push is admitted, and its chunks. A
  // null result with OK means `done` was taken (a cached answer or a
  // duplicate that waits).
  absl::StatusOr<std::unique_ptr<MatchedPush>> AdmitPush(
      const PushRequest& request, Callback<PushAnswer>& done,
      core::Deferred* deferred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Logs the workers the open step's barriers still wait for, once each
  // has waited straggler_warn (ExpireWaits calls it).
  void WarnStragglers(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies --on_worker_loss to the workers the open step's barrier has
  // waited worker_loss_timeout for (ExpireWaits calls it;
  // aggregator_worker_loss.cc).
  void HandleWorkerLoss(absl::Time now, core::Deferred* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // shrink: drops `lost` and lets the open step finish without them.
  void DropWorkers(const std::vector<uint32_t>& lost, bool sharing,
                   core::Deferred* deferred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Goes on from a state read back: the run, the open step, the answers
  // kept for retries, residuals and checks; every worker counts as joined.
  absl::Status Restore(const ShardSnapshot& snapshot,
                       const tern::v1::ShardState& raw)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes the state with `write` (a ShardStateWriter call) when the shard
  // keeps one; a failure is logged (the run goes on; a restart would then
  // resume from the state before).
  void SaveState(const std::function<absl::Status(ShardStateWriter&)>& write)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // All N pushed step_: finishes every chunk, answers the waiters, opens
  // step_ + 1.
  void CompleteStep(core::Deferred* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks the run failed and answers every waiter with `status`.
  void FailRun(absl::Status status, core::Deferred* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AnswerAll(const absl::Status& status, core::Deferred* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const AggregatorOptions options_;
  const Logger logger_;
  const absl::Time created_;
  const core::StepNames names_;
  // Thread-safe on its own; not guarded by mu_.
  RefusalLog refusals_;

  mutable absl::Mutex mu_;
  // Not OK after Close: every call gets it.
  absl::Status closed_ ABSL_GUARDED_BY(mu_);
  // Not OK once the run failed: every call gets it.
  absl::Status failed_ ABSL_GUARDED_BY(mu_);

  // Fixed by the first successful join; null before.
  std::unique_ptr<ShardRun> run_ ABSL_GUARDED_BY(mu_);

  core::ArrivalSet joined_ ABSL_GUARDED_BY(mu_);
  bool all_joined_ ABSL_GUARDED_BY(mu_) = false;
  core::WaiterList<JoinReply> join_waiters_ ABSL_GUARDED_BY(mu_);
  // broadcast_start: worker 0's initial weights of this shard's chunks and
  // its parameters' checksum, kept for the run (a shard's part in fp32, as
  // a pull); null until worker 0 joined.
  std::shared_ptr<const std::vector<ChunkPayload>> start_weights_
      ABSL_GUARDED_BY(mu_);
  uint64_t start_checksum_ ABSL_GUARDED_BY(mu_) = 0;

  uint64_t step_ ABSL_GUARDED_BY(mu_) = 0;
  ScalerBarrier scalers_ ABSL_GUARDED_BY(mu_);
  PushBarrier pushes_ ABSL_GUARDED_BY(mu_);

  // CheckParams: step -> (first worker, its checksum), the latest few steps.
  StepChecks checks_ ABSL_GUARDED_BY(mu_);

  // The open step's barriers, for stragglers (core/straggler_watch.h).
  core::StragglerWatch share_watch_ ABSL_GUARDED_BY(mu_);
  core::StragglerWatch push_watch_ ABSL_GUARDED_BY(mu_);

  // The workers still in the run (--on_worker_loss=shrink drops some).
  ActiveWorkers active_ ABSL_GUARDED_BY(mu_);

  // --state_dir; null without.
  std::unique_ptr<ShardStateWriter> state_ ABSL_GUARDED_BY(mu_);
  // The step whose shared scalers the state holds.
  uint64_t scalers_saved_for_ ABSL_GUARDED_BY(mu_) = UINT64_MAX;
};

}  // namespace tern::server

#endif  // TERN_SERVER_AGGREGATOR_H_
