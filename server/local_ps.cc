#include "server/local_ps.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/checksum.h"
#include "common/lr_schedule.h"
#include "common/partitioner.h"
#include "common/philox.h"
#include "core/payload_validation.h"
#include "kernels/codec_registry.h"

namespace tern::server {
namespace {

// How many steps a worker may run ahead of the open local step.
constexpr uint64_t kMaxLead = 1;

uint64_t PayloadBytes(const kernels::Payload& payload) {
  return payload.data.size() + payload.scalers.size() * sizeof(float);
}

uint64_t PayloadBytes(const std::vector<ChunkPayload>& chunks) {
  uint64_t bytes = 0;
  for (const ChunkPayload& chunk : chunks) bytes += PayloadBytes(chunk.payload);
  return bytes;
}

std::string Seconds(absl::Duration duration) {
  return absl::StrCat(absl::ToDoubleSeconds(duration), "s");
}

absl::StatusOr<std::unique_ptr<kernels::Codec>> Fp32Codec() {
  kernels::CodecOptions options;
  options.id = kernels::CodecId::kFp32;
  options.push_layout = kernels::Layout::kRaw;
  options.pull_layout = kernels::Layout::kRaw;
  return kernels::MakeCodec(options);
}

}  // namespace

class LocalPs::Deferred {
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
  return std::unique_ptr<LocalPs>(
      new LocalPs(std::move(options), std::move(logger)));
}

LocalPs::LocalPs(LocalPsOptions options, Logger logger)
    : options_(std::move(options)),
      logger_(std::move(logger)),
      created_(options_.clock()) {
  joined_.assign(options_.num_workers, false);
}

LocalPs::~LocalPs() {
  Close(absl::UnavailableError("the local parameter server is shutting down"));
}

// --- Join ---

absl::Status LocalPs::CheckJoin(const JoinRequest& request) const {
  const uint32_t w = request.worker_id;
  const RunConfig& config = request.config;
  if (w >= options_.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker_id ", w, " is not below --num_workers=", options_.num_workers,
        " of the LPS"));
  }
  if (config.mode != options_.mode) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", w, " runs --mode=", RunModeName(config.mode),
        ", but this LPS serves --mode=", RunModeName(options_.mode)));
  }
  if (config.num_workers != options_.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", w, " runs with num_workers=", config.num_workers,
        ", but the LPS was started with --num_workers=", options_.num_workers));
  }
  if (config.num_shards != 1 || request.shard_index != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", w, " knows ", config.num_shards,
        " shards: --mode=", RunModeName(options_.mode),
        " runs one LPS shard per data center (give the worker one --ps)"));
  }
  const kernels::CodecId want = options_.mode == RunMode::kGaia
                                    ? kernels::CodecId::kFp32
                                    : kernels::CodecId::kTernGrad;
  if (config.codec != want) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker ", w, " pushes ", kernels::CodecName(config.codec),
                     " gradients, but --mode=", RunModeName(options_.mode),
                     " takes ", kernels::CodecName(want)));
  }
  const OptimizerConfig& o = config.optimizer;
  if (!(std::isfinite(o.momentum) && o.momentum >= 0 && o.momentum < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", w, ": momentum ", o.momentum, " is not in [0, 1)"));
  }
  if (!(std::isfinite(o.weight_decay) && o.weight_decay >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker ", w, ": weight_decay ", o.weight_decay,
                     " is not a finite number >= 0"));
  }
  if (o.steps == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker ", w, ": the run has 0 steps"));
  }
  if (!std::isfinite(config.clip) || config.clip < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", w, ": clip ", config.clip, " is not a finite number >= 0"));
  }
  return absl::OkStatus();
}

