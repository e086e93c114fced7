// The --mode=terngrad exchange of `tern worker` (worker/terngrad_protocol.h)
// over parameters and gradients that the caller owns: the C++ half of the
// PyTorch API (python/tern/torch.py). The caller runs forward, backward and
// its own optimizer; per step it hands over its gradients, which come back
// replaced by the decoded average of all workers', encoded, shared and
// pushed exactly as a C++ worker does. So Python and C++ workers train one
// model together and their replicas stay bit-identical, as long as every
// worker applies the same update (the same optimizer and learning rate).
//
// Joining: the same Join request as `tern worker` (worker/join.h), with the
// ParamSpec of the caller's tensors. Its hash is the ParamSpec's, or, when
// options.model names a TorchScript file (PATH.pt), that file's hash, so
// that a Python worker that trains the module loaded from PATH joins the C++
// workers given --model=PATH. At step 0 the shards refuse a worker whose
// parameters differ from the first worker's (the checksum in the join).
//
// Ownership and threads: borrows the caller's parameter memory for its
// whole life (the views must stay valid and at their addresses) and each
// step's gradient memory for that step. Owns its client, plan and codecs.
// Not thread-safe: one training loop calls it. No globals: several may live
// in one process.
#ifndef TERN_WORKER_GRADIENT_EXCHANGE_H_
#define TERN_WORKER_GRADIENT_EXCHANGE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/logging.h"
#include "worker/step_metrics.h"
#include "worker/worker_options.h"

namespace tern::worker {

// A float32, contiguous, row-major tensor in the caller's memory.
struct HostTensor {
  std::string name;  // as named_parameters() names it: "fc1.weight"
  std::vector<int64_t> shape;
  float* data = nullptr;
};

class GradientExchange {
 public:
  // For the parameters `params` (in named_parameters() order) with the
  // options of `tern worker` (the mode must be terngrad). INVALID_ARGUMENT
  // for options or tensors that do not fit (a null tensor, a name order a
  // module tree cannot have, too large a model for the shards' messages);
  // NOT_FOUND for a missing options.model file.
  static absl::StatusOr<std::unique_ptr<GradientExchange>> Create(
      const WorkerOptions& options, std::vector<HostTensor> params,
      Logger logger);
  ~GradientExchange();

  // Joins the shards (retrying while they start, up to join_timeout_s).
  // The shards' refusal (another model, other parameters, another run
  // configuration) comes back with their status code. With
  // `broadcast_start` (or options.broadcast_start) the run starts from
  // worker 0's parameters: worker 0 sends them, and every other worker's
  // parameter memory is overwritten with them (worker/start_broadcast.h).
  absl::Status Join(bool broadcast_start = false);
  bool joined() const;

  // Exchanges step next_step(): `gradients` (one per parameter, in order,
  // each as many floats as its parameter) hold this worker's gradients and
  // on return the average of all workers' as every worker decodes it.
  // Joins first if Join was not called. Errors name the step, which is
  // then not counted as exchanged.
  absl::StatusOr<StepRecord> Step(absl::Span<float* const> gradients);
  // Memory of the exchange's own for the gradient of parameter `tensor`
  // (as many floats as it has; valid as long as this lives). A gradient the
  // caller keeps there (Python: p.grad viewing it) is encoded from and
  // decoded into in place: Step copies nothing in or out for it.
  absl::Span<float> GradientBuffer(uint32_t tensor);
  // The step the next Step exchanges (0 at first).
  uint64_t next_step() const;

  // The checksum (common/checksum.h) of the parameters as they are now.
  uint64_t Checksum() const;
  // Sends Checksum() to the shards as that of the last exchanged step's
  // update, as `tern worker` does every --check_every steps; returns it.
  // FAILED_PRECONDITION when another worker's replica differs.
  absl::StatusOr<uint64_t> CheckParams();

  const WorkerOptions& options() const;

 private:
  struct State;  // libtorch's part, kept out of this header
  explicit GradientExchange(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace tern::worker

#endif  // TERN_WORKER_GRADIENT_EXCHANGE_H_
