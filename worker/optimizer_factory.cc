#include "worker/optimizer_factory.h"

#include <tuple>
#include <utility>

#include "common/status_macros.h"
#include "torch/optim.h"

namespace tern::worker {

absl::StatusOr<std::unique_ptr<torch::optim::Optimizer>> MakeOptimizer(
    const WorkerOptions& options, std::vector<torch::Tensor> parameters) {
  if (options.optimizer == "adam") {
    if (options.momentum >= 1) {
      return absl::InvalidArgumentError(
          "--momentum (Adam's beta1) must be below 1 with --optimizer=adam");
    }
    return std::unique_ptr<torch::optim::Optimizer>(
        std::make_unique<torch::optim::Adam>(
            std::move(parameters),
            torch::optim::AdamOptions(options.lr)
                .betas(std::make_tuple(options.momentum, 0.999))
                .weight_decay(options.weight_decay)));
  }
  if (options.optimizer == "adagrad") {
    // Duchi et al.'s AdaGrad, as Dryden et al. and 1-bit SGD train with:
    // libtorch's defaults (accumulator 0, eps 1e-10, no lr decay; the
    // schedule sets the rate each step).
    return std::unique_ptr<torch::optim::Optimizer>(
        std::make_unique<torch::optim::Adagrad>(
            std::move(parameters), torch::optim::AdagradOptions(options.lr)
                                       .weight_decay(options.weight_decay)));
  }
  const double momentum =
      options.optimizer == "momentum" ? options.momentum : 0.0;
  return std::unique_ptr<torch::optim::Optimizer>(
      std::make_unique<torch::optim::SGD>(
          std::move(parameters), torch::optim::SGDOptions(options.lr)
                                     .momentum(momentum)
                                     .weight_decay(options.weight_decay)));
}

absl::StatusOr<LrSchedule> MakeLrSchedule(const WorkerOptions& options) {
  TERN_ASSIGN_OR_RETURN(const LrScheduleKind kind,
                        ParseLrScheduleKind(options.lr_schedule));
  return LrSchedule::Create(kind, options.lr, options.steps,
                            options.lr_step_every, options.lr_gamma);
}

tern::v1::OptimizerConfig LpsOptimizerConfig(const WorkerOptions& options) {
  tern::v1::OptimizerConfig config;
  config.set_lr(options.lr);
  config.set_momentum(options.optimizer == "momentum" ? options.momentum : 0.0);
  config.set_weight_decay(options.weight_decay);
  config.set_lr_schedule(options.lr_schedule);
  config.set_lr_step_every(options.lr_step_every);
  config.set_lr_gamma(options.lr_gamma);
  config.set_steps(options.steps);
  return config;
}

}  // namespace tern::worker
