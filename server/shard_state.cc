#include "server/shard_state.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/float_bytes.h"
#include "common/framed_file.h"
#include "server/wire.h"

namespace tern::server {
namespace {

FramedFileOptions Frame(bool sync) {
  return FramedFileOptions{"TERNSHD1", "shard state", sync};
}

// FAILED_PRECONDITION when `state` was written with other flags.
absl::Status CheckFlags(const tern::v1::ShardState& state,
                        const ShardLimits& limits, const std::string& path) {
  auto differs = [&](absl::string_view flag, uint64_t theirs, uint64_t ours) {
    return absl::FailedPreconditionError(
        absl::StrCat("shard state '", path, "' was written with --", flag, "=",
                     theirs, ", but this shard runs with --", flag, "=", ours,
                     ": restart with the flags that wrote it, or give another "
                     "--state_dir"));
  };
  if (state.shard_index() != limits.shard_index) {
    return differs("shard_index", state.shard_index(), limits.shard_index);
  }
  if (state.num_shards() != limits.num_shards) {
    return differs("num_shards", state.num_shards(), limits.num_shards);
  }
  if (state.num_workers() != limits.num_workers) {
    return differs("num_workers", state.num_workers(), limits.num_workers);
  }
  return absl::OkStatus();
}

absl::StatusOr<ShardSnapshot> SnapshotOf(const tern::v1::ShardState& state,
                                         const std::string& path) {
  auto damaged = [&](const absl::Status& status) {
    return absl::DataLossError(
        absl::StrCat("shard state '", path, "': ", status.message()));
  };
  ShardSnapshot snapshot;
  absl::StatusOr<JoinRequest> join = JoinFromWire(state.first_join());
  if (!join.ok()) return damaged(join.status());
  snapshot.first_join = *std::move(join);
  snapshot.open_step = state.open_step();
  if (state.has_last_answer()) {
    absl::StatusOr<PushReply> answer = PushReplyFromWire(state.last_answer());
    if (!answer.ok()) return damaged(answer.status());
    snapshot.last_answer = std::make_shared<PushReply>(*std::move(answer));
  }
  if (state.has_last_scalers()) {
    snapshot.last_scalers = std::make_shared<ScalerReply>(
        ScalerReplyFromWire(state.last_scalers()));
  }
  if (state.has_open_scalers()) {
    snapshot.open_scalers = std::make_shared<ScalerReply>(
        ScalerReplyFromWire(state.open_scalers()));
  }
  for (const tern::v1::ChunkResidual& residual : state.residuals()) {
    std::optional<std::vector<float>> values =
        FloatsFromBytes(residual.values());
    if (!values.has_value()) {
      return damaged(absl::InvalidArgumentError(
          absl::StrCat("the residual of chunk ", residual.chunk_key(),
                       " is not a whole number of floats")));
    }
    snapshot.residuals[residual.chunk_key()] = *std::move(values);
  }
  for (const tern::v1::StepChecksum& check : state.checks()) {
    snapshot.checks[check.step()] = {check.worker_id(), check.checksum()};
  }
  for (const tern::v1::DroppedWorker& dropped : state.dropped()) {
    if (dropped.worker_id() >= state.num_workers()) {
      return damaged(absl::InvalidArgumentError(
          absl::StrCat("dropped worker ", dropped.worker_id(), " is not below ",
                       state.num_workers(), " workers")));
    }
    snapshot.dropped[dropped.worker_id()] = dropped.step();
  }
  return snapshot;
}

}  // namespace

std::string ShardStatePath(absl::string_view dir, uint32_t shard_index) {
  return absl::StrCat(dir, dir.empty() || dir.back() == '/' ? "" : "/",
                      "shard-", shard_index, ".state");
}

ShardStateWriter::ShardStateWriter(std::string path, const ShardLimits& limits,
                                   bool sync)
    : path_(std::move(path)), sync_(sync) {
  state_.set_format_version(kShardStateFormatVersion);
  state_.set_shard_index(limits.shard_index);
  state_.set_num_shards(limits.num_shards);
  state_.set_num_workers(limits.num_workers);
}

absl::Status ShardStateWriter::RunConfigured(const JoinRequest& first) {
  JoinToWire(first, state_.mutable_first_join());
  state_.set_open_step(0);
  return Write();
}

absl::Status ShardStateWriter::ScalersShared(const ScalerReply& shared) {
  ScalersToWire(shared, state_.mutable_open_scalers());
  return Write();
}

absl::Status ShardStateWriter::WorkerDropped(uint32_t worker, uint64_t step) {
  tern::v1::DroppedWorker* dropped = state_.add_dropped();
  dropped->set_worker_id(worker);
  dropped->set_step(step);
  return Write();
}

void ShardStateWriter::WorkerReadmitted(uint32_t worker) {
  auto* dropped = state_.mutable_dropped();
  for (int i = 0; i < dropped->size(); ++i) {
    if (dropped->Get(i).worker_id() == worker) {
      dropped->DeleteSubrange(i, 1);
      return;
    }
  }
}

absl::Status ShardStateWriter::StepCompleted(const PushReply& answer,
                                             const ShardRun& run,
                                             const StepChecks& checks) {
  state_.set_open_step(answer.step + 1);
  state_.clear_last_answer();
  PushToWire(answer, state_.mutable_last_answer());
  // The open step's scalers are now the completed step's.
  if (state_.has_open_scalers()) {
    state_.mutable_last_scalers()->Swap(state_.mutable_open_scalers());
  } else {
    state_.clear_last_scalers();
  }
  state_.clear_open_scalers();
  state_.clear_residuals();
  for (const auto& chunk : run.chunks) {
    if (!chunk->codec->UsesErrorFeedback()) continue;
    absl::MutexLock lock(&chunk->mu);
    tern::v1::ChunkResidual* residual = state_.add_residuals();
    residual->set_chunk_key(chunk->key);
    residual->set_values(FloatBytes(chunk->residual));
  }
  state_.clear_checks();
  for (const auto& [step, check] : checks) {
    tern::v1::StepChecksum* entry = state_.add_checks();
    entry->set_step(step);
    entry->set_worker_id(check.first);
    entry->set_checksum(check.second);
  }
  return Write();
}

absl::Status ShardStateWriter::Write() {
  std::string message;
  if (!state_.SerializeToString(&message)) {
    return absl::InternalError(absl::StrCat(
        "shard state: cannot serialize the state for '", path_, "'"));
  }
  return WriteFramedFile(path_, message, Frame(sync_));
}

absl::StatusOr<std::optional<ShardSnapshot>> ReadShardState(
    const std::string& path, const ShardLimits& limits,
    tern::v1::ShardState* raw) {
  absl::StatusOr<std::string> message = ReadFramedFile(path, Frame(false));
  if (absl::IsNotFound(message.status())) return std::nullopt;
  if (!message.ok()) return message.status();
  if (!raw->ParseFromString(*message)) {
    return absl::DataLossError(
        absl::StrCat("shard state '", path, "' does not parse"));
  }
  if (raw->format_version() != kShardStateFormatVersion) {
    return absl::DataLossError(absl::StrCat(
        "shard state '", path, "' has format version ", raw->format_version(),
        "; this tern reads version ", kShardStateFormatVersion));
  }
  if (absl::Status status = CheckFlags(*raw, limits, path); !status.ok()) {
    return status;
  }
  absl::StatusOr<ShardSnapshot> snapshot = SnapshotOf(*raw, path);
  if (!snapshot.ok()) return snapshot.status();
  return std::optional<ShardSnapshot>(*std::move(snapshot));
}

}  // namespace tern::server
