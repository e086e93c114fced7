#include "server/aggregator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "common/checksum.h"
#include "common/partitioner.h"
#include "kernels/codec_registry.h"

namespace tern::server {
namespace {

// CheckParams remembers the first checksum of this many recent steps;
// workers run in lockstep, so their reports of one step arrive within a
// step of each other.
constexpr size_t kKeptChecks = 16;
// A message names at most this many missing workers.
constexpr size_t kMaxNamedWorkers = 16;

std::string Seconds(absl::Duration duration) {
  return absl::StrCat(absl::ToDoubleSeconds(duration), "s");
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Elements of a tensor of `shape`; INVALID_ARGUMENT for a negative
// dimension or a count beyond 2^62.
absl::StatusOr<uint64_t> Elements(const TensorSpec& tensor) {
  constexpr uint64_t kMax = 1ull << 62;
  uint64_t elements = 1;
  for (const int64_t dim : tensor.shape) {
    if (dim < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", tensor.name, "' has a negative dimension ",
                       ShapeString(tensor.shape)));
    }
    if (dim != 0 && elements > kMax / static_cast<uint64_t>(dim)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", tensor.name, "' of shape ",
                       ShapeString(tensor.shape), " is too large"));
    }
    elements *= static_cast<uint64_t>(dim);
  }
  return elements;
}

// Removes the waiters whose deadline is at or before `now` from `waiters`
// and returns them, in arrival order.
template <typename Waiter>
std::vector<Waiter> TakeExpired(std::vector<Waiter>* waiters, absl::Time now) {
  std::vector<Waiter> expired;
  std::vector<Waiter> kept;
  for (Waiter& waiter : *waiters) {
    (waiter.deadline <= now ? expired : kept).push_back(std::move(waiter));
  }
  *waiters = std::move(kept);
  return expired;
}

// "worker 2" or "workers 2,3" for the workers that have not `arrived`.
std::string Missing(const std::vector<bool>& arrived) {
  std::vector<size_t> missing;
  for (size_t worker = 0; worker < arrived.size(); ++worker) {
    if (!arrived[worker]) missing.push_back(worker);
  }
  std::string text = missing.size() == 1 ? "worker " : "workers ";
  const size_t named = std::min(missing.size(), kMaxNamedWorkers);
  absl::StrAppend(&text,
                  absl::StrJoin(missing.begin(), missing.begin() + named, ","));
  if (named < missing.size()) {
    absl::StrAppend(&text, " and ", missing.size() - named, " more");
  }
  return text;
}

absl::Status WithPrefix(const absl::Status& status, absl::string_view prefix) {
  return absl::Status(status.code(),
                      absl::StrCat(prefix, ": ", status.message()));
}

std::string DropScopeName(kernels::DropScope scope) {
  return scope == kernels::DropScope::kGlobal ? "global" : "tensor";
}

std::string Text(bool value) { return value ? "true" : "false"; }
template <typename T>
std::string Text(const T& value) {
  return absl::StrCat(value);
}

