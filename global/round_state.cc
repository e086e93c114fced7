// The aggregator's state on disk (global/gs_state.h): what is saved before
// an answer is released, and how a restarted GS goes on from it.
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "global/round_aggregator.h"

namespace tern::global {

void RoundAggregator::SaveState() {
  if (options_.state_path.empty()) return;
  GsSnapshot snapshot;
  snapshot.num_datacenters = options_.num_datacenters;
  snapshot.seed = options_.seed;
  if (configured_) snapshot.config = config_;
  snapshot.registered = registered_;
  snapshot.next_round = next_round_;
  snapshot.open_round = open_round_;
  for (uint32_t d = 0; d < options_.num_datacenters; ++d) {
    if (sent_.arrived(d)) snapshot.sent.push_back(d);
  }
  snapshot.sums = sums_;
  snapshot.contributions = contributions_;
  snapshot.exact_chunks.assign(exact_chunks_.begin(), exact_chunks_.end());
  for (const auto& [round, answer] : answers_.all()) {
    snapshot.answers.push_back(*answer);
  }
  snapshot.rounds_closed = stats_.rounds_closed;
  if (absl::Status status =
          WriteGsState(options_.state_path, snapshot, options_.state_sync);
      !status.ok()) {
    refusals_.Warn("state", "write failed",
                   "round {}: the global server's state was not saved, a "
                   "restart would resume from an earlier one: {}",
                   open_round_, std::string(status.message()));
  }
}

absl::Status RoundAggregator::CheckRestoredSums(
    const GsSnapshot& snapshot) const {
  for (const ChunkSums& sums : snapshot.sums) {
    for (const auto& [key, values] : sums) {
      if (key >= chunks_.size() || values.size() != chunks_[key].num_elements) {
        return absl::DataLossError(
            absl::StrCat("the open round's sum of chunk ", key,
                         " does not fit the registered model"));
      }
    }
  }
  for (const uint32_t key : snapshot.exact_chunks) {
    if (key >= chunks_.size()) {
      return absl::DataLossError(
          absl::StrCat("exact chunk ", key, " is not a chunk of the model"));
    }
  }
  return absl::OkStatus();
}

absl::Status RoundAggregator::Restore(const GsSnapshot& snapshot) {
  auto differs = [&](absl::string_view flag, uint64_t theirs, uint64_t ours) {
    return absl::FailedPreconditionError(absl::StrCat(
        "global server state '", options_.state_path, "' was written with --",
        flag, "=", theirs, ", but this GS runs with --", flag, "=", ours,
        ": restart with the flags that wrote it, or give another "
        "--state_dir"));
  };
  if (snapshot.num_datacenters != options_.num_datacenters) {
    return differs("num_datacenters", snapshot.num_datacenters,
                   options_.num_datacenters);
  }
  if (snapshot.seed != options_.seed) {
    return differs("seed", snapshot.seed, options_.seed);
  }
  if (snapshot.config.has_value()) {
    absl::Status status = CheckRegisterOptions(*snapshot.config);
    if (status.ok()) status = Configure(*snapshot.config);
    if (status.ok()) status = CheckRestoredSums(snapshot);
    if (!status.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("global server state '", options_.state_path,
                       "': the registered model: ", status.message()));
    }
  }
  registered_ = snapshot.registered;
  next_round_ = snapshot.next_round;
  open_round_ = snapshot.open_round;
  for (const uint32_t d : snapshot.sent) sent_.Arrive(d);
  sums_ = snapshot.sums;
  contributions_ = snapshot.contributions;
  exact_chunks_.insert(snapshot.exact_chunks.begin(),
                       snapshot.exact_chunks.end());
  for (const RoundAnswer& answer : snapshot.answers) {
    answers_.Put(answer.round, std::make_shared<RoundAnswer>(answer));
  }
  stats_.rounds_closed = snapshot.rounds_closed;
  // T_global of a round that had updates begins again now.
  if (!contributions_.empty()) first_arrival_ = options_.clock();
  std::vector<std::string> positions;
  for (uint32_t d = 0; d < options_.num_datacenters; ++d) {
    positions.push_back(registered_[d] ? absl::StrCat(next_round_[d]) : "-");
  }
  logger_->info(
      "resumed at round {} from {}: {} data center(s) had sent it; next "
      "rounds by data center [{}]",
      open_round_, options_.state_path, sent_.count(),
      absl::StrJoin(positions, ","));
  return absl::OkStatus();
}

}  // namespace tern::global
