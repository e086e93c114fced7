// Worker checkpoints on disk (`tern worker --checkpoint_dir`): the file
// format is tern.v1.WorkerCheckpoint (proto/tern/v1/checkpoint.proto); this
// header writes it atomically, reads it back with every check that a file
// from disk needs, and says whether it belongs to the run at hand. It knows
// nothing of libtorch: the Trainer fills and applies the parameters and
// optimizer state.
//
// A checkpoint is taken at a step boundary, after the step's optimizer
// update and checksum check. A worker restarted from it rejoins shards that
// kept running (server/README.md, "Rejoin"): a shard one step ahead has
// already completed the checkpoint's next step, and answers the worker's
// repeated push of it from its retry cache.
#ifndef TERN_WORKER_CHECKPOINT_H_
#define TERN_WORKER_CHECKPOINT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tern/v1/checkpoint.pb.h"

namespace tern::worker {

inline constexpr uint32_t kCheckpointFormatVersion = 1;

// `dir`/worker-<worker_id>.ckpt: each worker of a job may share one
// directory.
std::string CheckpointPath(absl::string_view dir, uint32_t worker_id);

// Writes `checkpoint` to `path` so that `path` holds either the old or the
// new checkpoint whatever happens: the bytes go to `path`.tmp, are flushed
// to disk, and the file is renamed over `path`. Creates `path`'s directory
// if it is missing. INTERNAL naming the path and the system's reason on
// failure (disk full, permissions).
absl::Status WriteCheckpoint(const std::string& path,
                             const tern::v1::WorkerCheckpoint& checkpoint);

// Reads `path`. NOT_FOUND when there is no such file (a fresh start);
// DATA_LOSS naming the path when the file is not a framed checkpoint
// (checkpoint.proto), is truncated, fails its checksum, does not parse,
// has another format_version, or its parameter bytes are not whole floats.
absl::StatusOr<tern::v1::WorkerCheckpoint> ReadCheckpoint(
    const std::string& path);

// What a checkpoint must agree with to be restored.
struct CheckpointIdentity {
  std::string run_id;
  uint32_t worker_id = 0;
  uint32_t num_workers = 0;
  std::string codec;
  uint64_t param_spec_hash = 0;
  uint64_t num_params = 0;
  uint64_t steps = 0;
};

// FAILED_PRECONDITION naming the first field that differs (both values)
// and `path`, or that the checkpoint is of a finished run (next_step equal
// to steps) or from beyond its end.
absl::Status CheckCheckpointIdentity(const tern::v1::WorkerCheckpoint& checkpoint,
                                     const CheckpointIdentity& expected,
                                     absl::string_view path);

}  // namespace tern::worker

#endif  // TERN_WORKER_CHECKPOINT_H_