// The first codec parameter in which `theirs` differs from `ours`, as
// `differs("codec parameter <name>", theirs, ours, why)` reports it; the
// names are the workers' flags.
template <typename Differs>
absl::Status CompareCodecParams(const CodecParams& theirs,
                                const CodecParams& ours,
                                const Differs& differs) {
  constexpr absl::string_view kSameFlags =
      "every worker must run with the same flags";
  auto compare = [&](absl::string_view name, const auto& a, const auto& b) {
    // `!(a == b)`: a NaN never matches (wire.h refuses it anyway).
    if (!(a == b)) {
      return differs(absl::StrCat("codec parameter ", name), Text(a), Text(b),
                     kSameFlags);
    }
    return absl::OkStatus();
  };
  for (absl::Status status : {
           compare("sample_size", theirs.sample_size, ours.sample_size),
           compare("sampled_means", theirs.sampled_means, ours.sampled_means),
           compare("tau", theirs.tau, ours.tau),
           compare("proportion", theirs.proportion, ours.proportion),
           compare("drop_ratio", theirs.drop_ratio, ours.drop_ratio),
           compare("drop_scope", DropScopeName(theirs.drop_scope),
                   DropScopeName(ours.drop_scope)),
           compare("drop_quantize", theirs.drop_quantize, ours.drop_quantize),
           compare("qsgd_levels", theirs.qsgd_levels, ours.qsgd_levels),
           compare("qsgd_bucket", theirs.qsgd_bucket, ours.qsgd_bucket),
       }) {
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace

uint64_t Fp32MessageBytes(uint64_t num_elements, uint64_t num_chunks) {
  return num_elements * sizeof(float) + num_chunks * 128 + (1ull << 20);
}

// One chunk the shard owns. Everything but `aggregation` and `residual` is
// fixed when the chunk is built, so readers need no lock for it.
struct Aggregator::ShardChunk {
  uint32_t key = 0;
  uint64_t num_elements = 0;
  const kernels::Codec* codec = nullptr;  // owned by the aggregator
  // The layout pushes must have; kUnspecified leaves it to the codec.
  kernels::Layout push_layout = kernels::Layout::kUnspecified;
  // TernGrad chunks take part in scaler sharing, at `scaler_slot` of the
  // shard's scaler list.
  bool shares_scaler = false;
  size_t scaler_slot = 0;
  // The groups ("columns") a re-encoded pull uses: ColumnGroupSize of the
  // shape of the tensor the chunk belongs to, as on the workers.
  uint64_t group_size = 0;

  absl::Mutex mu;
  // The sum of the open step's pushes of this chunk.
  std::unique_ptr<kernels::Aggregation> aggregation ABSL_GUARDED_BY(mu);
  // The shard's error-feedback residual (codecs with UsesErrorFeedback()):
  // what the pulls so far did not carry. Zeros at the start; only Finish()
  // of a step's aggregation changes it, and the shard calls that once per
  // step, so retries and duplicates never touch it.
  std::vector<float> residual ABSL_GUARDED_BY(mu);

  // Opens the aggregation of `step`: its pull is encoded with the stream
  // (seed, step, key, kShardStreamWorker), in groups of group_size, and
  // with the residual where the codec uses one.
  void Open(uint64_t seed, uint64_t step, uint32_t num_workers)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    kernels::AggregationContext context;
    // The step wraps at 2^32 in the counter, as on the workers.
    context.stream = RandomStream{seed, static_cast<uint32_t>(step), key,
                                  kernels::kShardStreamWorker};
    context.group_size = group_size;
    if (codec->UsesErrorFeedback()) context.residual = &residual;
    aggregation = codec->NewAggregation(num_elements, num_workers, context);
  }
};

// Callbacks collected under the lock and run when this object is
// destroyed. Declared before the MutexLock of a scope, it is destroyed after
// the lock is released, so no callback ever runs with mu_ held.
class Aggregator::Deferred {
 public:
  Deferred() = default;
  Deferred(const Deferred&) = delete;
  Deferred& operator=(const Deferred&) = delete;
  ~Deferred() {
    for (std::function<void()>& callback : callbacks_) callback();
  }

  template <typename T>
  void Answer(Callback<T> done, absl::StatusOr<T> answer) {
    callbacks_.push_back(
        [done = std::move(done), answer = std::move(answer)]() mutable {
          done(std::move(answer));
        });
  }

 private:
  std::vector<std::function<void()>> callbacks_;
};

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
  if (logger == nullptr) logger = MakeNullLogger();
  return std::unique_ptr<Aggregator>(
      new Aggregator(std::move(options), std::move(logger)));
}

Aggregator::Aggregator(AggregatorOptions options, Logger logger)
    : options_(std::move(options)),
      logger_(std::move(logger)),
      created_(options_.clock()) {
  joined_.assign(options_.num_workers, false);
  scalers_sent_.assign(options_.num_workers, false);
  push_state_.assign(options_.num_workers, PushState::kNone);
}

Aggregator::~Aggregator() {
  Close(absl::UnavailableError(
      absl::StrCat("shard ", options_.shard_index, " is shutting down")));
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
  if (!joined_[worker]) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", worker, " has not joined shard ",
                     options_.shard_index, " (Join comes first)"));
  }
  return absl::OkStatus();
}

absl::Status Aggregator::CheckStep(uint64_t step) const {
  if (step > step_) {
    return absl::FailedPreconditionError(
        absl::StrCat("step ", step, " is in the future: shard ",
                     options_.shard_index, " is at step ", step_));
  }
  if (step < step_) {
    return absl::FailedPreconditionError(
        absl::StrCat("step ", step, " is stale: shard ", options_.shard_index,
                     " is at step ", step_));
  }
  return absl::OkStatus();
}

std::vector<bool> Aggregator::Pushed() const {
  std::vector<bool> pushed(push_state_.size());
  for (size_t w = 0; w < push_state_.size(); ++w) {
    pushed[w] = push_state_[w] == PushState::kAdded;
  }
  return pushed;
}

void Aggregator::AnswerAll(const absl::Status& status, Deferred* deferred) {
  for (auto& waiter : join_waiters_) {
    deferred->Answer<JoinReply>(std::move(waiter.done), status);
  }
  for (auto& waiter : scaler_waiters_) {
    deferred->Answer<ScalerAnswer>(std::move(waiter.done), status);
  }
  for (auto& waiter : push_waiters_) {
    deferred->Answer<PushAnswer>(std::move(waiter.done), status);
  }
  join_waiters_.clear();
  scaler_waiters_.clear();
  push_waiters_.clear();
}

