// The LPS's join barrier and the run config the first join fixes: the
// checks of one join, the comparison of later joins with the first, the
// state built from worker 0's weights, and the barrier itself (a
// core::ArrivalSet, and a core::WaiterList whose calls wait at most the
// barrier timeout, hold_limit; server/WEIGHTGRAD.md).
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/checksum.h"
#include "common/lr_schedule.h"
#include "common/partitioner.h"
#include "core/join_check.h"
#include "kernels/codec_registry.h"
#include "server/local_ps.h"
#include "server/model_cut.h"

namespace tern::server {
namespace {

// Why later joiners must match the first: the flags, and the model.
constexpr absl::string_view kSameRun =
    "every worker must run with the same flags and model";

absl::StatusOr<std::unique_ptr<kernels::Codec>> Fp32Codec() {
  kernels::CodecOptions options;
  options.id = kernels::CodecId::kFp32;
  options.push_layout = kernels::Layout::kRaw;
  options.pull_layout = kernels::Layout::kRaw;
  return kernels::MakeCodec(options);
}

// Worker 0's initial weights, chunk by chunk, decoded from fp32 RAW.
absl::StatusOr<std::vector<LpsChunk>> DecodeInitialWeights(
    const std::vector<ChunkPayload>& initial,
    const std::vector<uint64_t>& chunk_elements, const kernels::Codec& fp32) {
  const size_t num_chunks = chunk_elements.size();
  if (initial.size() != num_chunks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker 0 sent the initial weights of ", initial.size(),
        " chunks; the model has ", num_chunks));
  }
  std::vector<LpsChunk> chunks;
  for (uint32_t key = 0; key < num_chunks; ++key) {
    const ChunkPayload& chunk = initial[key];
    if (chunk.chunk_key != key ||
        chunk.payload.codec != kernels::CodecId::kFp32 ||
        chunk.payload.layout != kernels::Layout::kRaw) {
      return absl::InvalidArgumentError(absl::StrCat(
          "initial weights: entry ", key, " (chunk ", chunk.chunk_key,
          ", codec ", kernels::CodecName(chunk.payload.codec),
          ") is not chunk ", key, " in fp32 RAW"));
    }
    if (chunk.payload.num_elements != chunk_elements[key]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "initial weights of chunk ", key, ": ", chunk.payload.num_elements,
          " elements, want ", chunk_elements[key]));
    }
    LpsChunk weights{key, std::vector<float>(chunk_elements[key])};
    absl::Status decoded =
        fp32.Decode(chunk.payload, absl::MakeSpan(weights.weights));
    if (!decoded.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "initial weights of chunk ", key, ": ", decoded.message()));
    }
    chunks.push_back(std::move(weights));
  }
  return chunks;
}

}  // namespace

absl::StatusOr<LrSchedule> RunSchedule(const RunConfig& config) {
  absl::StatusOr<LrScheduleKind> kind =
      ParseLrScheduleKind(config.optimizer.lr_schedule);
  if (!kind.ok()) return kind.status();
  return LrSchedule::Create(*kind, config.optimizer.lr, config.optimizer.steps,
                            config.optimizer.lr_step_every,
                            config.optimizer.lr_gamma);
}

