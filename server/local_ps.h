// A WeightGrad local parameter server (LPS) as the workers and the global
// server see it (DESIGN section 4; server/WEIGHTGRAD.md): joins, pushes of
// ternary (or fp32) gradients answered with the current weights, holds,
// and the rounds for the synchronizer client (server/gs_link.h), over an
// LpsState and its GradientSynchronizer. A plain class: no protobuf, no
// gRPC (server/lps_service.h adapts it to tern.v1.ParameterServer).
//
// Per push of worker i for step t: every chunk is decoded and applied at
// once (Algorithm 4), then the push is answered with W in the weight codec,
// unless the answer must wait:
//   - lead: a worker may be one step ahead of the open local step; its
//     answer to a step beyond the open one waits until that step is open
//     (so its next push is never refused);
//   - the global server (GS) is silent: a round has waited sync_timeout for
//     its answer (GradientSynchronizer::MustHold); every answer waits for
//     the GS (bounded divergence);
//   - the run's last step: its answers wait for the final synchronization,
//     so that every worker leaves with the weights every data center ends
//     with, and its answer carries their checksum.
// A held answer waits at most hold_limit; then the push fails UNAVAILABLE
// naming the GS (a GS hold) or DEADLINE_EXCEEDED naming the workers that
// did not push (a lead).
//
// Rounds: when local step s completes and s is a multiple of sync_every
// below the run's steps, round BuildRound is built right there, under the
// lock, so that every data center builds the same rounds at the same local
// steps; the client thread takes them (NextRound), sends them one at a
// time and applies each answer (ApplyRoundAnswer). At the last step the
// final round (BuildFinalRound) follows once every earlier round is
// answered. Without a GS (single data center) there are no rounds.
//
// Mechanics from the server core (core/README.md): answers run through a
// core::Deferred, never with the lock held; the join barrier is a
// core::ArrivalSet with a core::WaiterList under the one expiry rule (a
// join waits at most hold_limit, the barrier timeout; join_timeout bounds
// the join phase, server/WEIGHTGRAD.md); the join config is compared by
// core::JoinComparison, shapes and message sizes by core/limits.h, pushes
// by core::ValidatePayload and core::DecodeFinite.
//
// The code is split by purpose: local_ps.cc (creation, expiry, shutdown),
// local_ps_join.cc (the join barrier and the run config it fixes),
// local_ps_answer.cc (pushes and the answer policy: when an answer may go,
// and what it carries), local_ps_rounds.cc (the round queue for the
// synchronizer client).
//
// Thread safety: every method may be called from any thread at once; one
// mutex guards everything (the LPS applies gradients one at a time).
#ifndef TERN_SERVER_LOCAL_PS_H_
#define TERN_SERVER_LOCAL_PS_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "common/lr_schedule.h"
#include "common/refusal_log.h"
#include "core/barrier.h"
#include "core/deferred.h"
#include "kernels/codec.h"
#include "server/gradient_synchronizer.h"
#include "server/lps_metrics.h"
#include "server/lps_state.h"
#include "server/lps_state_file.h"
#include "server/lps_state_writer.h"
#include "server/messages.h"

