#include "server/lps_state_file.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/float_bytes.h"
#include "common/framed_file.h"
#include "core/wire.h"
#include "server/wire.h"
#include "tern/v1/lps_state.pb.h"

namespace tern::server {
namespace {

FramedFileOptions Frame(bool sync) {
  return FramedFileOptions{"TERNLPS1", "LPS state", sync};
}

void RoundToProto(const SyncRound& round, tern::v1::LpsRound* out) {
  out->set_round(round.round);
  out->set_local_step(round.local_step);
  out->set_g_thresh(round.g_thresh);
  for (const ChunkPayload& chunk : round.updates) {
    tern::v1::ChunkPayload* wire = out->add_updates();
    wire->set_chunk_key(chunk.chunk_key);
    core::PayloadToWire(chunk.payload, wire->mutable_payload());
  }
  for (const ChunkDecision& decision : round.decisions) {
    tern::v1::RoundDecision* wire = out->add_decisions();
    wire->set_chunk_key(decision.key);
    wire->set_significance(decision.significance);
    wire->set_sent(decision.sent);
  }
}

void SyncToProto(const SynchronizerSnapshot& sync,
                 tern::v1::LpsSyncState* out) {
  out->set_next_round(sync.next_round);
  out->set_last_round_step(sync.last_round_step);
  if (sync.g_thresh.has_value()) out->set_g_thresh(*sync.g_thresh);
  out->set_threshold_epoch(sync.threshold_epoch);
  out->set_threshold_lr(sync.threshold_lr);
  out->set_threshold_momentum_norm(sync.threshold_momentum_norm);
  for (const SyncChunkSnapshot& chunk : sync.chunks) {
    tern::v1::SyncChunkState* wire = out->add_chunks();
    wire->set_chunk_key(chunk.key);
    wire->set_last_weights(FloatBytes(chunk.last_weights));
    wire->set_gradient_sum(FloatBytes(chunk.gradient_sum));
    wire->set_gradients(chunk.gradients);
    wire->set_path(chunk.path);
    wire->set_held_back(FloatBytes(chunk.held_back));
  }
  for (const WaitingRoundSnapshot& waiting : sync.waiting) {
    tern::v1::WaitingRoundState* wire = out->add_waiting();
    wire->set_round(waiting.round);
    for (const auto& [key, values] : waiting.sent_updates) {
      tern::v1::SentUpdate* sent = wire->add_sent_updates();
      sent->set_chunk_key(key);
      sent->set_values(FloatBytes(values));
    }
  }
}

tern::v1::LocalPsState ToProto(const LpsSnapshot& snapshot) {
  tern::v1::LocalPsState state;
  state.set_format_version(kLpsStateFormatVersion);
  JoinToWire(snapshot.first_join, state.mutable_first_join());
  state.mutable_first_join()->clear_initial_weights();
  state.set_num_workers(snapshot.num_workers);
  state.set_completed_steps(snapshot.state.completed_steps);
  for (const LpsChunkSnapshot& chunk : snapshot.state.chunks) {
    tern::v1::LpsChunkState* wire = state.add_chunks();
    wire->set_chunk_key(chunk.key);
    wire->set_weights(FloatBytes(chunk.weights));
    wire->set_momentum(FloatBytes(chunk.momentum));
    wire->set_applied(chunk.applied);
    wire->mutable_next_step()->Assign(chunk.next_step.begin(),
                                      chunk.next_step.end());
  }
  for (const auto& [step, count] : snapshot.state.step_counts) {
    tern::v1::OpenStepCount* open = state.add_open_steps();
    open->set_step(step);
    open->set_gradients(count);
  }
  SyncToProto(snapshot.sync, state.mutable_sync());
  for (const SyncRound& round : snapshot.unanswered) {
    RoundToProto(round, state.add_unanswered());
  }
  state.set_wan_bytes_up(snapshot.wan_bytes_up);
  state.set_wan_bytes_down(snapshot.wan_bytes_down);
  state.set_finished(snapshot.finished);
  return state;
}

// The floats of `bytes`, or INVALID_ARGUMENT naming `what`.
absl::StatusOr<std::vector<float>> Floats(absl::string_view bytes, uint32_t key,
                                          absl::string_view what) {
  std::optional<std::vector<float>> values = FloatsFromBytes(bytes);
  if (!values.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " of chunk ", key, " is not a whole number of floats"));
  }
  return *std::move(values);
}

absl::StatusOr<LpsStateSnapshot> StateFromProto(
    const tern::v1::LocalPsState& wire) {
  LpsStateSnapshot state;
  state.completed_steps = wire.completed_steps();
  for (const tern::v1::LpsChunkState& chunk : wire.chunks()) {
    LpsChunkSnapshot& out = state.chunks.emplace_back();
    out.key = chunk.chunk_key();
    absl::StatusOr<std::vector<float>> weights =
        Floats(chunk.weights(), out.key, "W");
    if (!weights.ok()) return weights.status();
    absl::StatusOr<std::vector<float>> momentum =
        Floats(chunk.momentum(), out.key, "v");
    if (!momentum.ok()) return momentum.status();
    out.weights = *std::move(weights);
    out.momentum = *std::move(momentum);
    out.applied = chunk.applied();
    out.next_step.assign(chunk.next_step().begin(), chunk.next_step().end());
  }
  for (const tern::v1::OpenStepCount& open : wire.open_steps()) {
    state.step_counts[open.step()] = open.gradients();
  }
  return state;
}