absl::Status LocalPs::Configure(const JoinRequest& request) {
  const RunConfig& config = request.config;
  std::vector<uint64_t> elements;
  for (const TensorSpec& tensor : request.tensors) {
    uint64_t count = 1;
    for (const int64_t dim : tensor.shape) {
      if (dim < 0 || (dim != 0 && count > (1ull << 40) / dim)) {
        return absl::InvalidArgumentError(
            absl::StrCat("param spec: tensor '", tensor.name,
                         "' has a negative or too large shape"));
      }
      count *= static_cast<uint64_t>(dim);
    }
    elements.push_back(count);
  }
  absl::StatusOr<Partition> partition =
      Partition::Create(elements, config.partition_bytes, 1);
  if (!partition.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("partition: ", partition.status().message()));
  }
  const uint64_t bytes =
      Fp32MessageBytes(partition->total_elements(), partition->chunks().size());
  if (bytes > options_.max_message_bytes) {
    return absl::FailedPreconditionError(
        absl::StrCat("the model needs up to ", bytes,
                     " bytes per message in fp32, more "
                     "than --max_message_mb=",
                     options_.max_message_bytes >> 20));
  }
  std::vector<bool> fp32_chunk(partition->chunks().size(), false);
  for (const uint32_t key : config.fp32_chunk_keys) {
    if (key >= fp32_chunk.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("fp32 chunk key ", key, " is beyond the model's ",
                       fp32_chunk.size(), " chunks"));
    }
    fp32_chunk[key] = true;
  }
  absl::StatusOr<LrScheduleKind> kind =
      ParseLrScheduleKind(config.optimizer.lr_schedule);
  if (!kind.ok()) return kind.status();
  absl::StatusOr<LrSchedule> schedule = LrSchedule::Create(
      *kind, config.optimizer.lr, config.optimizer.steps,
      config.optimizer.lr_step_every, config.optimizer.lr_gamma);
  if (!schedule.ok()) return schedule.status();

  absl::StatusOr<std::unique_ptr<kernels::Codec>> fp32 = Fp32Codec();
  if (!fp32.ok()) return fp32.status();
  std::unique_ptr<kernels::Codec> gradient;
  if (options_.mode == RunMode::kWeightGrad) {
    absl::StatusOr<std::unique_ptr<kernels::Codec>> codec =
        kernels::MakeCodec(RunCodecOptions(config));
    if (!codec.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("run config: ", codec.status().message()));
    }
    gradient = *std::move(codec);
  }
  configured_ = true;
  first_worker_ = request.worker_id;
  config_ = config;
  tensors_ = request.tensors;
  spec_hash_ = request.param_spec_hash;
  initial_checksum_ = request.param_checksum;
  chunk_elements_.clear();
  for (const Chunk& chunk : partition->chunks()) {
    chunk_elements_.push_back(chunk.num_elements);
  }
  fp32_chunk_ = std::move(fp32_chunk);
  fp32_codec_ = *std::move(fp32);
  gradient_codec_ = std::move(gradient);
  return absl::OkStatus();
}

absl::Status LocalPs::CompareWithFirst(const JoinRequest& request) const {
  const RunConfig& a = request.config;
  const RunConfig& b = config_;
  const auto differs = [&](absl::string_view field, const auto& theirs,
                           const auto& ours) {
    return absl::FailedPreconditionError(
        absl::StrCat(field, " ", theirs, " of worker ", request.worker_id,
                     " differs from ", ours, " of worker ", first_worker_,
                     ": every worker must run with the same flags and model"));
  };
  if (a.run_id != b.run_id) return differs("run_id", a.run_id, b.run_id);
  if (a.seed != b.seed) return differs("seed", a.seed, b.seed);
  if (a.partition_bytes != b.partition_bytes) {
    return differs("partition_bytes", a.partition_bytes, b.partition_bytes);
  }
  if (a.push_layout != b.push_layout) {
    return differs("push layout", kernels::LayoutName(a.push_layout),
                   kernels::LayoutName(b.push_layout));
  }
  if (!(a.clip == b.clip)) return differs("clip", a.clip, b.clip);
  if (a.fp32_chunk_keys != b.fp32_chunk_keys) {
    return differs("fp32 chunk keys", absl::StrJoin(a.fp32_chunk_keys, ","),
                   absl::StrJoin(b.fp32_chunk_keys, ","));
  }
  const OptimizerConfig& p = a.optimizer;
  const OptimizerConfig& q = b.optimizer;
  if (!(p.lr == q.lr)) return differs("lr", p.lr, q.lr);
  if (!(p.momentum == q.momentum)) {
    return differs("momentum", p.momentum, q.momentum);
  }
  if (!(p.weight_decay == q.weight_decay)) {
    return differs("weight_decay", p.weight_decay, q.weight_decay);
  }
  if (p.lr_schedule != q.lr_schedule) {
    return differs("lr_schedule", p.lr_schedule, q.lr_schedule);
  }
  if (p.lr_step_every != q.lr_step_every) {
    return differs("lr_step_every", p.lr_step_every, q.lr_step_every);
  }
  if (!(p.lr_gamma == q.lr_gamma)) {
    return differs("lr_gamma", p.lr_gamma, q.lr_gamma);
  }
  if (p.steps != q.steps) return differs("steps", p.steps, q.steps);
  if (request.param_spec_hash != spec_hash_) {
    return differs("param spec hash", FormatChecksum(request.param_spec_hash),
                   FormatChecksum(spec_hash_));
  }
  if (request.param_checksum != initial_checksum_) {
    return differs("initial parameter checksum",
                   FormatChecksum(request.param_checksum),
                   FormatChecksum(initial_checksum_));
  }
  return absl::OkStatus();
}

