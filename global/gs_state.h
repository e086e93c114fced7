// The global server's state on disk (`tern global --state_dir`,
// global/README.md "Recovery"): everything a GS killed at any moment needs
// to answer every data center as the killed process would have. The round
// aggregator writes it before it releases any answer the state holds:
//   - when a data center registers (the first one fixes the model);
//   - when a round closes (its answer, the next open round);
//   - when a lagging data center is answered with a stored average (its
//     updates joined the open round, whose sums the file then holds).
// Updates of the open round whose senders still wait are in the file only
// when a later event wrote it; if not, the restarted GS expects them again
// and the LPS's retry (server/gs_link.h) sends them. Either way each data
// center's round is counted once and the answers' bytes do not change.
//
// The file is tern.v1.GlobalServerState (proto/tern/v1/gs_state.proto)
// framed by common/framed_file.h and replaced whole by a rename.
#ifndef TERN_GLOBAL_GS_STATE_H_
#define TERN_GLOBAL_GS_STATE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "global/messages.h"

namespace tern::global {

inline constexpr uint32_t kGsStateFormatVersion = 1;

// `dir`/global.state.
std::string GsStatePath(absl::string_view dir);

// A chunk key -> float values map: one data center's sum in the open round.
using ChunkSums = std::map<uint32_t, std::vector<float>>;

// The aggregator's state, in its own types.
struct GsSnapshot {
  // The flags that decide the answers' bytes: a restart with others is
  // refused.
  uint32_t num_datacenters = 0;
  uint64_t seed = 0;
  // The registration that fixed the model; none before the first one.
  std::optional<RegisterRequest> config;
  // By data center.
  std::vector<bool> registered;
  std::vector<uint64_t> next_round;
  uint64_t open_round = 0;
  // The data centers that sent the open round, and its sums so far.
  std::vector<uint32_t> sent;
  std::vector<ChunkSums> sums;
  std::vector<Contribution> contributions;
  std::vector<uint32_t> exact_chunks;
  // The kept answers of closed rounds, oldest first.
  std::vector<RoundAnswer> answers;
  uint64_t rounds_closed = 0;
};

// Writes `snapshot` to `path`; `sync` flushes it to disk. INTERNAL naming
// the path when it cannot be written.
absl::Status WriteGsState(const std::string& path, const GsSnapshot& snapshot,
                          bool sync);

// Reads `path`: nullopt when there is no file (a fresh start). DATA_LOSS
// naming the path when the file is damaged, of another format version, or
// inconsistent (sums of chunks the model does not have, a data center
// count that differs between fields).
absl::StatusOr<std::optional<GsSnapshot>> ReadGsState(const std::string& path);

}  // namespace tern::global

#endif  // TERN_GLOBAL_GS_STATE_H_
