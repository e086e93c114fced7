#include "global/gs_state.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/float_bytes.h"
#include "common/framed_file.h"
#include "global/gs_wire.h"
#include "tern/v1/gs_state.pb.h"

namespace tern::global {
namespace {

FramedFileOptions Frame(bool sync) {
  return FramedFileOptions{"TERNGS01", "global server state", sync};
}

tern::v1::GlobalServerState ToProto(const GsSnapshot& snapshot) {
  tern::v1::GlobalServerState state;
  state.set_format_version(kGsStateFormatVersion);
  state.set_num_datacenters(snapshot.num_datacenters);
  state.set_seed(snapshot.seed);
  if (snapshot.config.has_value()) {
    RegisterToWire(*snapshot.config, state.mutable_config());
  }
  for (const bool registered : snapshot.registered) {
    state.add_registered(registered);
  }
  state.mutable_next_round()->Assign(snapshot.next_round.begin(),
                                     snapshot.next_round.end());
  state.set_open_round(snapshot.open_round);
  state.mutable_sent()->Assign(snapshot.sent.begin(), snapshot.sent.end());
  for (uint32_t d = 0; d < snapshot.sums.size(); ++d) {
    if (snapshot.sums[d].empty()) continue;
    tern::v1::DatacenterSum* sum = state.add_sums();
    sum->set_datacenter(d);
    for (const auto& [key, values] : snapshot.sums[d]) {
      tern::v1::ChunkSum* chunk = sum->add_chunks();
      chunk->set_chunk_key(key);
      chunk->set_values(FloatBytes(values));
    }
  }
  for (const Contribution& contribution : snapshot.contributions) {
    tern::v1::RoundContribution* wire = state.add_contributions();
    wire->set_datacenter(contribution.datacenter);
    wire->set_round(contribution.round);
  }
  state.mutable_exact_chunks()->Assign(snapshot.exact_chunks.begin(),
                                       snapshot.exact_chunks.end());
  for (const RoundAnswer& answer : snapshot.answers) {
    AnswerToWire(answer, state.add_answers());
  }
  state.set_rounds_closed(snapshot.rounds_closed);
  return state;
}

// Everything but the chunks' sizes, which only the model can check
// (RoundAggregator::Restore).
absl::Status CheckShape(const tern::v1::GlobalServerState& state) {
  const uint32_t k = state.num_datacenters();
  if (k == 0 || state.registered_size() != static_cast<int>(k) ||
      state.next_round_size() != static_cast<int>(k)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "it lists ", state.registered_size(), " registrations and ",
        state.next_round_size(), " next rounds for ", k, " data centers"));
  }
  for (const uint32_t d : state.sent()) {
    if (d >= k) return absl::InvalidArgumentError("a sender is out of range");
  }
  for (const tern::v1::DatacenterSum& sum : state.sums()) {
    if (sum.datacenter() >= k) {
      return absl::InvalidArgumentError("a sum's data center is out of range");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<GsSnapshot> FromProto(const tern::v1::GlobalServerState& state) {
  if (absl::Status status = CheckShape(state); !status.ok()) return status;
  GsSnapshot snapshot;
  snapshot.num_datacenters = state.num_datacenters();
  snapshot.seed = state.seed();
  if (state.has_config()) {
    absl::StatusOr<RegisterRequest> config = RegisterFromWire(state.config());
    if (!config.ok()) return config.status();
    snapshot.config = *std::move(config);
  }
  snapshot.registered.assign(state.registered().begin(),
                             state.registered().end());
  snapshot.next_round.assign(state.next_round().begin(),
                             state.next_round().end());
  snapshot.open_round = state.open_round();
  snapshot.sent.assign(state.sent().begin(), state.sent().end());
  snapshot.sums.resize(snapshot.num_datacenters);
  for (const tern::v1::DatacenterSum& sum : state.sums()) {
    for (const tern::v1::ChunkSum& chunk : sum.chunks()) {
      std::optional<std::vector<float>> values =
          FloatsFromBytes(chunk.values());
      if (!values.has_value()) {
        return absl::InvalidArgumentError(
            absl::StrCat("the sum of chunk ", chunk.chunk_key(),
                         " is not a whole number of floats"));
      }
      snapshot.sums[sum.datacenter()][chunk.chunk_key()] = *std::move(values);
    }
  }
  for (const tern::v1::RoundContribution& contribution :
       state.contributions()) {
    snapshot.contributions.push_back(
        Contribution{contribution.datacenter(), contribution.round()});
  }
  snapshot.exact_chunks.assign(state.exact_chunks().begin(),
                               state.exact_chunks().end());
  for (const tern::v1::SyncRoundResponse& wire : state.answers()) {
    absl::StatusOr<RoundAnswer> answer = AnswerFromWire(wire);
    if (!answer.ok()) return answer.status();
    snapshot.answers.push_back(*std::move(answer));
  }
  snapshot.rounds_closed = state.rounds_closed();
  return snapshot;
}

}  // namespace

std::string GsStatePath(absl::string_view dir) {
  return absl::StrCat(dir, "/global.state");
}

absl::Status WriteGsState(const std::string& path, const GsSnapshot& snapshot,
                          bool sync) {
  return WriteFramedFile(path, ToProto(snapshot).SerializeAsString(),
                         Frame(sync));
}

absl::StatusOr<std::optional<GsSnapshot>> ReadGsState(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFramedFile(path, Frame(false));
  if (absl::IsNotFound(bytes.status())) return std::nullopt;
  if (!bytes.ok()) return bytes.status();
  auto damaged = [&](absl::string_view why) {
    return absl::DataLossError(
        absl::StrCat("global server state '", path, "': ", why));
  };
  tern::v1::GlobalServerState state;
  if (!state.ParseFromString(*bytes)) return damaged("not a valid message");
  if (state.format_version() != kGsStateFormatVersion) {
    return damaged(absl::StrCat("format version ", state.format_version(),
                                ", this build reads ", kGsStateFormatVersion));
  }
  absl::StatusOr<GsSnapshot> snapshot = FromProto(state);
  if (!snapshot.ok()) return damaged(snapshot.status().message());
  return std::optional<GsSnapshot>(*std::move(snapshot));
}

}  // namespace tern::global
