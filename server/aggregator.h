// The TernGrad step of one parameter-server shard (DESIGN section 3) with
// the failure semantics of section 7, as a plain class: no protobuf, no
// gRPC (server/ps_service.h adapts it to the wire). server/README.md states
// the protocol and every decision the design leaves open.
//
// Per step t the shard runs two barriers over the N workers:
//   ShareScalers(t): each worker sends its local scalers s_ik of the shard's
//     TernGrad chunks; once all N have sent, every caller gets
//     s_k = max_i s_ik.
//   PushPull(t): each worker pushes every chunk of the shard, encoded; the
//     shard adds them (Aggregation::Add); once all N have pushed, every
//     caller gets Aggregation::Finish() of each chunk and the shard moves on
//     to step t + 1. Codecs that are not Summable() decode, average and
//     re-encode (kernels/float_aggregation.h); for those with
//     UsesErrorFeedback() the shard keeps one residual per chunk across
//     steps, which Finish() updates once per step.
// Before step 0, Join is a barrier too: a worker's Join is answered once all
// N workers have joined (later joins, e.g. of a restarted worker, at once),
// so workers start step 0 together and a slow starter is covered by the
// workers' join timeout, not by a barrier timeout.
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
#include "kernels/codec.h"
#include "kernels/codec_options.h"
#include "kernels/codec_registry.h"
#include "server/messages.h"

namespace tern::server {

struct AggregatorOptions {
  uint32_t shard_index = 0;
  uint32_t num_shards = 1;
  uint32_t num_workers = 1;
  // How long a pending barrier call (Join, ShareScalers, PushPull) waits
  // for the last worker before it is answered DEADLINE_EXCEEDED.
  absl::Duration barrier_timeout = absl::Seconds(50);
  // How long after its creation the shard waits for all N workers to join;
  // ExpireWaits reports it.
  absl::Duration join_timeout = absl::Seconds(300);
  // The shard's gRPC message limit: Join refuses a model whose share on
  // this shard would not fit in fp32 (the widest encoding).
  uint64_t max_message_bytes = 64ull << 20;
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
using Callback = std::function<void(absl::StatusOr<T>)>;

// Answers are shared by every worker that waited for them and kept for a
// retry of the just-completed step.
using ScalerAnswer = std::shared_ptr<const ScalerReply>;
using PushAnswer = std::shared_ptr<const PushReply>;

// Bytes a message of `num_chunks` chunks of `num_elements` elements in all
// needs at most in fp32: 4 bytes per element, 128 bytes of framing per chunk
// (key, codec, layout, version, counts, scalers, length prefixes) and 1 MiB
// of slack: the bound the workers size their channels with
// (worker/ps_client.h, MessageBytesBound).
uint64_t Fp32MessageBytes(uint64_t num_elements, uint64_t num_chunks);

class Aggregator {
 public:
  // INVALID_ARGUMENT for options that cannot work (no workers, shard_index
  // not below num_shards, a timeout that is not positive).
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
  // N workers have pushed.
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

  // The open step: the one the shard waits for pushes of.
  uint64_t step() const;
  bool all_joined() const;
  // OK, or why the run failed (replicas diverged, a codec broke).
  absl::Status run_status() const;

 private:
  struct ShardChunk;
  template <typename T>
  struct Waiter {
    uint32_t worker = 0;
    absl::Time deadline;
    Callback<T> done;
  };
  enum class PushState { kNone, kAdding, kAdded };
  // Callbacks collected under the lock and run after it is released.
  class Deferred;

  Aggregator(AggregatorOptions options, Logger logger);

