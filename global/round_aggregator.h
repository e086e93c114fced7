// The WeightGrad global server's rounds (DESIGN section 4; Akter & Adnan
// 2020, section 3.4 and Algorithm 3, "Global Server") with the failure
// semantics of section 7, as a plain class: no protobuf, no gRPC
// (global/gs_service.h adapts it to the wire). global/README.md states the
// protocol and every decision the design leaves open.
//
// K data centers' local parameter servers (LPSs) register, then send their
// significant updates round by round. Round r collects the data centers'
// updates until all K have sent r or T_global has passed since the round's
// first update arrived; then it closes: A_r = (1/K) * sum_d U_d per element
// (a chunk a data center did not send counts as 0), encoded per chunk with
// the updates' codec, and every waiting call of round r is answered with
// A_r and the data centers that missed r ("lagging").
//
// A lagging data center catches up: its request for a closed round r is
// answered at once with the stored A_r, and its updates are added to the
// round open now ("they join the round in which they arrive"). While a data
// center lags more than max_lag rounds behind the open round, the open
// round does not close (bounded staleness): the answers to the others are
// held, each call at most hold_timeout, after which it is answered
// UNAVAILABLE naming the lagging data centers (the LPS retries).
//
// Callbacks: SyncRound calls its `done` exactly once, either before it
// returns (an error, a stored answer, or the call closed the round) or
// later from the thread that closes the round, from Tick or from Close.
// `done` is never called with the aggregator's lock held, so it may call
// back into the aggregator.
//
// Thread safety: every method may be called from any thread at once.
// Updates are validated and decoded without the lock, in parallel; the
// state is behind one mutex. Closing a round sums and encodes the average
// under that mutex: rounds are seconds apart and K is small, so the
// simplicity is worth the short stall.
#ifndef TERN_GLOBAL_ROUND_AGGREGATOR_H_
#define TERN_GLOBAL_ROUND_AGGREGATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "common/refusal_log.h"
#include "core/admission.h"
#include "core/barrier.h"
#include "core/deferred.h"
#include "global/gs_state.h"
#include "global/messages.h"
#include "global/update_encoding.h"
#include "kernels/codec.h"
#include "kernels/payload.h"