absl::Status LocalPs::StartState(const JoinRequest& request) {
  const size_t num_chunks = chunk_elements_.size();
  if (request.initial_weights.size() != num_chunks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker 0 sent the initial weights of ", request.initial_weights.size(),
        " chunks; the model has ", num_chunks));
  }
  std::vector<LpsChunk> chunks;
  for (uint32_t key = 0; key < num_chunks; ++key) {
    const ChunkPayload& chunk = request.initial_weights[key];
    if (chunk.chunk_key != key ||
        chunk.payload.codec != kernels::CodecId::kFp32 ||
        chunk.payload.layout != kernels::Layout::kRaw) {
      return absl::InvalidArgumentError(absl::StrCat(
          "initial weights: entry ", key, " (chunk ", chunk.chunk_key,
          ", codec ", kernels::CodecName(chunk.payload.codec),
          ") is not chunk ", key, " in fp32 RAW"));
    }
    if (chunk.payload.num_elements != chunk_elements_[key]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "initial weights of chunk ", key, ": ", chunk.payload.num_elements,
          " elements, want ", chunk_elements_[key]));
    }
    LpsChunk weights{key, std::vector<float>(chunk_elements_[key])};
    absl::Status decoded =
        fp32_codec_->Decode(chunk.payload, absl::MakeSpan(weights.weights));
    if (!decoded.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "initial weights of chunk ", key, ": ", decoded.message()));
    }
    chunks.push_back(std::move(weights));
  }
  LpsStateOptions state_options;
  state_options.num_workers = options_.num_workers;
  state_options.momentum = static_cast<float>(config_.optimizer.momentum);
  state_options.weight_decay =
      static_cast<float>(config_.optimizer.weight_decay);
  state_options.weight_codec = options_.weight_codec;
  if (config_.push_layout == kernels::Layout::kTernaryBase3) {
    state_options.ternary_layout = kernels::Layout::kTernaryBase3;
  }
  state_options.max_lead_steps = kMaxLead;
  absl::StatusOr<LrScheduleKind> kind =
      ParseLrScheduleKind(config_.optimizer.lr_schedule);
  absl::StatusOr<LrSchedule> schedule = LrSchedule::Create(
      *kind, config_.optimizer.lr, config_.optimizer.steps,
      config_.optimizer.lr_step_every, config_.optimizer.lr_gamma);
  absl::StatusOr<std::unique_ptr<LpsState>> state =
      LpsState::Create(state_options, *schedule, std::move(chunks));
  if (!state.ok()) return state.status();
  if ((*state)->Checksum() != request.param_checksum) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker 0's initial weights have checksum ",
                     FormatChecksum((*state)->Checksum()), ", but it reports ",
                     FormatChecksum(request.param_checksum)));
  }
  SynchronizerOptions sync_options;
  sync_options.mode =
      options_.mode == RunMode::kGaia ? SyncMode::kGaia : SyncMode::kTernary;
  sync_options.sync_every = options_.sync_every;
  sync_options.g_thresh = options_.g_thresh;
  sync_options.seed = config_.seed;
  sync_options.sync_timeout = options_.sync_timeout;
  sync_options.clock = options_.clock;
  absl::StatusOr<std::unique_ptr<GradientSynchronizer>> sync =
      GradientSynchronizer::Create(sync_options, state->get());
  if (!sync.ok()) return sync.status();
  state_ = *std::move(state);
  sync_ = *std::move(sync);
  logger_->info(
      "model of {} parameters in {} chunks, from worker 0; weights in {}, "
      "lr {} momentum {} weight decay {} schedule {}, {} steps, checksum {}",
      state_->total_elements(), chunk_elements_.size(),
      kernels::CodecName(options_.weight_codec), config_.optimizer.lr,
      config_.optimizer.momentum, config_.optimizer.weight_decay,
      config_.optimizer.lr_schedule, config_.optimizer.steps,
      FormatChecksum(state_->Checksum()));
  return absl::OkStatus();
}

