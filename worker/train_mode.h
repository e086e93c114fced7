// --mode of `tern worker`: which step protocol the worker speaks. Parsed
// once, when the flags are read; the training loop only sees the enum.
#ifndef TERN_WORKER_TRAIN_MODE_H_
#define TERN_WORKER_TRAIN_MODE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tern::worker {

enum class TrainMode {
  // DESIGN section 3: share scalers, push ternary (or any section 6 codec's)
  // gradients, pull their aggregate, step a local optimizer.
  kTernGrad,
  // DESIGN section 4: push the gradient ternarized with this worker's own
  // scaler to the data center's local parameter server (LPS), load the
  // weights it answers with.
  kWeightGrad,
  // As kWeightGrad with fp32 gradients (Gaia, Hsieh et al., NSDI 2017).
  kGaia,
};

// "terngrad", "weightgrad", "gaia": the --mode value of `mode`.
absl::string_view TrainModeName(TrainMode mode);

// "terngrad, weightgrad, gaia": every name ParseTrainMode takes.
std::string TrainModeNames();

// The mode --mode=`name` names. INVALID_ARGUMENT naming --mode and listing
// TrainModeNames() otherwise (names are case-sensitive).
absl::StatusOr<TrainMode> ParseTrainMode(absl::string_view name);

// Whether `mode` is one of the enumerators (options filled by code, not by
// the flags, can hold any value of the underlying type).
bool IsKnownTrainMode(TrainMode mode);

// The modes whose one shard is a local parameter server that holds the
// weights and runs the optimizer (weightgrad, gaia).
bool UsesLocalParameterServer(TrainMode mode);

}  // namespace tern::worker

#endif  // TERN_WORKER_TRAIN_MODE_H_