namespace tern::global {

// The `worker` of the RandomStream the GS encodes its answers with
// (seed, round, chunk, kGlobalStreamWorker): no worker, shard (0xFFFFFFFF)
// or LPS synchronizer (0xFFFFFFFE) uses it, so the draws never repeat
// theirs, and every LPS gets the same bytes.
inline constexpr uint32_t kGlobalStreamWorker = 0xFFFFFFFDu;

// The most updates the GS adds into one element of a round's sum: each
// data center's own round and the late rounds that join it, at most
// K * (max_lag + 2) (a data center lags at most max_lag + 1 rounds when a
// round opens). Create refuses options beyond it, so that values within
// the magnitude rule (|x| <= core::kMaxMagnitude = 1e30, checked as each
// update arrives) sum to at most 1e38 < FLT_MAX: no round can overflow.
inline constexpr uint64_t kMaxRoundSummands = 100'000'000;

struct RoundAggregatorOptions {
  // K.
  uint32_t num_datacenters = 1;
  // The run seed of the answers' stochastic rounding.
  uint64_t seed = 0;
  // How long a round waits for the last data centers after its first
  // update arrived (T_global).
  absl::Duration t_global = absl::Seconds(10);
  // How many rounds a data center may lag behind the open round before
  // the open round is held.
  uint32_t max_lag = 2;
  // How long a held call waits before it is answered UNAVAILABLE.
  absl::Duration hold_timeout = absl::Seconds(30);
  // The GS's gRPC message limit: Register refuses a model whose answer
  // could exceed it (every chunk in its widest encoding).
  uint64_t max_message_bytes = 64ull << 20;
  // Where "now" comes from; tests pass a fake clock.
  std::function<absl::Time()> clock = [] { return absl::Now(); };
  // Called, under the aggregator's lock, as each round closes with the
  // time since its first update arrived (the metrics' round latency);
  // must not call back into the aggregator. Empty: nothing is called.
  std::function<void(absl::Duration)> round_closed;
  // The state file (global/gs_state.h): read at Create when it exists, so
  // a restarted GS goes on from it, and rewritten before each answer it
  // holds is released. Empty: no state is kept.
  std::string state_path;
  // Flush each state write to disk (survives a machine crash).
  bool state_sync = true;
};

// Counters since the start, for logs and metrics.
struct RoundStats {
  uint64_t rounds_closed = 0;
  // Updates that arrived for a closed round and joined the open one.
  uint64_t late_submissions = 0;
  // Retries of a (data center, round) already counted.
  uint64_t duplicates = 0;
  // Requests refused (INVALID_ARGUMENT, FAILED_PRECONDITION, ...).
  uint64_t refused = 0;
  // Times the open round was held for a data center beyond max_lag, and
  // calls answered UNAVAILABLE because a hold outlasted hold_timeout.
  uint64_t holds = 0;
  uint64_t hold_timeouts = 0;
  // Payload bytes of the updates accepted and of the answers built (one
  // copy per closed round).
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
};

using RoundAnswerPtr = std::shared_ptr<const RoundAnswer>;
using SyncCallback = core::Callback<RoundAnswerPtr>;

// How many closed rounds' answers the GS keeps: max_lag + 1 for a data
// center catching up (it lags at most that many rounds), and as many again
// for an LPS resumed from a state written with max_lag + 1 rounds
// unanswered that had sent up to max_lag + 1 more before it was killed
// (server/WEIGHTGRAD.md, "Recovery": --checkpoint_every is at most
// (max_lag + 1) * sync_every).
inline size_t KeptRounds(uint32_t max_lag) {
  return 2 * (static_cast<size_t>(max_lag) + 1);
}

class RoundAggregator {
 public:
  // INVALID_ARGUMENT for options that cannot work (no data centers, a
  // timeout that is not positive, no clock, K * (max_lag + 2) beyond
  // kMaxRoundSummands). With a state file: DATA_LOSS for one that is
  // damaged, FAILED_PRECONDITION for one written with another
  // --num_datacenters or --seed, or whose model no longer fits.
  static absl::StatusOr<std::unique_ptr<RoundAggregator>> Create(
      RoundAggregatorOptions options, Logger logger);

  RoundAggregator(const RoundAggregator&) = delete;
  RoundAggregator& operator=(const RoundAggregator&) = delete;
  ~RoundAggregator();

  // The first successful registration fixes the model (spec hash, initial
  // checksum, chunk element counts) and the update encoding (codec,
  // layout, fp32 chunks); every later one, of any data center, must match
  // them: FAILED_PRECONDITION naming both values and both data centers.
  // INVALID_ARGUMENT when the request does not fit this GS (datacenter not
  // below --num_datacenters, another K, an encoding the GS cannot average,
  // a model whose answer would not fit --max_message_mb). Registering again
  // is a rejoin: idempotent, answered with the data center's next round.
  absl::StatusOr<RegisterReply> Register(const RegisterRequest& request);

  // One data center's updates for one round. Answered with the round's
  // average once it closes; at once with the stored answer for a round
  // already closed (a late or a retried request); FAILED_PRECONDITION for a
  // round beyond the open one, a round out of order, or one no longer
  // kept; INVALID_ARGUMENT naming the data center, round and chunk for an
  // update that is not valid, including one beyond the magnitude rule
  // (core/payload_validation.h): checked before anything of the request is
  // added, so only its sender is refused and the round goes on.
  void SyncRound(const SyncRequest& request, SyncCallback done);

  // Closes the open round once T_global has passed (unless a data center
  // lags too far: then the round is held), answers UNAVAILABLE to held
  // calls whose hold lasted hold_timeout, and logs the summaries of the
  // refusals left out of the log (common/refusal_log.h). Call it often
  // (`tern global` does every 100 ms).
  void Tick(absl::Time now);