void LocalPs::Join(const JoinRequest& request, Callback<JoinReply> done) {
  Deferred deferred;
  absl::MutexLock lock(&mu_);
  const uint32_t w = request.worker_id;
  auto refuse = [&](absl::Status status) {
    logger_->warn("join of worker {} refused: {}", w,
                  std::string(status.message()));
    deferred.Answer<JoinReply>(std::move(done), std::move(status));
  };
  if (!closed_.ok()) return refuse(closed_);
  if (!failed_.ok()) return refuse(failed_);
  if (absl::Status status = CheckJoin(request); !status.ok()) {
    return refuse(status);
  }
  const bool configures = !configured_;
  if (configures) {
    if (absl::Status status = Configure(request); !status.ok()) {
      return refuse(status);
    }
  } else if (absl::Status status = CompareWithFirst(request); !status.ok()) {
    return refuse(status);
  }
  if (w == 0 && state_ == nullptr) {
    if (absl::Status status = StartState(request); !status.ok()) {
      // A refused join fixes nothing.
      if (configures) configured_ = false;
      return refuse(status);
    }
  }
  if (!joined_[w]) {
    joined_[w] = true;
    ++num_joined_;
    logger_->info("worker {} joined ({} of {})", w, num_joined_,
                  options_.num_workers);
  }
  const auto reply = [&] {
    JoinReply answer;
    // A worker that joins a run already under way (a restart) is told
    // where it is; it has no checkpoint and stops (worker/trainer.h).
    answer.next_step = state_ != nullptr ? state_->completed_steps() : 0;
    for (uint32_t key = 0; key < chunk_elements_.size(); ++key) {
      answer.chunk_keys.push_back(key);
    }
    return answer;
  };
  join_waiters_.push_back(
      JoinWaiter{w, options_.clock() + options_.join_timeout, std::move(done)});
  if (num_joined_ == options_.num_workers && state_ != nullptr) {
    for (JoinWaiter& waiter : join_waiters_) {
      deferred.Answer<JoinReply>(std::move(waiter.done), reply());
    }
    join_waiters_.clear();
  }
}

// --- PushPull ---

