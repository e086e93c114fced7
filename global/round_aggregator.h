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
#include "global/messages.h"
#include "kernels/codec.h"

namespace tern::global {

// The `worker` of the RandomStream the GS encodes its answers with
// (seed, round, chunk, kGlobalStreamWorker): no worker, shard (0xFFFFFFFF)
// or LPS synchronizer (0xFFFFFFFE) uses it, so the draws never repeat
// theirs, and every LPS gets the same bytes.
inline constexpr uint32_t kGlobalStreamWorker = 0xFFFFFFFDu;

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
using SyncCallback = std::function<void(absl::StatusOr<RoundAnswerPtr>)>;

class RoundAggregator {
 public:
  // INVALID_ARGUMENT for options that cannot work (no data centers, a
  // timeout that is not positive, no clock).
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
  // update that is not valid (nothing of the request is added).
  void SyncRound(const SyncRequest& request, SyncCallback done);

  // Closes the open round once T_global has passed (unless a data center
  // lags too far: then the round is held), and answers UNAVAILABLE to held
  // calls whose hold lasted hold_timeout. Call it often (`tern global`
  // does every 100 ms).
  void Tick(absl::Time now);

  // Answers every pending call with `status`, and every later call too
  // (graceful shutdown: UNAVAILABLE, which LPSs treat as transient).
  void Close(absl::Status status);

  // The round the GS collects now.
  uint64_t open_round() const;
  bool holding() const;
  RoundStats stats() const;
  // OK, or why the run failed (an average overflowed, a codec broke).
  absl::Status run_status() const;

 private:
  // How one chunk's updates are read and its answer written. Fixed by the
  // first registration and never changed, so readers need no lock.
  struct ChunkSpec {
    uint64_t num_elements = 0;
    kernels::CodecId codec = kernels::CodecId::kUnspecified;
    kernels::Layout layout = kernels::Layout::kUnspecified;
    // Decodes the updates and encodes the answer; owned by the aggregator.
    const kernels::Codec* kernel = nullptr;
  };
  // A request's chunks, decoded.
  struct Decoded {
    std::vector<std::pair<uint32_t, std::vector<float>>> chunks;
    // Chunks sent in fp32 RAW although their codec is another (an LPS's
    // final synchronization): their average is answered in fp32.
    std::vector<uint32_t> exact;
    uint64_t bytes = 0;
  };
  struct Waiter {
    uint32_t datacenter = 0;
    // Set while the round is held: when this call's hold began.
    std::optional<absl::Time> held_since;
    SyncCallback done;
  };
  // Callbacks collected under the lock and run after it is released.
  class Deferred;

  RoundAggregator(RoundAggregatorOptions options, Logger logger);

  absl::Status CheckRegisterOptions(const RegisterRequest& request) const;
  absl::Status Configure(const RegisterRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CompareWithFirst(const RegisterRequest& request) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Validates and decodes every update outside the lock: codec, layout,
  // version, count, summands, the bytes (the kernels decoders), NaN/Inf.
  // `fp32` decodes the updates sent in fp32 RAW in place of their codec.
  absl::StatusOr<Decoded> Decode(const SyncRequest& request,
                                 const std::vector<const ChunkSpec*>& specs,
                                 const kernels::Codec* fp32) const;
  // Closes the open round when all K sent it, or when T_global has passed
  // and no data center lags beyond max_lag (else starts a hold).
  void MaybeClose(absl::Time now, Deferred* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CloseRound(absl::Time now, Deferred* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The encoded average of one chunk.
  absl::StatusOr<kernels::Payload> EncodeAverage(
      uint32_t key, const ChunkSpec& spec, std::vector<float> average) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Data centers more than max_lag rounds behind the open round.
  std::vector<uint32_t> TooFarBehind() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // "data center 2 (at round 5)" for each of `datacenters`.
  std::string DescribeLag(const std::vector<uint32_t>& datacenters) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailRun(absl::Status status, Deferred* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AnswerAll(const absl::Status& status, Deferred* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RoundAggregatorOptions options_;
  const Logger logger_;

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
  // valid while the aggregator lives.
  std::vector<ChunkSpec> chunks_ ABSL_GUARDED_BY(mu_);

  // By data center.
  std::vector<bool> registered_ ABSL_GUARDED_BY(mu_);
  // The round each data center sends next: one past its last accepted one.
  std::vector<uint64_t> next_round_ ABSL_GUARDED_BY(mu_);
  // A request of the data center is being decoded outside the lock.
  std::vector<bool> adding_ ABSL_GUARDED_BY(mu_);

  // The open round.
  uint64_t open_round_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<absl::Time> first_arrival_ ABSL_GUARDED_BY(mu_);
  // By data center: it sent the open round.
  std::vector<bool> sent_ ABSL_GUARDED_BY(mu_);
  uint32_t num_sent_ ABSL_GUARDED_BY(mu_) = 0;
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
  std::vector<Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  // Set while the open round is held.
  std::optional<absl::Time> hold_began_ ABSL_GUARDED_BY(mu_);

  // The answers of the last max_lag + 1 closed rounds, by round.
  std::map<uint64_t, RoundAnswerPtr> answers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tern::global

#endif  // TERN_GLOBAL_ROUND_AGGREGATOR_H_
