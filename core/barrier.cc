#include "core/barrier.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tern::core {

absl::Status TooManyWaitsError(absl::string_view member,
                               absl::string_view wait) {
  return absl::ResourceExhaustedError(absl::StrCat(
      member, " already has ", kMaxWaitsPerMember, " calls waiting for ",
      wait, "; this one is refused (retries never need more at once)"));
}

std::string NameMissing(const std::vector<bool>& present,
                        absl::string_view singular, absl::string_view plural) {
  std::vector<size_t> missing;
  for (size_t member = 0; member < present.size(); ++member) {
    if (!present[member]) missing.push_back(member);
  }
  std::string text = absl::StrCat(missing.size() == 1 ? singular : plural, " ");
  const size_t named = std::min(missing.size(), kMaxNamedMembers);
  absl::StrAppend(&text,
                  absl::StrJoin(missing.begin(), missing.begin() + named, ","));
  if (named < missing.size()) {
    absl::StrAppend(&text, " and ", missing.size() - named, " more");
  }
  return text;
}

bool ArrivalSet::Begin(uint32_t member) {
  if (states_[member] != State::kAbsent) return false;
  states_[member] = State::kInFlight;
  return true;
}

bool ArrivalSet::Abort(uint32_t member) {
  if (states_[member] != State::kInFlight) return false;
  states_[member] = State::kAbsent;
  return true;
}

bool ArrivalSet::Arrive(uint32_t member) {
  if (states_[member] == State::kArrived) return false;
  states_[member] = State::kArrived;
  ++count_;
  return true;
}

void ArrivalSet::Reset() {
  std::fill(states_.begin(), states_.end(), State::kAbsent);
  count_ = 0;
}

std::vector<bool> ArrivalSet::Arrived() const {
  std::vector<bool> arrived(states_.size());
  for (size_t m = 0; m < states_.size(); ++m) {
    arrived[m] = states_[m] == State::kArrived;
  }
  return arrived;
}

}  // namespace tern::core
