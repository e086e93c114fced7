// A WeightGrad LPS's state on disk (`tern ps --mode=weightgrad|gaia
// --state_dir`, server/WEIGHTGRAD.md "Recovery"): the run's first join, the
// optimizer (LpsState), the WAN side (GradientSynchronizer) and the rounds
// not answered yet, as they stood when a round was built. A restarted LPS
// resumes from it; its workers rejoin at the steps it holds (they may redo
// a few), and it sends the unanswered rounds again.
//
// The file is tern.v1.LocalPsState (proto/tern/v1/lps_state.proto) framed
// by common/framed_file.h and replaced whole by a rename.
#ifndef TERN_SERVER_LPS_STATE_FILE_H_
#define TERN_SERVER_LPS_STATE_FILE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/gradient_synchronizer.h"
#include "server/lps_state.h"
#include "server/messages.h"

namespace tern::server {

inline constexpr uint32_t kLpsStateFormatVersion = 1;

// `dir`/lps.state: one LPS per data center, so one file per directory.
std::string LpsStatePath(absl::string_view dir);

struct LpsSnapshot {
  // The join that configured the run, without initial weights.
  JoinRequest first_join;
  // --num_workers of the LPS that wrote it.
  uint32_t num_workers = 0;
  LpsStateSnapshot state;
  SynchronizerSnapshot sync;
  // Rounds built and not answered, oldest first.
  std::vector<SyncRound> unanswered;
  uint64_t wan_bytes_up = 0;
  uint64_t wan_bytes_down = 0;
  // Written at the end of the run (after the final synchronization).
  bool finished = false;
};

// Writes `snapshot` to `path`; `sync` flushes it to disk. INTERNAL naming
// the path when it cannot be written.
absl::Status WriteLpsState(const std::string& path, const LpsSnapshot& snapshot,
                           bool sync);

// Reads `path`: nullopt when there is no file (a fresh start). DATA_LOSS
// naming the path when the file is damaged, of another format version, or
// holds values that are not whole floats. What the values must fit (the
// model, the workers) LpsState::Restore and GradientSynchronizer::Restore
// check.
absl::StatusOr<std::optional<LpsSnapshot>> ReadLpsState(
    const std::string& path);

}  // namespace tern::server

#endif  // TERN_SERVER_LPS_STATE_FILE_H_