absl::Status LocalPs::CheckJoin(const JoinRequest& request) const {
  const uint32_t w = request.worker_id;
  const RunConfig& config = request.config;
  if (!options_.run_id.empty() && config.run_id != options_.run_id) {
    // Not named: the caller need not learn which run this LPS serves.
    return absl::PermissionDeniedError(absl::StrCat(
        "worker ", w, " joins another run than the one the LPS serves "
        "(tern ps --run_id)"));
  }
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
  // The LPS is its data center's one shard.
  absl::StatusOr<Partition> partition = CutModel(
      request, ModelLimits{1, options_.max_message_bytes,
                           "raise --max_message_mb of the LPS or a larger "
                           "--partition_bytes"});
  if (!partition.ok()) return partition.status();
  std::vector<bool> fp32_chunk(partition->chunks().size(), false);
  for (const uint32_t key : config.fp32_chunk_keys) {
    if (key >= fp32_chunk.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("fp32 chunk key ", key, " is beyond the model's ",
                       fp32_chunk.size(), " chunks"));
    }
    fp32_chunk[key] = true;
  }
  if (absl::StatusOr<LrSchedule> schedule = RunSchedule(config);
      !schedule.ok()) {
    return schedule.status();
  }

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
  const OptimizerConfig& p = a.optimizer;
  const OptimizerConfig& q = b.optimizer;
  core::JoinComparison compare(absl::StrCat("worker ", request.worker_id),
                               absl::StrCat("worker ", first_worker_));
  compare.Field("run_id", a.run_id, b.run_id, kSameRun)
      .Field("seed", a.seed, b.seed, kSameRun)
      .Field("partition_bytes", a.partition_bytes, b.partition_bytes,
             kSameRun)
      .Texts(a.push_layout == b.push_layout, "push layout",
             kernels::LayoutName(a.push_layout),
             kernels::LayoutName(b.push_layout), kSameRun)
      .Field("clip", a.clip, b.clip, kSameRun)
      .Texts(a.fp32_chunk_keys == b.fp32_chunk_keys, "fp32 chunk keys",
             absl::StrJoin(a.fp32_chunk_keys, ","),
             absl::StrJoin(b.fp32_chunk_keys, ","), kSameRun)
      .Field("lr", p.lr, q.lr, kSameRun)
      .Field("momentum", p.momentum, q.momentum, kSameRun)
      .Field("weight_decay", p.weight_decay, q.weight_decay, kSameRun)
      .Field("lr_schedule", p.lr_schedule, q.lr_schedule, kSameRun)
      .Field("lr_step_every", p.lr_step_every, q.lr_step_every, kSameRun)
      .Field("lr_gamma", p.lr_gamma, q.lr_gamma, kSameRun)
      .Field("steps", p.steps, q.steps, kSameRun)
      .Field("steps_per_epoch", p.steps_per_epoch, q.steps_per_epoch, kSameRun)
      .Texts(request.param_spec_hash == spec_hash_, "param spec hash",
             FormatChecksum(request.param_spec_hash),
             FormatChecksum(spec_hash_), kSameRun)
      .Texts(request.param_checksum == initial_checksum_,
             "initial parameter checksum",
             FormatChecksum(request.param_checksum),
             FormatChecksum(initial_checksum_), kSameRun);
  return compare.status();
}

LpsStateOptions LocalPs::StateOptions() const {
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
  return state_options;
}

SynchronizerOptions LocalPs::SyncOptions() const {
  SynchronizerOptions sync_options;
  sync_options.mode =
      options_.mode == RunMode::kGaia ? SyncMode::kGaia : SyncMode::kTernary;
  sync_options.sync_every = options_.sync_every;
  sync_options.g_thresh = options_.g_thresh;
  // The flag wins; else the workers' data set and batch.
  sync_options.steps_per_epoch = options_.steps_per_epoch > 0
                                     ? options_.steps_per_epoch
                                     : config_.optimizer.steps_per_epoch;
  sync_options.seed = config_.seed;
  sync_options.sync_timeout = options_.sync_timeout;
  sync_options.clock = options_.clock;
  return sync_options;
}