void Aggregator::FailRun(absl::Status status, Deferred* deferred) {
  if (!failed_.ok()) return;
  failed_ = std::move(status);
  logger_->error("run failed: {}", std::string(failed_.message()));
  AnswerAll(failed_, deferred);
}

// --- Join ---

absl::Status Aggregator::CheckJoinOptions(const JoinRequest& request) const {
  const uint32_t shard = options_.shard_index;
  if (request.config.mode != RunMode::kTernGrad) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", request.worker_id,
        " runs --mode=", RunModeName(request.config.mode), ", but shard ",
        shard, " serves --mode=terngrad (start `tern ps --mode=",
        RunModeName(request.config.mode), "`)"));
  }
  if (request.worker_id >= options_.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker_id ", request.worker_id, " is not below --num_workers=",
        options_.num_workers, " of shard ", shard));
  }
  if (request.config.num_workers != options_.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", request.worker_id,
        " runs with num_workers=", request.config.num_workers, ", but shard ",
        shard, " was started with --num_workers=", options_.num_workers));
  }
  if (request.config.num_shards != options_.num_shards) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker ", request.worker_id, " knows ",
                     request.config.num_shards, " shards, but shard ", shard,
                     " was started with --num_shards=", options_.num_shards));
  }
  if (request.shard_index != shard) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker ", request.worker_id, " sent its join for shard ",
                     request.shard_index, " to shard ", shard,
                     " (--ps must list the shards in shard-index order)"));
  }
  const float clip = request.config.clip;
  if (!std::isfinite(clip) || clip < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("clip ", clip, " of worker ", request.worker_id,
                     " is not a finite number >= 0"));
  }
  return absl::OkStatus();
}

absl::Status Aggregator::Configure(const JoinRequest& request) {
  const RunConfig& config = request.config;
  const uint32_t shard = options_.shard_index;

  std::vector<uint64_t> elements;
  elements.reserve(request.tensors.size());
  for (const TensorSpec& tensor : request.tensors) {
    absl::StatusOr<uint64_t> count = Elements(tensor);
    if (!count.ok()) return WithPrefix(count.status(), "param spec");
    elements.push_back(*count);
  }
  absl::StatusOr<Partition> partition =
      Partition::Create(elements, config.partition_bytes, options_.num_shards);
  if (!partition.ok()) return WithPrefix(partition.status(), "partition");

  absl::flat_hash_set<uint32_t> fp32_keys;
  for (const uint32_t key : config.fp32_chunk_keys) {
    if (key >= partition->chunks().size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("fp32 chunk key ", key, " is beyond the model's ",
                       partition->chunks().size(), " chunks"));
    }
    if (!fp32_keys.insert(key).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("fp32 chunk key ", key, " is listed twice"));
    }
  }

  const std::vector<uint32_t> keys = partition->ChunksOfShard(shard);
  const uint64_t shard_elements = partition->ShardElements(shard);
  const uint64_t message_bytes = Fp32MessageBytes(shard_elements, keys.size());
  if (message_bytes > options_.max_message_bytes) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "shard %d would own %d elements in %d chunks: up to %d bytes per "
        "message in fp32, more than its limit of %d MiB (--max_message_mb); "
        "raise --max_message_mb of the shards or use more shards",
        shard, shard_elements, keys.size(), message_bytes,
        options_.max_message_bytes >> 20));
  }

  absl::StatusOr<std::unique_ptr<kernels::Codec>> run_codec =
      options_.make_codec(RunCodecOptions(config));
  if (!run_codec.ok()) return WithPrefix(run_codec.status(), "run config");
  kernels::CodecOptions fp32_options;
  fp32_options.id = kernels::CodecId::kFp32;
  fp32_options.push_layout = kernels::Layout::kRaw;
  fp32_options.pull_layout = kernels::Layout::kRaw;
  absl::StatusOr<std::unique_ptr<kernels::Codec>> fp32_codec =
      kernels::MakeCodec(fp32_options);
  if (!fp32_codec.ok()) return WithPrefix(fp32_codec.status(), "fp32 codec");

  std::vector<std::unique_ptr<ShardChunk>> chunks;
  absl::flat_hash_map<uint32_t, ShardChunk*> by_key;
  std::vector<ShardChunk*> scaler_chunks;
  size_t feedback_chunks = 0;
  for (const uint32_t key : keys) {
    const Chunk& part = partition->chunks()[key];
    auto chunk = std::make_unique<ShardChunk>();
    chunk->key = key;
    chunk->num_elements = part.num_elements;
    chunk->group_size =
        kernels::ColumnGroupSize(request.tensors[part.tensor].shape);
    const bool fp32 = fp32_keys.contains(key);
    chunk->codec = fp32 ? fp32_codec->get() : run_codec->get();
    chunk->push_layout = fp32 ? kernels::Layout::kRaw : config.push_layout;
    // Scaler sharing is TernGrad's (DESIGN section 3, step 3).
    chunk->shares_scaler = chunk->codec->id() == kernels::CodecId::kTernGrad;
    if (chunk->shares_scaler) {
      chunk->scaler_slot = scaler_chunks.size();
      scaler_chunks.push_back(chunk.get());
    }
    {
      absl::MutexLock lock(&chunk->mu);
      if (chunk->codec->UsesErrorFeedback()) {
        chunk->residual.assign(chunk->num_elements, 0.0f);
        ++feedback_chunks;
      }
      chunk->Open(config.seed, step_, options_.num_workers);
    }
    by_key[key] = chunk.get();
    chunks.push_back(std::move(chunk));
  }

  configured_ = true;
  first_worker_ = request.worker_id;
  config_ = config;
  tensors_ = request.tensors;
  spec_hash_ = request.param_spec_hash;
  initial_checksum_ = request.param_checksum;
  run_codec_ = *std::move(run_codec);
  fp32_codec_ = *std::move(fp32_codec);
  chunks_ = std::move(chunks);
  chunk_by_key_ = std::move(by_key);
  scaler_chunks_ = std::move(scaler_chunks);
  chunk_keys_ = keys;
  max_scalers_.assign(scaler_chunks_.size(), 0.0f);
  logger_->info(
      "run '{}' configured by worker {}: {} tensors, {} chunks of {} elements "
      "on this shard ({} share scalers, {} keep a residual), codec {}, {} "
      "workers",
      config_.run_id, first_worker_, tensors_.size(), chunks_.size(),
      shard_elements, scaler_chunks_.size(), feedback_chunks,
      kernels::CodecName(config_.codec), options_.num_workers);
  return absl::OkStatus();
}