absl::Status LocalPs::CheckWorker(uint32_t worker) const {
  if (!closed_.ok()) return closed_;
  if (!failed_.ok()) return failed_;
  if (worker >= options_.num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown worker ", worker, ": the LPS serves workers 0..",
                     options_.num_workers - 1));
  }
  if (!joined_[worker] || state_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", worker, " has not joined (Join comes first)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> LocalPs::Apply(const PushRequest& request) {
  const uint32_t w = request.worker_id;
  const uint64_t step = request.step;
  const size_t num_chunks = chunk_elements_.size();
  if (request.chunks.size() != num_chunks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step ", step, ": worker ", w, " pushed ", request.chunks.size(),
        " chunks; the LPS owns ", num_chunks));
  }
  // Decode everything first: nothing is applied unless every chunk is valid.
  std::vector<std::vector<float>> gradients(num_chunks);
  for (uint32_t key = 0; key < num_chunks; ++key) {
    const ChunkPayload& chunk = request.chunks[key];
    auto invalid = [&](const std::string& what) {
      return absl::InvalidArgumentError(
          absl::StrCat("step ", step, ": chunk ", chunk.chunk_key,
                       " of worker ", w, ": ", what));
    };
    if (chunk.chunk_key != key) {
      return invalid(absl::StrCat("expected chunk ", key,
                                  " here (chunks in key order, each once)"));
    }
    const bool fp32 = gradient_codec_ == nullptr || fp32_chunk_[key];
    const kernels::Codec& codec = fp32 ? *fp32_codec_ : *gradient_codec_;
    core::PayloadExpectation expect;
    expect.codec = fp32 ? kernels::CodecId::kFp32 : kernels::CodecId::kTernGrad;
    expect.num_elements = chunk_elements_[key];
    expect.reader = "this LPS";
    gradients[key].resize(chunk_elements_[key]);
    // Header first (codec, format version, size, summands, scalers), then
    // the bytes, decoded once; a NaN/Inf gradient is refused here, before
    // any chunk of the push is applied.
    absl::Status valid = core::ValidatePayload(chunk.payload, expect);
    if (valid.ok()) {
      valid = core::DecodeFinite(codec, chunk.payload,
                                 absl::MakeSpan(gradients[key]));
    }
    if (!valid.ok()) return invalid(std::string(valid.message()));
  }
  bool retry = false;
  for (uint32_t key = 0; key < num_chunks; ++key) {
    absl::StatusOr<ApplyResult> result =
        sync_->ApplyGradient(w, step, key, gradients[key]);
    if (absl::IsAlreadyExists(result.status())) {
      retry = true;  // a retry: the push was applied before, all of it
      continue;
    }
    if (!result.ok()) return result.status();
    if (result->step_completed) {
      if (absl::Status status = OnStepCompleted(); !status.ok()) return status;
    }
  }
  return retry;
}

absl::Status LocalPs::OnStepCompleted() {
  const uint64_t completed = state_->completed_steps();
  const uint64_t steps = config_.optimizer.steps;
  if (completed >= steps) {
    if (final_ != Final::kTraining) return absl::OkStatus();
    if (!options_.global) {
      final_ = Final::kDone;
      logger_->info("step {} of {}: done (no global server), checksum {}",
                    completed, steps, FormatChecksum(state_->Checksum()));
    } else {
      final_ = Final::kDue;
      logger_->info("step {} of {}: final synchronization due", completed,
                    steps);
    }
    return absl::OkStatus();
  }
  if (!options_.global || !sync_->RoundDue()) return absl::OkStatus();
  absl::StatusOr<SyncRound> round = sync_->BuildRound(sync_->next_round());
  if (!round.ok()) {
    return absl::InternalError(
        absl::StrCat("building a round: ", round.status().message()));
  }
  to_send_.push_back(*std::move(round));
  return absl::OkStatus();
}

bool LocalPs::CanAnswer(uint64_t step, absl::Time now) const {
  if (options_.global && sync_->MustHold(now)) return false;
  if (step + 1 >= config_.optimizer.steps) return final_ == Final::kDone;
  // The worker's next push, step + 1, must be within the lead.
  return step + 1 <= state_->completed_steps() + kMaxLead;
}

absl::StatusOr<PushAnswer> LocalPs::Answer(uint32_t worker, uint64_t step,
                                           bool fp32_weights) const {
  auto reply = std::make_shared<PushReply>();
  reply->step = step;
  // The last step's answer is the final model itself, in fp32: every
  // worker leaves with the weights every data center ends with, and its
  // own checksum equals the LPS's.
  const bool last = step + 1 >= config_.optimizer.steps;
  for (const uint32_t key : state_->chunk_keys()) {
    const RandomStream stream{config_.seed, static_cast<uint32_t>(step), key,
                              kWeightStreamBit | worker};
    absl::StatusOr<kernels::Payload> payload =
        last || fp32_weights
            ? fp32_codec_->Encode(*state_->Weights(key),
                                  kernels::EncodeContext())
            : state_->QuantizedWeights(key, stream);
    if (!payload.ok()) return payload.status();
    reply->chunks.push_back(ChunkPayload{key, *std::move(payload)});
  }
  if (last) reply->param_checksum = state_->Checksum();
  return PushAnswer(std::move(reply));
}