absl::Status LocalPs::StartState(const JoinRequest& request) {
  absl::StatusOr<std::vector<LpsChunk>> chunks = DecodeInitialWeights(
      request.initial_weights, chunk_elements_, *fp32_codec_);
  if (!chunks.ok()) return chunks.status();
  // Configure checked the schedule.
  absl::StatusOr<std::unique_ptr<LpsState>> state = LpsState::Create(
      StateOptions(), *RunSchedule(config_), *std::move(chunks));
  if (!state.ok()) return state.status();
  if ((*state)->Checksum() != request.param_checksum) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker 0's initial weights have checksum ",
                     FormatChecksum((*state)->Checksum()), ", but it reports ",
                     FormatChecksum(request.param_checksum)));
  }
  const SynchronizerOptions sync_options = SyncOptions();
  absl::StatusOr<std::unique_ptr<GradientSynchronizer>> sync =
      GradientSynchronizer::Create(sync_options, state->get());
  if (!sync.ok()) return sync.status();
  state_ = *std::move(state);
  sync_ = *std::move(sync);
  if (options_.mode == RunMode::kWeightGrad && !options_.g_thresh) {
    if (sync_options.steps_per_epoch > 0) {
      logger_->info(
          "dynamic g_thresh: rescaled every {} local steps (one epoch, {})",
          sync_options.steps_per_epoch,
          options_.steps_per_epoch > 0 ? "--steps_per_epoch"
                                       : "from the workers' data and batch");
    } else {
      logger_->warn(
          "dynamic g_thresh: never rescaled (the workers' join does not say "
          "how many steps an epoch has, and --steps_per_epoch is 0)");
    }
  }
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

void LocalPs::Join(const JoinRequest& request, core::Callback<JoinReply> done) {
  Deferred deferred;
  absl::MutexLock lock(&mu_);
  const uint32_t w = request.worker_id;
  auto refuse = [&](absl::Status status) {
    LogRefusal(w, "join", status, "join of worker {} refused: {}", w,
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
  if (resumed_at_.has_value()) {
    // A resumed run has no join barrier: each worker goes on from its own
    // next step as soon as it is back.
    absl::StatusOr<JoinReply> answer = RejoinAnswer(w);
    if (!answer.ok()) return refuse(answer.status());
    joined_.Arrive(w);
    logger_->info("worker {} rejoined at step {} ({} of {} back)", w,
                  answer->next_step, joined_.count(), options_.num_workers);
    return deferred.Answer<JoinReply>(std::move(done), std::move(answer));
  }
  if (joined_.Arrive(w)) {
    logger_->info("worker {} joined ({} of {})", w, joined_.count(),
                  options_.num_workers);
  }
  // The core's expiry rule: this call waits at most the barrier timeout;
  // the worker retries a join that expired, within its own join budget.
  if (!join_waiters_.Add(
          w, core::WaitDeadline(options_.clock(), options_.hold_limit),
          done)) {
    return refuse(core::TooManyWaitsError(absl::StrCat("worker ", w),
                                          "the join"));
  }
  if (joined_.complete() && state_ != nullptr) {
    join_waiters_.AnswerAll(JoinAnswer(), &deferred);
  }
}

JoinReply LocalPs::JoinAnswer() const {
  JoinReply answer;
  // A worker that joins a run already under way (a restart) is told where
  // it is; it has no checkpoint and stops (worker/trainer.h).
  answer.next_step = state_ != nullptr ? state_->completed_steps() : 0;
  for (uint32_t key = 0; key < chunk_elements_.size(); ++key) {
    answer.chunk_keys.push_back(key);
  }
  return answer;
}

void LocalPs::ExpireJoins(absl::Time now, Deferred* deferred) {
  std::string message;
  const size_t expired = join_waiters_.Expire(
      now,
      [&] {
        mu_.AssertHeld();  // Expire calls it here, under the lock
        message = absl::StrCat(
            joined_.Missing(), " did not join the LPS within ",
            Seconds(options_.hold_limit), " (--barrier_timeout_s; only ",
            joined_.count(), " of ", options_.num_workers, " workers joined",
            state_ == nullptr ? ", and worker 0, with the weights, is missing"
                              : "",
            ")");
        return absl::DeadlineExceededError(message);
      },
      deferred);
  if (expired > 0) {
    logger_->warn("{} ({} pending join(s) answered)", message, expired);
  }
}

}  // namespace tern::server