absl::Status Aggregator::CompareWithFirst(const JoinRequest& request) const {
  const uint32_t worker = request.worker_id;
  const uint32_t first = first_worker_;
  const RunConfig& mine = request.config;
  // "<what> <theirs> of worker <w> differs from <ours> of worker <first>".
  auto differs = [&](absl::string_view what, const std::string& theirs,
                     const std::string& ours, absl::string_view why) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " ", theirs, " of worker ", worker, " differs from ",
                     ours, " of worker ", first, ": ", why));
  };
  constexpr absl::string_view kSameFlags =
      "every worker must run with the same flags";
  if (mine.run_id != config_.run_id) {
    return differs("run_id", absl::StrCat("'", mine.run_id, "'"),
                   absl::StrCat("'", config_.run_id, "'"), kSameFlags);
  }
  if (mine.partition_bytes != config_.partition_bytes) {
    return differs("partition_bytes", absl::StrCat(mine.partition_bytes),
                   absl::StrCat(config_.partition_bytes), kSameFlags);
  }
  if (mine.seed != config_.seed) {
    return differs("seed", absl::StrCat(mine.seed), absl::StrCat(config_.seed),
                   kSameFlags);
  }
  if (mine.codec != config_.codec) {
    return differs("codec", kernels::CodecName(mine.codec),
                   kernels::CodecName(config_.codec), kSameFlags);
  }
  if (mine.push_layout != config_.push_layout) {
    return differs("push layout", kernels::LayoutName(mine.push_layout),
                   kernels::LayoutName(config_.push_layout), kSameFlags);
  }
  if (mine.pull_layout != config_.pull_layout) {
    return differs("pull layout", kernels::LayoutName(mine.pull_layout),
                   kernels::LayoutName(config_.pull_layout), kSameFlags);
  }
  if (!(mine.clip == config_.clip)) {
    return differs("clip", absl::StrCat(mine.clip), absl::StrCat(config_.clip),
                   kSameFlags);
  }
  if (absl::Status status =
          CompareCodecParams(mine.codec_params, config_.codec_params, differs);
      !status.ok()) {
    return status;
  }
  if (mine.fp32_chunk_keys != config_.fp32_chunk_keys) {
    return differs(
        "fp32 chunk keys",
        absl::StrCat("[", absl::StrJoin(mine.fp32_chunk_keys, ","), "]"),
        absl::StrCat("[", absl::StrJoin(config_.fp32_chunk_keys, ","), "]"),
        "every worker must keep the same tensors in fp32 (--fp32_tensors, "
        "--min_compress_elems)");
  }
  constexpr absl::string_view kSameModel =
      "workers must train the same model (same --model)";
  if (request.param_spec_hash != spec_hash_) {
    return differs("param spec hash", FormatChecksum(request.param_spec_hash),
                   FormatChecksum(spec_hash_), kSameModel);
  }
  // The hash is the workers' own; the shard also compares what it computed
  // its partition from.
  if (request.tensors.size() != tensors_.size()) {
    return differs("tensor count", absl::StrCat(request.tensors.size()),
                   absl::StrCat(tensors_.size()), kSameModel);
  }
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const TensorSpec& theirs = request.tensors[i];
    const TensorSpec& ours = tensors_[i];
    if (theirs.name != ours.name || theirs.shape != ours.shape) {
      return differs(
          absl::StrCat("tensor ", i),
          absl::StrCat("'", theirs.name, "' ", ShapeString(theirs.shape)),
          absl::StrCat("'", ours.name, "' ", ShapeString(ours.shape)),
          kSameModel);
    }
  }
  // The initial parameters matter only before the first step completes;
  // a worker that rejoins later shows its replica through CheckParams.
  if (step_ == 0 && request.param_checksum != initial_checksum_) {
    return differs("param checksum", FormatChecksum(request.param_checksum),
                   FormatChecksum(initial_checksum_),
                   "workers must start from the same parameters (same "
                   "--seed and model)");
  }
  return absl::OkStatus();
}