absl::StatusOr<SyncChunkSnapshot> SyncChunkFromProto(
    const tern::v1::SyncChunkState& wire) {
  SyncChunkSnapshot chunk;
  chunk.key = wire.chunk_key();
  absl::StatusOr<std::vector<float>> last =
      Floats(wire.last_weights(), chunk.key, "W_last");
  if (!last.ok()) return last.status();
  absl::StatusOr<std::vector<float>> sum =
      Floats(wire.gradient_sum(), chunk.key, "the gradient sum");
  if (!sum.ok()) return sum.status();
  absl::StatusOr<std::vector<float>> held =
      Floats(wire.held_back(), chunk.key, "held-back U");
  if (!held.ok()) return held.status();
  chunk.last_weights = *std::move(last);
  chunk.gradient_sum = *std::move(sum);
  chunk.held_back = *std::move(held);
  chunk.gradients = wire.gradients();
  chunk.path = wire.path();
  return chunk;
}

absl::StatusOr<SynchronizerSnapshot> SyncFromProto(
    const tern::v1::LpsSyncState& wire) {
  SynchronizerSnapshot sync;
  sync.next_round = wire.next_round();
  sync.last_round_step = wire.last_round_step();
  if (wire.has_g_thresh()) sync.g_thresh = wire.g_thresh();
  sync.threshold_epoch = wire.threshold_epoch();
  sync.threshold_lr = wire.threshold_lr();
  sync.threshold_momentum_norm = wire.threshold_momentum_norm();
  for (const tern::v1::SyncChunkState& chunk : wire.chunks()) {
    absl::StatusOr<SyncChunkSnapshot> read = SyncChunkFromProto(chunk);
    if (!read.ok()) return read.status();
    sync.chunks.push_back(*std::move(read));
  }
  for (const tern::v1::WaitingRoundState& waiting : wire.waiting()) {
    WaitingRoundSnapshot& out = sync.waiting.emplace_back();
    out.round = waiting.round();
    for (const tern::v1::SentUpdate& sent : waiting.sent_updates()) {
      absl::StatusOr<std::vector<float>> values =
          Floats(sent.values(), sent.chunk_key(), "a waiting round's U_sent");
      if (!values.ok()) return values.status();
      out.sent_updates[sent.chunk_key()] = *std::move(values);
    }
  }
  return sync;
}

absl::StatusOr<SyncRound> RoundFromProto(const tern::v1::LpsRound& wire) {
  SyncRound round;
  round.round = wire.round();
  round.local_step = wire.local_step();
  round.g_thresh = wire.g_thresh();
  for (const tern::v1::ChunkPayload& chunk : wire.updates()) {
    absl::StatusOr<kernels::Payload> payload =
        core::PayloadFromWire(chunk.payload());
    if (!payload.ok()) return payload.status();
    round.updates.push_back(ChunkPayload{chunk.chunk_key(), *payload});
  }
  for (const tern::v1::RoundDecision& decision : wire.decisions()) {
    round.decisions.push_back(ChunkDecision{
        decision.chunk_key(), decision.significance(), decision.sent()});
  }
  return round;
}

absl::StatusOr<LpsSnapshot> FromProto(const tern::v1::LocalPsState& wire) {
  LpsSnapshot snapshot;
  absl::StatusOr<JoinRequest> join = JoinFromWire(wire.first_join());
  if (!join.ok()) return join.status();
  snapshot.first_join = *std::move(join);
  snapshot.num_workers = wire.num_workers();
  absl::StatusOr<LpsStateSnapshot> state = StateFromProto(wire);
  if (!state.ok()) return state.status();
  snapshot.state = *std::move(state);
  absl::StatusOr<SynchronizerSnapshot> sync = SyncFromProto(wire.sync());
  if (!sync.ok()) return sync.status();
  snapshot.sync = *std::move(sync);
  for (const tern::v1::LpsRound& round : wire.unanswered()) {
    absl::StatusOr<SyncRound> read = RoundFromProto(round);
    if (!read.ok()) return read.status();
    snapshot.unanswered.push_back(*std::move(read));
  }
  snapshot.wan_bytes_up = wire.wan_bytes_up();
  snapshot.wan_bytes_down = wire.wan_bytes_down();
  snapshot.finished = wire.finished();
  return snapshot;
}

}  // namespace

std::string LpsStatePath(absl::string_view dir) {
  return absl::StrCat(dir, "/lps.state");
}

absl::Status WriteLpsState(const std::string& path, const LpsSnapshot& snapshot,
                           bool sync) {
  return WriteFramedFile(path, ToProto(snapshot).SerializeAsString(),
                         Frame(sync));
}

absl::StatusOr<std::optional<LpsSnapshot>> ReadLpsState(
    const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFramedFile(path, Frame(false));
  if (absl::IsNotFound(bytes.status())) return std::nullopt;
  if (!bytes.ok()) return bytes.status();
  auto damaged = [&](absl::string_view why) {
    return absl::DataLossError(absl::StrCat("LPS state '", path, "': ", why));
  };
  tern::v1::LocalPsState state;
  if (!state.ParseFromString(*bytes)) return damaged("not a valid message");
  if (state.format_version() != kLpsStateFormatVersion) {
    return damaged(absl::StrCat("format version ", state.format_version(),
                                ", this build reads ", kLpsStateFormatVersion));
  }
  absl::StatusOr<LpsSnapshot> snapshot = FromProto(state);
  if (!snapshot.ok()) return damaged(snapshot.status().message());
  return std::optional<LpsSnapshot>(*std::move(snapshot));
}

}  // namespace tern::server