void LocalPs::Release(absl::Time now, Deferred* deferred) {
  if (state_ == nullptr) return;
  const bool gs_hold = options_.global && sync_->MustHold(now);
  if (gs_hold != holding_) {
    holding_ = gs_hold;
    if (gs_hold) {
      logger_->warn(
          "holding the workers: {} has not answered round {} for {} "
          "(--sync_timeout_s)",
          options_.global_name, sync_->next_round() - sync_->rounds_waiting(),
          Seconds(options_.sync_timeout));
    } else {
      logger_->info("the global server answered: releasing the workers");
    }
  }
  std::vector<PushWaiter> kept;
  for (PushWaiter& waiter : push_waiters_) {
    if (CanAnswer(waiter.step, now)) {
      deferred->Answer<PushAnswer>(std::move(waiter.done),
                                   Answer(waiter.worker, waiter.step,
                                          waiter.fp32_weights));
    } else if (waiter.deadline <= now) {
      const bool for_gs =
          gs_hold || (waiter.step + 1 >= config_.optimizer.steps &&
                      final_ != Final::kTraining);
      absl::Status status =
          for_gs ? absl::UnavailableError(absl::StrCat(
                       "step ", waiter.step, " of worker ", waiter.worker,
                       " held for ", Seconds(options_.hold_limit), ": ",
                       options_.global_name, " has not answered (",
                       sync_->rounds_waiting(),
                       " round(s) wait for an answer; --barrier_timeout_s)"))
                 : absl::DeadlineExceededError(absl::StrCat(
                       "step ", waiter.step, " of worker ", waiter.worker,
                       " waited ", Seconds(options_.hold_limit),
                       " for local step ", state_->completed_steps(),
                       " to complete: some worker did not push it"));
      logger_->warn("{}", std::string(status.message()));
      deferred->Answer<PushAnswer>(std::move(waiter.done), std::move(status));
    } else {
      kept.push_back(std::move(waiter));
    }
  }
  push_waiters_ = std::move(kept);
}

void LocalPs::PushPull(const PushRequest& request, Callback<PushAnswer> done) {
  Deferred deferred;
  absl::MutexLock lock(&mu_);
  const uint32_t w = request.worker_id;
  auto refuse = [&](absl::Status status) {
    logger_->warn("push of worker {} for step {} refused: {}", w, request.step,
                  std::string(status.message()));
    deferred.Answer<PushAnswer>(std::move(done), std::move(status));
  };
  if (absl::Status status = CheckWorker(w); !status.ok()) {
    return refuse(status);
  }
  if (request.step >= config_.optimizer.steps) {
    return refuse(absl::FailedPreconditionError(
        absl::StrCat("step ", request.step, " is beyond the run's ",
                     config_.optimizer.steps, " steps")));
  }
  absl::StatusOr<bool> applied = Apply(request);
  if (!applied.ok()) {
    if (absl::IsInternal(applied.status())) {
      failed_ = applied.status();
      logger_->error("run failed: {}", std::string(failed_.message()));
      AnswerAll(failed_, &deferred);
    }
    return refuse(applied.status());
  }
  const absl::Time now = options_.clock();
  push_waiters_.push_back(
      PushWaiter{w, request.step, request.fp32_weights,
                 now + options_.hold_limit, std::move(done)});
  Release(now, &deferred);
}

// --- the synchronizer client's side ---

absl::StatusOr<std::optional<GsRegistration>> LocalPs::WaitForRegistration(
    absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return state_ != nullptr || !closed_.ok() || !failed_.ok();
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (!closed_.ok()) return closed_;
  if (!failed_.ok()) return failed_;
  if (state_ == nullptr) return std::nullopt;
  GsRegistration registration;
  registration.param_spec_hash = spec_hash_;
  registration.param_checksum = initial_checksum_;
  registration.chunk_elements = chunk_elements_;
  if (options_.mode == RunMode::kGaia) {
    registration.update_codec = kernels::CodecId::kFp32;
    registration.update_layout = kernels::Layout::kRaw;
  }
  return registration;
}