void Aggregator::Join(const JoinRequest& request, Callback<JoinReply> done) {
  Deferred deferred;
  absl::MutexLock lock(&mu_);
  const uint32_t worker = request.worker_id;
  absl::Status status = !closed_.ok() ? closed_ : failed_;
  if (status.ok()) status = CheckJoinOptions(request);
  if (status.ok()) {
    status = configured_ ? CompareWithFirst(request) : Configure(request);
  }
  if (!status.ok()) {
    logger_->warn("join of worker {} refused: {}", worker,
                  std::string(status.message()));
    deferred.Answer<JoinReply>(std::move(done), status);
    return;
  }

  if (!joined_[worker]) {
    joined_[worker] = true;
    ++num_joined_;
    logger_->info("worker {} joined ({} of {})", worker, num_joined_,
                  options_.num_workers);
  } else {
    logger_->info("worker {} rejoined at step {}", worker, step_);
  }
  const JoinReply reply{options_.shard_index, step_, chunk_keys_};
  if (!all_joined_ && num_joined_ == options_.num_workers) {
    all_joined_ = true;
    logger_->info("all {} workers joined; starting at step {}",
                  options_.num_workers, step_);
    for (auto& waiter : join_waiters_) {
      deferred.Answer<JoinReply>(std::move(waiter.done), reply);
    }
    join_waiters_.clear();
  }
  if (all_joined_) {
    deferred.Answer<JoinReply>(std::move(done), reply);
  } else {
    join_waiters_.push_back(Waiter<JoinReply>{
        worker, options_.clock() + options_.barrier_timeout, std::move(done)});
  }
}

// --- ShareScalers ---

void Aggregator::ShareScalers(const ScalerRequest& request,
                              Callback<ScalerAnswer> done) {
  Deferred deferred;
  absl::MutexLock lock(&mu_);
  const uint32_t worker = request.worker_id;
  const uint64_t step = request.step;
  auto refuse = [&](absl::Status status) {
    logger_->warn("scalers of worker {} for step {} refused: {}", worker, step,
                  std::string(status.message()));
    deferred.Answer<ScalerAnswer>(std::move(done), std::move(status));
  };
  if (absl::Status status = CheckWorker(worker); !status.ok()) {
    return refuse(std::move(status));
  }
  if (step + 1 == step_ && previous_scalers_ != nullptr) {
    // A retry of the step just completed.
    deferred.Answer<ScalerAnswer>(std::move(done), previous_scalers_);
    return;
  }
  if (absl::Status status = CheckStep(step); !status.ok()) {
    return refuse(std::move(status));
  }
  if (scalers_sent_[worker]) {
    // A duplicate: counted once (the first values stay), answered too.
    if (scalers_ != nullptr) {
      deferred.Answer<ScalerAnswer>(std::move(done), scalers_);
    } else {
      scaler_waiters_.push_back(Waiter<ScalerAnswer>{
          worker, options_.clock() + options_.barrier_timeout,
          std::move(done)});
    }
    return;
  }

  auto invalid = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("step ", step, ": ", what));
  };
  std::vector<bool> seen(scaler_chunks_.size(), false);
  for (const ChunkScaler& entry : request.scalers) {
    const auto it = chunk_by_key_.find(entry.chunk_key);
    if (it == chunk_by_key_.end()) {
      return refuse(invalid(absl::StrCat(
          "chunk ", entry.chunk_key, " in the scalers of worker ", worker,
          " is not a chunk of shard ", options_.shard_index)));
    }
    const ShardChunk& chunk = *it->second;
    if (!chunk.shares_scaler) {
      return refuse(invalid(absl::StrCat(
          "chunk ", entry.chunk_key, " in the scalers of worker ", worker,
          " travels as ", chunk.codec->name(), " and shares no scaler")));
    }
    if (seen[chunk.scaler_slot]) {
      return refuse(invalid(absl::StrCat("chunk ", entry.chunk_key,
                                         " appears twice in the scalers of "
                                         "worker ",
                                         worker)));
    }
    seen[chunk.scaler_slot] = true;
    if (!std::isfinite(entry.scaler)) {
      return refuse(invalid(
          absl::StrCat("chunk ", entry.chunk_key, ": scaler ", entry.scaler,
                       " of worker ", worker,
                       " is not finite (NaN/Inf gradients are refused; see "
                       "server/README.md)")));
    }
    if (entry.scaler < 0) {
      return refuse(invalid(absl::StrCat("chunk ", entry.chunk_key, ": scaler ",
                                         entry.scaler, " of worker ", worker,
                                         " is negative")));
    }
  }
  for (size_t slot = 0; slot < seen.size(); ++slot) {
    if (!seen[slot]) {
      return refuse(
          invalid(absl::StrCat("worker ", worker, " sent no scaler for chunk ",
                               scaler_chunks_[slot]->key)));
    }
  }

  for (const ChunkScaler& entry : request.scalers) {
    float& shared = max_scalers_[chunk_by_key_[entry.chunk_key]->scaler_slot];
    shared = std::max(shared, entry.scaler);
  }
  scalers_sent_[worker] = true;
  ++num_scalers_sent_;
  scaler_waiters_.push_back(Waiter<ScalerAnswer>{
      worker, options_.clock() + options_.barrier_timeout, std::move(done)});
  if (num_scalers_sent_ < options_.num_workers) return;

  // s_k = max_i s_ik (DESIGN section 3, step 3).
  auto reply = std::make_shared<ScalerReply>();
  reply->step = step_;
  reply->scalers.reserve(scaler_chunks_.size());
  for (const ShardChunk* chunk : scaler_chunks_) {
    reply->scalers.push_back(
        ChunkScaler{chunk->key, max_scalers_[chunk->scaler_slot]});
  }
  scalers_ = std::move(reply);
  for (auto& waiter : scaler_waiters_) {
    deferred.Answer<ScalerAnswer>(std::move(waiter.done), scalers_);
  }
  scaler_waiters_.clear();
  logger_->debug("step {}: scalers shared", step_);
}