namespace tern::server {

// The `worker` field of the stream the LPS ternarizes worker i's weights
// with at step t: (seed, t, chunk, kWeightStreamBit | i). The bit keeps
// the draws apart from the worker's own gradient draws (seed, t, chunk, i).
inline constexpr uint32_t kWeightStreamBit = 0x80000000u;

// The run's LR schedule (OptimizerConfig); INVALID_ARGUMENT for one that
// cannot work.
absl::StatusOr<LrSchedule> RunSchedule(const RunConfig& config);

struct LocalPsOptions {
  RunMode mode = RunMode::kWeightGrad;
  uint32_t num_workers = 1;
  // `tern ps --run_id`: a Join naming another run is refused before it can
  // configure anything; empty: the first joiner names the run.
  std::string run_id;
  // The weight codec: kTernGrad, kInt8 or kFp32.
  kernels::CodecId weight_codec = kernels::CodecId::kTernGrad;
  // Whether a GS takes part (--global); without it there are no rounds.
  bool global = false;
  // What error messages call the GS ("the global server at host:port").
  std::string global_name = "the global server";
  uint64_t sync_every = 10;
  // --g_thresh; unset: the dynamic threshold.
  std::optional<double> g_thresh;
  // --steps_per_epoch: local steps between rescales of the dynamic
  // threshold. 0: the workers' join says (OptimizerConfig.steps_per_epoch,
  // their data set over slices x batch); 0 there too: never rescaled.
  uint64_t steps_per_epoch = 0;
  absl::Duration sync_timeout = absl::Seconds(60);
  // The barrier timeout (--barrier_timeout_s): how long a held answer
  // waits, and how long one Join call waits for the others (the core's
  // expiry rule; the worker retries a join that expired).
  absl::Duration hold_limit = absl::Seconds(50);
  // How long the LPS waits, from its creation, for all workers to join
  // (core::JoinPhaseExpired); not the wait of any one call.
  absl::Duration join_timeout = absl::Seconds(300);
  uint64_t max_message_bytes = 64ull << 20;
  std::function<absl::Time()> clock = [] { return absl::Now(); };
  // --state_dir: the file the LPS keeps its state in and resumes from when
  // it exists (server/lps_state_file.h); empty: none, and a killed LPS ends
  // its data center's run.
  std::string state_path;
  // --checkpoint_every: the state is written with a round built at least
  // this many local steps after the last write (0: with every round);
  // without a GS, every this many steps (0: every step); and at the end.
  uint64_t checkpoint_every = 0;
  // --state_sync: fsync each state write.
  bool state_sync = false;
  // Counts rounds, chunk decisions and holds (borrowed; must outlive the
  // LocalPs); null: not counted.
  LpsMetrics* metrics = nullptr;
};

// What the LPS registers with the GS, known once worker 0 has joined.
struct GsRegistration {
  uint64_t param_spec_hash = 0;
  uint64_t param_checksum = 0;
  std::vector<uint64_t> chunk_elements;  // by chunk key
  kernels::CodecId update_codec = kernels::CodecId::kTernGrad;
  kernels::Layout update_layout = kernels::Layout::kTernary2Bit;
};

// The GS's answer to one round, as the client thread read it.
struct GsAnswer {
  uint64_t round = 0;
  std::vector<ChunkPayload> average;
  std::vector<uint32_t> lagging;
};

class LocalPs {
 public:
  // INVALID_ARGUMENT for options that cannot work (no workers, the
  // terngrad mode, a weight codec other than ternary/int8/fp32, a
  // non-positive timeout or sync_every 0).
  static absl::StatusOr<std::unique_ptr<LocalPs>> Create(LocalPsOptions options,
                                                         Logger logger);

  LocalPs(const LocalPs&) = delete;
  LocalPs& operator=(const LocalPs&) = delete;
  ~LocalPs();

  // The first join fixes the run config, the ParamSpec and the initial
  // checksum; later joins must match them (FAILED_PRECONDITION naming the
  // field and both values). Worker 0's join carries the initial weights,
  // which must match its checksum. INVALID_ARGUMENT for a join of another
  // mode, more than one shard, or options that do not fit. Answered once
  // all N workers have joined.
  void Join(const JoinRequest& request, core::Callback<JoinReply> done);

  // Applies one worker's gradient of every chunk (nothing unless all are
  // valid); answered with the weights, at once or once a hold ends. At most
  // core::kMaxWaitsPerMember calls of one worker wait for one step's
  // answer (a Join's alike); one more is RESOURCE_EXHAUSTED at once.
  void PushPull(const PushRequest& request, core::Callback<PushAnswer> done);

  // Answers held pushes whose hold is over or whose limit passed, and
  // returns DEADLINE_EXCEEDED once the join timeout passed with workers
  // missing. Call it often (the process does every 100 ms).
  absl::Status ExpireWaits(absl::Time now);

