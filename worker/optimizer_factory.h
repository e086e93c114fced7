// The worker's local optimizer and learning-rate schedule from the flags
// (--optimizer, --lr, --momentum, --weight_decay, --lr_schedule,
// --lr_step_every, --lr_gamma). In --mode=terngrad every replica steps the
// same optimizer on the same bytes (DESIGN section 3, step 6); in the LPS
// modes the LPS runs the optimizer and the worker sends these settings at
// join instead (LpsOptimizerConfig).
#ifndef TERN_WORKER_OPTIMIZER_FACTORY_H_
#define TERN_WORKER_OPTIMIZER_FACTORY_H_

#include <memory>
#include <vector>

#include "ATen/core/Tensor.h"
#include "absl/status/statusor.h"
#include "common/lr_schedule.h"
#include "tern/v1/parameter_server.pb.h"
#include "torch/optim/optimizer.h"
#include "worker/worker_options.h"

namespace tern::worker {

// sgd, momentum (SGD with --momentum), adam (beta1 = --momentum) or adagrad
// over `parameters`. INVALID_ARGUMENT for adam with a momentum of 1 or more.
absl::StatusOr<std::unique_ptr<torch::optim::Optimizer>> MakeOptimizer(
    const WorkerOptions& options, std::vector<at::Tensor> parameters);

// The schedule of --lr_schedule over options.steps steps.
// INVALID_ARGUMENT for an unknown schedule or values it cannot take.
absl::StatusOr<LrSchedule> MakeLrSchedule(const WorkerOptions& options);

// What an LPS needs to run the optimizer the flags describe (momentum SGD:
// the momentum is 0 unless --optimizer=momentum).
tern::v1::OptimizerConfig LpsOptimizerConfig(const WorkerOptions& options);

}  // namespace tern::worker

#endif  // TERN_WORKER_OPTIMIZER_FACTORY_H_
