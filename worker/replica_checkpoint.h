// Saving and restoring a worker's replica (--checkpoint_dir, --mode=
// terngrad): its parameters, optimizer state, error-feedback residuals, next
// step and data position, in the file format of worker/checkpoint.h. A
// checkpoint is written after a step's checks, so it holds a replica the
// shards vouched for; a restored worker rejoins at its next step
// (worker/join.h).
#ifndef TERN_WORKER_REPLICA_CHECKPOINT_H_
#define TERN_WORKER_REPLICA_CHECKPOINT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/logging.h"
#include "kernels/error_feedback.h"
#include "torch/optim/optimizer.h"
#include "worker/checkpoint.h"
#include "worker/datasets.h"
#include "worker/param_buffer.h"
#include "worker/worker_options.h"

namespace tern::worker {

// What a checkpoint holds, borrowed from the Trainer for one call.
struct ReplicaState {
  ParamBuffer& params;
  torch::optim::Optimizer& optimizer;
  // Null when the run's codec keeps no residuals.
  kernels::ErrorFeedback* feedback;
  ShardedBatches& batches;
};

// The checkpoint file of one worker. Not thread-safe; the training loop
// uses it.
class ReplicaCheckpointer {
 public:
  // The file of options.checkpoint_dir for options.worker_id (none when the
  // directory is empty), for the model of `params`.
  ReplicaCheckpointer(const WorkerOptions& options, const ParamBuffer& params,
                      Logger logger);

  // Whether checkpoints are written (--checkpoint_dir given).
  bool enabled() const { return !path_.empty(); }
  // The file; empty when !enabled().
  const std::string& path() const { return path_; }

  // Restores the file into `state`, if there is one, and returns its next
  // step (0 without a file or without --checkpoint_dir).
  // FAILED_PRECONDITION when it belongs to another run, worker or model;
  // DATA_LOSS when it does not read back.
  absl::StatusOr<uint64_t> Restore(const ReplicaState& state) const;

  // Writes the checkpoint of `state` whose next step is `next_step`.
  absl::Status Save(const ReplicaState& state, uint64_t next_step) const;

 private:
  // Fills `state` from `checkpoint`, which CheckCheckpointIdentity passed.
  absl::Status Apply(const tern::v1::WorkerCheckpoint& checkpoint,
                     const ReplicaState& state) const;

  const std::string path_;
  const CheckpointIdentity identity_;
  Logger logger_;
};

}  // namespace tern::worker

#endif  // TERN_WORKER_REPLICA_CHECKPOINT_H_