  // Answers every pending and later call with `status`.
  void Close(absl::Status status);
  // Marks the run failed (the GS is lost): every pending and later call
  // gets `status`, and NextRound returns it.
  void Fail(absl::Status status);

  // --- for the synchronizer client thread ---

  // Waits up to `timeout` for worker 0's join; nullopt when it has not
  // come yet. The status of a closed or failed LPS.
  absl::StatusOr<std::optional<GsRegistration>> WaitForRegistration(
      absl::Duration timeout);
  // The GS's next_round at Register: 0 on a fresh start; after a resume,
  // at least the oldest unanswered round (the GS answers the rounds it has
  // counted from its kept answers). Another is FAILED_PRECONDITION.
  absl::Status CheckFirstRound(uint64_t next_round) const;
  // The next round to send, waiting up to `timeout` (nullopt: none yet).
  // CANCELLED once the final round is answered; the status of a closed or
  // failed LPS.
  absl::StatusOr<std::optional<SyncRound>> NextRound(absl::Duration timeout);
  // Applies the answer to the round NextRound gave last, logs the round's
  // line and releases held answers. `sent` is that round.
  absl::Status ApplyRoundAnswer(const SyncRound& sent, const GsAnswer& answer,
                                absl::Duration took);

  // Waits until every state handed to the state file's writer is written
  // (--state_dir; writes run on a thread of their own).
  void FlushState() {
    if (writer_ != nullptr) writer_->Flush();
  }

  // Local steps completed; whether the final synchronization (or, without
  // a GS, the last step) is done; the checksum of W.
  uint64_t completed_steps() const;
  // Workers that have joined (N once all have).
  uint32_t joined_workers() const;
  bool finished() const;
  uint64_t checksum() const;
  // Every rescale of the dynamic threshold so far, in order (each is also
  // logged, and the round's threshold goes to the metrics).
  std::vector<ThresholdRescale> threshold_rescales() const {
    absl::MutexLock lock(&mu_);
    return rescales_;
  }
  // Payload bytes of the updates sent to the GS and of its answers, so far.
  uint64_t wan_bytes_up() const {
    absl::MutexLock lock(&mu_);
    return bytes_up_;
  }
  uint64_t wan_bytes_down() const {
    absl::MutexLock lock(&mu_);
    return bytes_down_;
  }

 private:
  struct PushWaiter {
    uint32_t worker = 0;
    uint64_t step = 0;
    bool fp32_weights = false;
    absl::Time deadline;
    core::Callback<PushAnswer> done;
  };
  enum class Final { kTraining, kDue, kSent, kDone };
  using Deferred = core::Deferred;

  // How many steps a worker may run ahead of the open local step.
  static constexpr uint64_t kMaxLead = 1;
  // "1.5s".
  static std::string Seconds(absl::Duration duration);