  // The error for calls of `worker` while the shard cannot serve them
  // (closed, failed, not configured, unknown or not joined worker).
  absl::Status CheckWorker(uint32_t worker) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // FAILED_PRECONDITION unless `step` is the open step.
  absl::Status CheckStep(uint64_t step) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckJoinOptions(const JoinRequest& request) const;
  // Builds the shard's chunks from the first joiner.
  absl::Status Configure(const JoinRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CompareWithFirst(const JoinRequest& request) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Validates a push outside the lock: codec, layout, count, summands,
  // version, scalers, the bytes (Codec::Decode), NaN/Inf.
  absl::Status ValidatePush(const PushRequest& request,
                            const std::vector<ShardChunk*>& chunks,
                            const std::vector<float>& shared_scalers) const;
  // All N pushed step_: finishes every chunk, answers the waiters, opens
  // step_ + 1.
  void CompleteStep(Deferred* deferred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks the run failed and answers every waiter with `status`.
  void FailRun(absl::Status status, Deferred* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AnswerAll(const absl::Status& status, Deferred* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // By worker: whether it has pushed the open step.
  std::vector<bool> Pushed() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const AggregatorOptions options_;
  const Logger logger_;
  const absl::Time created_;

  mutable absl::Mutex mu_;
  // Not OK after Close: every call gets it.
  absl::Status closed_ ABSL_GUARDED_BY(mu_);
  // Not OK once the run failed: every call gets it.
  absl::Status failed_ ABSL_GUARDED_BY(mu_);

  // Fixed by the first successful join.
  bool configured_ ABSL_GUARDED_BY(mu_) = false;
  uint32_t first_worker_ ABSL_GUARDED_BY(mu_) = 0;
  RunConfig config_ ABSL_GUARDED_BY(mu_);
  std::vector<TensorSpec> tensors_ ABSL_GUARDED_BY(mu_);
  uint64_t spec_hash_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t initial_checksum_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<kernels::Codec> run_codec_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<kernels::Codec> fp32_codec_ ABSL_GUARDED_BY(mu_);
  // The shard's chunks in key order. Built once by Configure and never
  // changed after, so their addresses stay valid while the aggregator lives.
  std::vector<std::unique_ptr<ShardChunk>> chunks_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint32_t, ShardChunk*> chunk_by_key_ ABSL_GUARDED_BY(mu_);
  // The TernGrad chunks (those whose scalers are shared), in key order.
  std::vector<ShardChunk*> scaler_chunks_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> chunk_keys_ ABSL_GUARDED_BY(mu_);

  std::vector<bool> joined_ ABSL_GUARDED_BY(mu_);
  uint32_t num_joined_ ABSL_GUARDED_BY(mu_) = 0;
  bool all_joined_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Waiter<JoinReply>> join_waiters_ ABSL_GUARDED_BY(mu_);

  uint64_t step_ ABSL_GUARDED_BY(mu_) = 0;

  // Scaler sharing of step_.
  std::vector<bool> scalers_sent_ ABSL_GUARDED_BY(mu_);
  uint32_t num_scalers_sent_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<float> max_scalers_ ABSL_GUARDED_BY(mu_);  // by scaler slot
  ScalerAnswer scalers_ ABSL_GUARDED_BY(mu_);            // once all sent
  ScalerAnswer previous_scalers_ ABSL_GUARDED_BY(mu_);   // of step_ - 1
  std::vector<Waiter<ScalerAnswer>> scaler_waiters_ ABSL_GUARDED_BY(mu_);

  // Pushes of step_.
  std::vector<PushState> push_state_ ABSL_GUARDED_BY(mu_);
  uint32_t num_pushed_ ABSL_GUARDED_BY(mu_) = 0;
  PushAnswer previous_answer_ ABSL_GUARDED_BY(mu_);  // of step_ - 1
  std::vector<Waiter<PushAnswer>> push_waiters_ ABSL_GUARDED_BY(mu_);

  // CheckParams: step -> (first worker, its checksum), the latest few steps.
  std::map<uint64_t, std::pair<uint32_t, uint64_t>> checks_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace tern::server

#endif  // TERN_SERVER_AGGREGATOR_H_