  // Answers every pending call with `status`, and every later call too
  // (graceful shutdown: UNAVAILABLE, which LPSs treat as transient).
  void Close(absl::Status status);

  // The round the GS collects now.
  uint64_t open_round() const;
  // By data center: rounds behind the open round (0 for one that sends
  // the open round next, or has not registered).
  std::vector<uint64_t> lags() const;
  bool holding() const;
  RoundStats stats() const;
  // OK, or why the run failed (a codec broke; an average overflowing is a
  // backstop the magnitude rule keeps out of reach).
  absl::Status run_status() const;

 private:
  RoundAggregator(RoundAggregatorOptions options, Logger logger);

  // Logs a refused call's line at a bounded rate (common/refusal_log.h),
  // counted under the data center it names and `call` with the status code.
  template <typename... Args>
  void LogRefusal(uint32_t datacenter, absl::string_view call,
                  const absl::Status& status,
                  spdlog::format_string_t<Args...> format, Args&&... args) {
    refusals_.Warn(
        MemberKey("data center", datacenter, options_.num_datacenters),
        RefusalReason(call, status), format, std::forward<Args>(args)...);
  }

  // --- registration (round_registration.cc) ---
  // What fits this GS at all, whoever registered first.
  absl::Status CheckRegisterOptions(const RegisterRequest& request) const;
  // The first registration: fixes the model and the encoding.
  absl::Status Configure(const RegisterRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A later one against the first (core::JoinComparison).
  absl::Status CompareWithFirst(const RegisterRequest& request) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- collection (round_collection.cc) ---
  // Under the lock, before decoding: true when the request is admitted
  // (`specs` holds its chunks, and the data center is marked decoding);
  // false when `done` was taken (answered through `deferred`, or waiting
  // as a retry of the open round).
  bool Admit(const SyncRequest& request, SyncCallback& done,
             std::vector<const ChunkSpec*>* specs, core::Deferred* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Closed, failed, unknown or unregistered data center.
  absl::Status CheckSender(uint32_t datacenter) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Each update's chunk: a chunk of the model, at most once per request.
  absl::Status ResolveChunks(const SyncRequest& request,
                             std::vector<const ChunkSpec*>* specs) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After decoding: adds the updates to the open round and answers or
  // queues `done`.
  void Add(const SyncRequest& request, absl::StatusOr<DecodedUpdates> decoded,
           SyncCallback done, core::Deferred* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Accumulate(uint32_t datacenter, uint64_t round, DecodedUpdates decoded)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Refuse(const SyncRequest& request, absl::Status status,
              SyncCallback done, core::Deferred* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- closing rounds and holds (round_closing.cc) ---
  // Closes the open round when all K sent it, or when T_global has passed
  // and no data center lags beyond max_lag (else starts a hold).
  void MaybeClose(absl::Time now, core::Deferred* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CloseRound(absl::Time now, core::Deferred* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // sum_d U_d by chunk key, in data-center order; empties the sums.
  std::map<uint32_t, std::vector<float>> TakeRoundSum()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Divides `total` by K and encodes each chunk into `answer`; INTERNAL
  // for an average that overflowed (not reachable while every update obeys
  // the magnitude rule and Create's kMaxRoundSummands: a backstop) or
  // could not be encoded.
  absl::Status EncodeAnswer(std::map<uint32_t, std::vector<float>> total,
                            RoundAnswer* answer, uint64_t* bytes_out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The encoded average of one chunk.
  absl::StatusOr<kernels::Payload> EncodeAverage(
      uint32_t key, const ChunkSpec& spec, std::vector<float> average) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LogClosed(absl::Time now, const RoundAnswer& answer,
                 uint64_t bytes_out) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Data centers more than max_lag rounds behind the open round.
  std::vector<uint32_t> TooFarBehind() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // "data center 2 (at round 5)" for each of `datacenters`.
  std::string DescribeLag(const std::vector<uint32_t>& datacenters) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers UNAVAILABLE the calls whose hold lasted hold_timeout.
  void ExpireHolds(absl::Time now, core::Deferred* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- the state file (round_state.cc) ---
  // Goes on from the state read back: the registrations, the open round
  // and its sums, the kept answers.
  absl::Status Restore(const GsSnapshot& snapshot)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The chunks of the restored sums against the model.
  absl::Status CheckRestoredSums(const GsSnapshot& snapshot) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Rewrites the state file (when there is one) before the answers the
  // caller gives are released; a failed write is logged and the run goes
  // on (a restart would resume from an earlier state).
  void SaveState() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- failure and shutdown (round_aggregator.cc) ---
  void FailRun(absl::Status status, core::Deferred* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RoundAggregatorOptions options_;
  const Logger logger_;
  // Thread-safe on its own; not guarded by mu_.
  RefusalLog refusals_;

  mutable absl::Mutex mu_;
  absl::Status closed_ ABSL_GUARDED_BY(mu_);
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
  RoundStats stats_ ABSL_GUARDED_BY(mu_);

  // Fixed by the first registration.
  bool configured_ ABSL_GUARDED_BY(mu_) = false;
  uint32_t first_datacenter_ ABSL_GUARDED_BY(mu_) = 0;
  RegisterRequest config_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<kernels::Codec> update_codec_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<kernels::Codec> fp32_codec_ ABSL_GUARDED_BY(mu_);
  // By chunk key; never changed after Configure, so the addresses stay
  // valid while the aggregator lives (updates are decoded through them
  // without the lock).
  std::vector<ChunkSpec> chunks_ ABSL_GUARDED_BY(mu_);

  // By data center.
  std::vector<bool> registered_ ABSL_GUARDED_BY(mu_);
  // The round each data center sends next: one past its last accepted one.
  std::vector<uint64_t> next_round_ ABSL_GUARDED_BY(mu_);
  // A request of the data center is being decoded outside the lock (of
  // the open round or a late one: a data center's rounds are added in
  // order, so this outlives a round's close).
  std::vector<bool> decoding_ ABSL_GUARDED_BY(mu_);

  // The open round.
  uint64_t open_round_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<absl::Time> first_arrival_ ABSL_GUARDED_BY(mu_);
  // The data centers that sent the open round.
  core::ArrivalSet sent_ ABSL_GUARDED_BY(mu_);
  // By data center: the sum of its updates joined to the open round, by
  // chunk key (in key order). A data center's requests are added in round
  // order (rounds are accepted only in order), and the data centers are
  // summed in index order, so the average's bytes do not depend on the
  // arrival order.
  std::vector<std::map<uint32_t, std::vector<float>>> sums_
      ABSL_GUARDED_BY(mu_);
  std::vector<Contribution> contributions_ ABSL_GUARDED_BY(mu_);
  uint64_t round_bytes_in_ ABSL_GUARDED_BY(mu_) = 0;
  // Chunks of the open round some data center sent in fp32 RAW in place of
  // their codec: answered in fp32.
  absl::flat_hash_set<uint32_t> exact_chunks_ ABSL_GUARDED_BY(mu_);
  // The calls waiting for the open round, at most core::kMaxWaitsPerMember
  // of one data center (one more is RESOURCE_EXHAUSTED at once). A call's
  // deadline is its arrival
  // + hold_timeout, and it expires only while the round is held and the
  // hold itself is hold_timeout old: so each call waits hold_timeout from
  // the later of its arrival and the hold's start (ExpireHolds).
  core::WaiterList<RoundAnswerPtr> waiters_ ABSL_GUARDED_BY(mu_);
  // Set while the open round is held.
  std::optional<absl::Time> hold_began_ ABSL_GUARDED_BY(mu_);

  // The answers of the last KeptRounds(max_lag) closed rounds, by round.
  core::AnswerCache<RoundAnswerPtr> answers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tern::global

#endif  // TERN_GLOBAL_ROUND_AGGREGATOR_H_
