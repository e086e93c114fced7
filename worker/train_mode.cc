#include "worker/train_mode.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tern::worker {
namespace {

// In the order --help lists them.
constexpr TrainMode kModes[] = {TrainMode::kTernGrad, TrainMode::kWeightGrad,
                                TrainMode::kGaia};

}  // namespace

absl::string_view TrainModeName(TrainMode mode) {
  switch (mode) {
    case TrainMode::kTernGrad:
      return "terngrad";
    case TrainMode::kWeightGrad:
      return "weightgrad";
    case TrainMode::kGaia:
      return "gaia";
  }
  return "unknown";
}

std::string TrainModeNames() {
  std::vector<absl::string_view> names;
  for (const TrainMode mode : kModes) names.push_back(TrainModeName(mode));
  return absl::StrJoin(names, ", ");
}

absl::StatusOr<TrainMode> ParseTrainMode(absl::string_view name) {
  for (const TrainMode mode : kModes) {
    if (name == TrainModeName(mode)) return mode;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--mode: '", name, "' is not one of ", TrainModeNames()));
}

bool IsKnownTrainMode(TrainMode mode) {
  for (const TrainMode known : kModes) {
    if (mode == known) return true;
  }
  return false;
}

bool UsesLocalParameterServer(TrainMode mode) {
  return mode == TrainMode::kWeightGrad || mode == TrainMode::kGaia;
}

}  // namespace tern::worker
