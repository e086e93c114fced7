// A shard's state on disk (`tern ps --state_dir`, server/README.md
// "Recovery"): everything a shard killed at any moment needs to answer
// every worker as the killed process would have. The Aggregator writes it
// before it releases any answer the state holds:
//   - when the first join configures the run (the run, step 0);
//   - when the open step's scalers are shared;
//   - when a step completes (the next step, the completed step's answers
//     for workers that retry it, the error-feedback residuals after it).
// A shard restarted with the same flags reads it and goes on from the open
// step; the workers retry their calls against it and every one of them
// gets the answer it would have got, so the run is bit-identical.
//
// The file is tern.v1.ShardState (proto/tern/v1/shard_state.proto) framed
// by common/framed_file.h and replaced whole by a rename.
#ifndef TERN_SERVER_SHARD_STATE_H_
#define TERN_SERVER_SHARD_STATE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/messages.h"
#include "server/push_pull.h"
#include "server/scaler_barrier.h"
#include "server/shard_run.h"
#include "tern/v1/shard_state.pb.h"

namespace tern::server {

inline constexpr uint32_t kShardStateFormatVersion = 1;

// `dir`/shard-<shard_index>.state: the shards of a job may share one
// directory.
std::string ShardStatePath(absl::string_view dir, uint32_t shard_index);

// CheckParams' record: step -> (first worker, its checksum).
using StepChecks = std::map<uint64_t, std::pair<uint32_t, uint64_t>>;

// The state read back, in the aggregator's types.
struct ShardSnapshot {
  JoinRequest first_join;
  uint64_t open_step = 0;
  PushAnswer last_answer;     // of open_step - 1; null at step 0
  ScalerAnswer last_scalers;  // of open_step - 1; null when none
  ScalerAnswer open_scalers;  // of open_step; null until shared
  // Chunk key -> its residual after open_step - 1.
  std::map<uint32_t, std::vector<float>> residuals;
  StepChecks checks;
  // Worker -> the step it was dropped at (--on_worker_loss=shrink).
  std::map<uint32_t, uint64_t> dropped;
};

// Keeps the state of one shard and rewrites its file at each event. Not
// thread-safe: the Aggregator's mutex guards it.
class ShardStateWriter {
 public:
  // `sync`: fsync each write (survives a machine crash, not only a
  // process's; costs a disk flush per step).
  ShardStateWriter(std::string path, const ShardLimits& limits, bool sync);

  const std::string& path() const { return path_; }
  absl::Status RunConfigured(const JoinRequest& first);
  absl::Status ScalersShared(const ScalerReply& shared);
  // Step answer.step completed with `answer`; `run`'s chunks hold their
  // residuals after it (their locks are taken here).
  absl::Status StepCompleted(const PushReply& answer, const ShardRun& run,
                             const StepChecks& checks);
  // --on_worker_loss=shrink dropped `worker` at `step`.
  absl::Status WorkerDropped(uint32_t worker, uint64_t step);
  // A dropped worker was let in again; written with the step completed
  // next (StepCompleted), whose answer is the first it is counted after.
  void WorkerReadmitted(uint32_t worker);
  // Starts from a state read back (Restore), so that the next write keeps
  // what the snapshot held.
  void Resume(const tern::v1::ShardState& state) { state_ = state; }

 private:
  absl::Status Write();

  std::string path_;
  bool sync_;
  tern::v1::ShardState state_;
};

// Reads `path`: nullopt when there is no file (a fresh start). DATA_LOSS
// naming the path when the file is damaged or of another format version;
// FAILED_PRECONDITION when it was written by a shard with other flags
// (shard index, shards, workers): restart with the flags that wrote it or
// another --state_dir. `raw` receives the message for
// ShardStateWriter::Resume.
absl::StatusOr<std::optional<ShardSnapshot>> ReadShardState(
    const std::string& path, const ShardLimits& limits,
    tern::v1::ShardState* raw);

}  // namespace tern::server

#endif  // TERN_SERVER_SHARD_STATE_H_