// --- PushPull ---

absl::Status Aggregator::ValidatePush(
    const PushRequest& request, const std::vector<ShardChunk*>& chunks,
    const std::vector<float>& shared_scalers) const {
  std::vector<float> scratch;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const ShardChunk& chunk = *chunks[i];
    const kernels::Payload& push = request.chunks[i].payload;
    auto invalid = [&](const std::string& what) {
      return absl::InvalidArgumentError(
          absl::StrCat("step ", request.step, ": chunk ", chunk.key,
                       " of worker ", request.worker_id, ": ", what));
    };
    if (push.codec != chunk.codec->id()) {
      return invalid(absl::StrCat("codec ", kernels::CodecName(push.codec),
                                  ", but the chunk travels as ",
                                  chunk.codec->name()));
    }
    if (chunk.push_layout != kernels::Layout::kUnspecified &&
        push.layout != chunk.push_layout) {
      return invalid(absl::StrCat("layout ", kernels::LayoutName(push.layout),
                                  ", but the run pushes ",
                                  kernels::LayoutName(chunk.push_layout)));
    }
    if (push.format_version != kernels::kFormatVersion) {
      return invalid(absl::StrCat("format version ", push.format_version,
                                  " is not supported (this shard reads ",
                                  kernels::kFormatVersion, ")"));
    }
    if (push.num_elements != chunk.num_elements) {
      return invalid(absl::StrCat(push.num_elements,
                                  " elements, but the chunk has ",
                                  chunk.num_elements));
    }
    if (push.num_summands != 1) {
      return invalid(absl::StrCat("num_summands ", push.num_summands,
                                  ", but a push holds one worker's values"));
    }
    for (const float scaler : push.scalers) {
      if (!std::isfinite(scaler)) {
        return invalid(
            absl::StrCat("scaler ", scaler,
                         " is not finite (NaN/Inf gradients are refused; see "
                         "server/README.md)"));
      }
    }
    // TernGrad sums codes: every push of a chunk must use the shared
    // scaler s_k (DESIGN section 3, step 4).
    if (chunk.shares_scaler &&
        (push.scalers.empty() || push.scalers[0] != shared_scalers[i])) {
      return invalid(absl::StrCat("scaler ",
                                  push.scalers.empty()
                                      ? std::string("(none)")
                                      : absl::StrCat(push.scalers[0]),
                                  " differs from the shared scaler ",
                                  shared_scalers[i], " of this step"));
    }
    scratch.resize(chunk.num_elements);
    if (absl::Status status =
            chunk.codec->Decode(push, absl::MakeSpan(scratch));
        !status.ok()) {
      return invalid(std::string(status.message()));
    }
    for (size_t j = 0; j < scratch.size(); ++j) {
      if (!std::isfinite(scratch[j])) {
        return invalid(absl::StrCat(
            "element ", j, " is ", scratch[j],
            " (NaN/Inf gradients are refused; see server/README.md)"));
      }
    }
  }
  return absl::OkStatus();
}