absl::Status LocalPs::CheckFirstRound(uint64_t next_round) const {
  if (next_round != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        options_.global_name, " expects round ", next_round,
        " from this data center, but this LPS starts fresh at round 0 and has "
        "no checkpoint to resume from; restart the global server or use "
        "another run"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<SyncRound>> LocalPs::NextRound(
    absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !to_send_.empty() || final_ == Final::kDone ||
           (final_ == Final::kDue && sync_->rounds_waiting() == 0) ||
           !closed_.ok() || !failed_.ok();
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (!closed_.ok()) return closed_;
  if (!failed_.ok()) return failed_;
  if (!to_send_.empty()) {
    SyncRound round = std::move(to_send_.front());
    to_send_.pop_front();
    return std::optional<SyncRound>(std::move(round));
  }
  if (final_ == Final::kDue && sync_->rounds_waiting() == 0) {
    absl::StatusOr<SyncRound> round =
        sync_->BuildFinalRound(sync_->next_round());
    if (!round.ok()) return round.status();
    final_ = Final::kSent;
    final_round_ = round->round;
    return std::optional<SyncRound>(*std::move(round));
  }
  if (final_ == Final::kDone) {
    return absl::CancelledError("the final synchronization is done");
  }
  return std::optional<SyncRound>();
}

absl::Status LocalPs::ApplyRoundAnswer(const SyncRound& sent,
                                       const GsAnswer& answer,
                                       absl::Duration took) {
  Deferred deferred;
  absl::MutexLock lock(&mu_);
  if (answer.round != sent.round) {
    return absl::InternalError(absl::StrCat(options_.global_name,
                                            " answered round ", answer.round,
                                            " to round ", sent.round));
  }
  if (absl::Status status = sync_->ApplyAnswer(sent.round, answer.average);
      !status.ok()) {
    return status;
  }
  const uint64_t up = PayloadBytes(sent.updates);
  const uint64_t down = PayloadBytes(answer.average);
  bytes_up_ += up;
  bytes_down_ += down;
  const bool final = final_ == Final::kSent && sent.round == final_round_;
  logger_->info(
      "round {}{} at step {}: sent {} of {} chunks, {} B up, {} B down, "
      "g_thresh {:.4g}, lagging [{}], {} round(s) queued, {:.3f}s, checksum {}",
      sent.round, final ? " (final, fp32)" : "", sent.local_step,
      sent.updates.size(), sent.decisions.size(), up, down, sent.g_thresh,
      absl::StrJoin(answer.lagging, ","), to_send_.size(),
      absl::ToDoubleSeconds(took), FormatChecksum(state_->Checksum()));
  if (final) {
    final_ = Final::kDone;
    logger_->info(
        "final synchronization done after {} rounds: {} B up, {} B down in "
        "all; final checksum {}",
        sent.round + 1, bytes_up_, bytes_down_,
        FormatChecksum(state_->Checksum()));
  }
  Release(options_.clock(), &deferred);
  return absl::OkStatus();
}

// --- expiry and shutdown ---

absl::Status LocalPs::ExpireWaits(absl::Time now) {
  Deferred deferred;
  absl::MutexLock lock(&mu_);
  if (!closed_.ok()) return absl::OkStatus();
  std::vector<JoinWaiter> kept;
  for (JoinWaiter& waiter : join_waiters_) {
    if (waiter.deadline <= now) {
      deferred.Answer<JoinReply>(
          std::move(waiter.done),
          absl::DeadlineExceededError(absl::StrCat(
              "only ", num_joined_, " of ", options_.num_workers,
              " workers joined within --join_timeout_s",
              state_ == nullptr ? " (worker 0, with the weights, is missing)"
                                : "")));
    } else {
      kept.push_back(std::move(waiter));
    }
  }
  join_waiters_ = std::move(kept);
  Release(now, &deferred);
  if (num_joined_ < options_.num_workers &&
      now - created_ >= options_.join_timeout) {
    return absl::DeadlineExceededError(
        absl::StrCat("only ", num_joined_, " of ", options_.num_workers,
                     " workers joined within ", Seconds(options_.join_timeout),
                     " (--join_timeout_s)"));
  }
  return failed_;
}

void LocalPs::AnswerAll(const absl::Status& status, Deferred* deferred) {
  for (JoinWaiter& waiter : join_waiters_) {
    deferred->Answer<JoinReply>(std::move(waiter.done), status);
  }
  for (PushWaiter& waiter : push_waiters_) {
    deferred->Answer<PushAnswer>(std::move(waiter.done), status);
  }
  join_waiters_.clear();
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