  LocalPs(LocalPsOptions options, Logger logger);

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
  // How many push calls of `worker` for `step` wait for their answer.
  size_t WaitingPushes(uint32_t worker, uint64_t step) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Status CheckJoin(const JoinRequest& request) const;
  absl::Status Configure(const JoinRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CompareWithFirst(const JoinRequest& request) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Builds the LpsState and synchronizer from worker 0's weights.
  absl::Status StartState(const JoinRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The options of the LpsState and of its synchronizer, from the flags and
  // the run config.
  LpsStateOptions StateOptions() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  SynchronizerOptions SyncOptions() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- recovery (local_ps_recovery.cc) ---
  // Resumes from options_.state_path when the file exists (Create).
  absl::Status ResumeIfSaved();
  absl::Status Resume(LpsSnapshot snapshot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands the state to the writer when checkpoint_every steps have passed
  // since the last write (called when a round was just built; without a
  // GS, when a step completed), or `at_end` of the run. A failed write is
  // logged, and the run goes on.
  void SaveStateIfDue(bool at_end = false) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  LpsSnapshot Snapshot() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A worker's join to a resumed LPS: answered at once, with the step it
  // pushes next and the current weights in fp32.
  absl::StatusOr<JoinReply> RejoinAnswer(uint32_t worker) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckWorker(uint32_t worker) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Decodes and applies every chunk of `request`; true when it was a
  // retry (applied already).
  absl::StatusOr<bool> Apply(const PushRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a local step completed: the round or the final state it calls for.
  absl::Status OnStepCompleted() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the answer to `step` may go now.
  bool CanAnswer(uint64_t step, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Worker `worker`'s answer to `step`: W in the weight codec, or in fp32
  // when `fp32_weights` or at the run's last step.
  absl::StatusOr<PushAnswer> Answer(uint32_t worker, uint64_t step,
                                    bool fp32_weights) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The answer to every waiting Join, once all workers have joined.
  JoinReply JoinAnswer() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Expires the Join calls past their deadline (the core's rule).
  void ExpireJoins(absl::Time now, Deferred* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers the waiters that may go, and fails those past their deadline.
  void Release(absl::Time now, Deferred* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AnswerAll(const absl::Status& status, Deferred* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const LocalPsOptions options_;
  const Logger logger_;
  const absl::Time created_;
  // Thread-safe on its own; not guarded by mu_.
  RefusalLog refusals_;
  // --state_dir's writer (set at creation, thread-safe on its own); null
  // without one.
  std::unique_ptr<LpsStateWriter> writer_;

  mutable absl::Mutex mu_;
  absl::Status closed_ ABSL_GUARDED_BY(mu_);
  absl::Status failed_ ABSL_GUARDED_BY(mu_);

  bool configured_ ABSL_GUARDED_BY(mu_) = false;
  uint32_t first_worker_ ABSL_GUARDED_BY(mu_) = 0;
  RunConfig config_ ABSL_GUARDED_BY(mu_);
  std::vector<TensorSpec> tensors_ ABSL_GUARDED_BY(mu_);
  uint64_t spec_hash_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t initial_checksum_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<uint64_t> chunk_elements_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> fp32_chunk_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<kernels::Codec> gradient_codec_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<kernels::Codec> fp32_codec_ ABSL_GUARDED_BY(mu_);

  std::unique_ptr<LpsState> state_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<GradientSynchronizer> sync_ ABSL_GUARDED_BY(mu_);

  core::ArrivalSet joined_ ABSL_GUARDED_BY(mu_);
  core::WaiterList<JoinReply> join_waiters_ ABSL_GUARDED_BY(mu_);
  // At most core::kMaxWaitsPerMember of one worker and step.
  std::vector<PushWaiter> push_waiters_ ABSL_GUARDED_BY(mu_);

  // Rounds built and not yet taken by the client thread, in order.
  std::deque<SyncRound> to_send_ ABSL_GUARDED_BY(mu_);
  // Rounds built and not yet answered, oldest first: the state file keeps
  // them, and a resumed LPS sends them again.
  std::deque<SyncRound> unanswered_ ABSL_GUARDED_BY(mu_);
  // The local step the LPS resumed at from its state file; unset on a fresh
  // start. A resumed LPS answers each worker's join at once, and refuses
  // the pushes of a worker that has not rejoined (OUT_OF_RANGE).
  std::optional<uint64_t> resumed_at_ ABSL_GUARDED_BY(mu_);
  // Completed local steps at the last state write.
  uint64_t saved_step_ ABSL_GUARDED_BY(mu_) = 0;
  Final final_ ABSL_GUARDED_BY(mu_) = Final::kTraining;
  uint64_t final_round_ ABSL_GUARDED_BY(mu_) = 0;
  // Whether a hold for the GS is on (logged once when it begins and ends).
  bool holding_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<ThresholdRescale> rescales_ ABSL_GUARDED_BY(mu_);
  uint64_t bytes_up_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t bytes_down_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tern::server

#endif  // TERN_SERVER_LOCAL_PS_H_