void Aggregator::PushPull(const PushRequest& request,
                          Callback<PushAnswer> done) {
  const uint32_t worker = request.worker_id;
  const uint64_t step = request.step;
  auto log_refusal = [&](const absl::Status& status) {
    logger_->warn("push of worker {} for step {} refused: {}", worker, step,
                  std::string(status.message()));
  };

  // 1. Under the lock: is this push expected, and which chunks does it hold?
  std::vector<ShardChunk*> chunks(request.chunks.size(), nullptr);
  std::vector<float> shared(request.chunks.size(), 0.0f);
  {
    Deferred deferred;
    absl::MutexLock lock(&mu_);
    auto refuse = [&](absl::Status status) {
      log_refusal(status);
      deferred.Answer<PushAnswer>(std::move(done), std::move(status));
    };
    if (absl::Status status = CheckWorker(worker); !status.ok()) {
      return refuse(std::move(status));
    }
    if (step + 1 == step_ && previous_answer_ != nullptr) {
      // A retry of the step just completed gets the same answer.
      deferred.Answer<PushAnswer>(std::move(done), previous_answer_);
      return;
    }
    if (absl::Status status = CheckStep(step); !status.ok()) {
      return refuse(std::move(status));
    }
    if (push_state_[worker] == PushState::kAdded) {
      // A duplicate: counted once, answered with the others.
      push_waiters_.push_back(Waiter<PushAnswer>{
          worker, options_.clock() + options_.barrier_timeout,
          std::move(done)});
      return;
    }
    if (push_state_[worker] == PushState::kAdding) {
      // The first copy is still being added; a retry will find it counted.
      return refuse(absl::UnavailableError(
          absl::StrCat("step ", step, ": an earlier push of worker ", worker,
                       " is still being added; retry")));
    }
    if (!scaler_chunks_.empty() && scalers_ == nullptr) {
      return refuse(absl::FailedPreconditionError(absl::StrCat(
          "step ", step, ": worker ", worker,
          " pushed before the scalers of the step were shared (missing: ",
          Missing(scalers_sent_), ")")));
    }
    auto invalid = [&](const std::string& what) {
      return absl::InvalidArgumentError(
          absl::StrCat("step ", step, ": ", what));
    };
    absl::flat_hash_set<uint32_t> seen;
    for (size_t i = 0; i < request.chunks.size(); ++i) {
      const uint32_t key = request.chunks[i].chunk_key;
      const auto it = chunk_by_key_.find(key);
      if (it == chunk_by_key_.end()) {
        return refuse(invalid(absl::StrCat("chunk ", key, " of worker ", worker,
                                           " is not a chunk of shard ",
                                           options_.shard_index)));
      }
      if (!seen.insert(key).second) {
        return refuse(invalid(absl::StrCat("chunk ", key, " of worker ", worker,
                                           " appears twice")));
      }
      chunks[i] = it->second;
      if (it->second->shares_scaler) {
        shared[i] = scalers_->scalers[it->second->scaler_slot].scaler;
      }
    }
    if (seen.size() != chunk_keys_.size()) {
      for (const uint32_t key : chunk_keys_) {
        if (!seen.contains(key)) {
          return refuse(invalid(
              absl::StrCat("worker ", worker, " pushed no chunk ", key)));
        }
      }
    }
    push_state_[worker] = PushState::kAdding;
  }

  // 2. Without the lock: validate every chunk, then add them. Each chunk's
  // own lock serializes the workers adding to it.
  absl::Status status = ValidatePush(request, chunks, shared);
  size_t added = 0;
  if (status.ok()) {
    for (; added < chunks.size(); ++added) {
      absl::MutexLock chunk_lock(&chunks[added]->mu);
      status = chunks[added]->aggregation->Add(worker,
                                               request.chunks[added].payload);
      if (!status.ok()) break;
    }
  }

  // 3. Under the lock: count the push; the last one completes the step.
  Deferred deferred;
  absl::MutexLock lock(&mu_);
  if (!status.ok()) {
    if (added == 0) {
      push_state_[worker] = PushState::kNone;
      log_refusal(status);
      deferred.Answer<PushAnswer>(std::move(done), status);
      return;
    }
    // Validation passed, the codec's Add refused, and earlier chunks are
    // already in the sum: the step cannot be completed correctly.
    FailRun(absl::InternalError(
                absl::StrCat("step ", step, ": chunk ", chunks[added]->key,
                             " of worker ", worker,
                             ": the codec refused a push its decoder accepted, "
                             "after other chunks were added: ",
                             status.message())),
            &deferred);
    deferred.Answer<PushAnswer>(std::move(done), failed_);
    return;
  }
  push_state_[worker] = PushState::kAdded;
  ++num_pushed_;
  if (absl::Status serving = !closed_.ok() ? closed_ : failed_; !serving.ok()) {
    deferred.Answer<PushAnswer>(std::move(done), serving);
    return;
  }
  push_waiters_.push_back(Waiter<PushAnswer>{
      worker, options_.clock() + options_.barrier_timeout, std::move(done)});
  if (num_pushed_ == options_.num_workers) CompleteStep(&deferred);
}

