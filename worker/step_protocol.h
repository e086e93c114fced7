// How a worker exchanges one training step with its servers: the part of
// the training loop that differs between the modes (worker/train_mode.h).
// Two implementations:
//
//   TernGradProtocol (worker/terngrad_protocol.h): --mode=terngrad with any
//     gradient codec of DESIGN section 6. ShareScalers with every shard
//     (TernGrad), PushPull the encoded gradient, decode the aggregate and
//     step the local optimizer; replicas are bit-identical.
//   LpsProtocol (worker/lps_protocol.h): --mode=weightgrad|gaia (DESIGN
//     section 4). Push the gradient to the data center's local parameter
//     server, load the weights it answers with; no local optimizer.
//
// The Trainer (worker/trainer.h) owns the model, its ParamBuffer, the plan
// and the codecs, and runs what every mode shares: the forward and backward
// pass, evaluation, the checks, checkpoints and logs. A protocol borrows
// what it needs from the Trainer, which outlives it. Not thread-safe: one
// training loop calls it.
#ifndef TERN_WORKER_STEP_PROTOCOL_H_
#define TERN_WORKER_STEP_PROTOCOL_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tern/v1/parameter_server.pb.h"
#include "worker/ps_client.h"
#include "worker/step_metrics.h"

namespace tern::worker {

class StepProtocol {
 public:
  virtual ~StepProtocol() = default;

  // Adds what this protocol tells the servers at join (the LPS modes: the
  // mode, the optimizer settings and worker 0's initial weights) to the
  // request every shard gets.
  virtual void AddToJoin(tern::v1::JoinRequest* request) const = 0;

  // Called before the backward pass of step `step`, whose Step follows
  // with the same client: a protocol that overlaps communication with
  // backward (TernGradProtocol with --overlap) starts sending from the
  // gradient hooks. By default nothing.
  virtual void BeforeBackward(PsClient& client, uint64_t step) {}

  // Exchanges step `step`: the model's parameters hold this worker's
  // gradients (after backward); on return its parameters are those of the
  // next step. Adds the traffic and the encode, network and decode times
  // to `record` (and the time to gather the gradients to compute_s).
  // Errors name the step.
  virtual absl::Status Step(PsClient& client, uint64_t step,
                            StepRecord* record) = 0;

  // Step(client, step, ...) failed with `failed`: where the mode can
  // continue after such an error (the LPS modes: the LPS restarted from
  // its state), rejoins with `first_join`, the request this worker joined
  // the run with, and loads the servers' parameters. Returns the step the
  // training loop continues at: at most `step` (the steps from there on are
  // done again), or step + 1 (the servers' state holds step `step`, whose
  // result is now loaded). Returns `failed` where it cannot recover (the
  // default); other errors name the step.
  virtual absl::StatusOr<uint64_t> Recover(
      PsClient& client, uint64_t step, const absl::Status& failed,
      const tern::v1::JoinRequest& first_join) {
    return failed;
  }

  // A worker let in again after the shards dropped it (worker/join.h,
  // CatchUpUntil): applies step `step`'s answers, which every shard kept,
  // without a gradient of this worker's (it pushes no chunks; the shards
  // do not count it before its live_from_step). Adds the traffic and
  // times to `record`. UNIMPLEMENTED where the servers keep no answers
  // (the LPS modes).
  virtual absl::Status CatchUp(PsClient& client, uint64_t step,
                               StepRecord* record) {
    return absl::UnimplementedError(
        absl::StrCat("step ", step, ": this mode does not catch up"));
  }

  // Whether every worker holds the same parameters after each step, so
  // that the Trainer compares checksums with the shards (CheckParams);
  // false where each worker loads its own draw of the LPS's weights.
  virtual bool ReplicasIdentical() const = 0;

  // Checks the parameters loaded after the last step, of checksum
  // `checksum`, against what the servers reported (the LPS's final
  // checksum). INTERNAL naming both on a mismatch; OK where the servers
  // report none.
  virtual absl::Status CheckFinal(uint64_t step, uint64_t checksum) const = 0;
};

// --- small helpers the protocols and the Trainer share ---

inline double SecondsSince(absl::Time start) {
  return absl::ToDoubleSeconds(absl::Now() - start);
}

// `status` with the step it happened in before its message.
inline absl::Status AtStep(uint64_t step, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat("step ", step, ": ", status.message()));
}

// Whether something done every `interval` steps (0: never) falls on `step`.
inline bool Every(uint64_t interval, uint64_t step) {
  return interval > 0 && (step + 1) % interval == 0;
}

}  // namespace tern::worker

#endif  // TERN_WORKER_STEP_PROTOCOL_H_