void Aggregator::CompleteStep(Deferred* deferred) {
  auto reply = std::make_shared<PushReply>();
  reply->step = step_;
  reply->chunks.reserve(chunks_.size());
  for (const std::unique_ptr<ShardChunk>& chunk : chunks_) {
    absl::MutexLock chunk_lock(&chunk->mu);
    absl::StatusOr<kernels::Payload> sum = chunk->aggregation->Finish();
    if (!sum.ok()) {
      FailRun(
          absl::InternalError(absl::StrCat(
              "step ", step_, ": chunk ", chunk->key,
              ": the aggregate could not be built: ", sum.status().message())),
          deferred);
      return;
    }
    reply->chunks.push_back(ChunkPayload{chunk->key, *std::move(sum)});
    chunk->Open(config_.seed, step_ + 1, options_.num_workers);
  }
  PushAnswer answer = std::move(reply);
  for (auto& waiter : push_waiters_) {
    deferred->Answer<PushAnswer>(std::move(waiter.done), answer);
  }
  push_waiters_.clear();
  // Scaler calls still waiting belong to workers that pushed without
  // sharing (possible only on a shard without TernGrad chunks).
  for (auto& waiter : scaler_waiters_) {
    deferred->Answer<ScalerAnswer>(
        std::move(waiter.done),
        absl::FailedPreconditionError(
            absl::StrCat("step ", step_, " completed before ",
                         Missing(scalers_sent_), " shared scalers")));
  }
  scaler_waiters_.clear();

  previous_answer_ = std::move(answer);
  previous_scalers_ = std::move(scalers_);
  scalers_ = nullptr;
  std::fill(scalers_sent_.begin(), scalers_sent_.end(), false);
  num_scalers_sent_ = 0;
  std::fill(max_scalers_.begin(), max_scalers_.end(), 0.0f);
  std::fill(push_state_.begin(), push_state_.end(), PushState::kNone);
  num_pushed_ = 0;
  logger_->debug("step {} done", step_);
  ++step_;
}

// --- CheckParams, timeouts, shutdown ---

absl::Status Aggregator::CheckParams(uint32_t worker_id, uint64_t step,
                                     uint64_t checksum) {
  Deferred deferred;
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
  Deferred deferred;
  absl::MutexLock lock(&mu_);
  const std::string within =
      absl::StrCat(" within ", Seconds(options_.barrier_timeout));
  auto log = [&](const absl::Status& status, size_t calls) {
    logger_->warn("{} ({} pending {} answered)", std::string(status.message()),
                  calls, calls == 1 ? "call" : "calls");
  };

  if (auto expired = TakeExpired(&join_waiters_, now); !expired.empty()) {
    const absl::Status status = absl::DeadlineExceededError(
        absl::StrCat(Missing(joined_), " did not join shard ",
                     options_.shard_index, within));
    log(status, expired.size());
    for (auto& waiter : expired) {
      deferred.Answer<JoinReply>(std::move(waiter.done), status);
    }
  }
  if (auto expired = TakeExpired(&scaler_waiters_, now); !expired.empty()) {
    const absl::Status status = absl::DeadlineExceededError(
        absl::StrCat("step ", step_, ": ", Missing(scalers_sent_),
                     " did not share scalers", within));
    log(status, expired.size());
    for (auto& waiter : expired) {
      deferred.Answer<ScalerAnswer>(std::move(waiter.done), status);
    }
  }
  if (auto expired = TakeExpired(&push_waiters_, now); !expired.empty()) {
    const absl::Status status = absl::DeadlineExceededError(absl::StrCat(
        "step ", step_, ": ", Missing(Pushed()), " did not push", within));
    log(status, expired.size());
    for (auto& waiter : expired) {
      deferred.Answer<PushAnswer>(std::move(waiter.done), status);
    }
  }

  if (!all_joined_ && now - created_ >= options_.join_timeout) {
    return absl::DeadlineExceededError(
        absl::StrCat(Missing(joined_), " of ", options_.num_workers,
                     " did not join shard ", options_.shard_index, " within ",
                     Seconds(options_.join_timeout), " (--join_timeout_s)"));
  }
  return absl::OkStatus();
}

void Aggregator::Close(absl::Status status) {
  Deferred deferred;
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

bool Aggregator::all_joined() const {
  absl::MutexLock lock(&mu_);
  return all_joined_;
}

absl::Status Aggregator::run_status() const {
  absl::MutexLock lock(&mu_);
  return failed_;
}

}  // namespace tern::server
