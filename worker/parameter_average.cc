#include "worker/parameter_average.h"

#include <algorithm>
#include <utility>

#include "torch/types.h"

namespace tern::worker {

ParameterAverage::ParameterAverage(double decay,
                                   std::vector<torch::Tensor> parameters)
    : decay_(decay), parameters_(std::move(parameters)) {
  torch::NoGradGuard no_grad;
  for (const torch::Tensor& parameter : parameters_) {
    average_.push_back(parameter.detach().clone());
  }
}

double ParameterAverage::DecayAt(uint64_t step) const {
  const double t = static_cast<double>(step);
  return std::min(decay_, (1.0 + t) / (10.0 + t));
}

void ParameterAverage::Update(uint64_t step) {
  torch::NoGradGuard no_grad;
  const double decay = DecayAt(step);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    // average += (1 - d) * (p - average), TensorFlow's form of the update.
    average_[i].add_(parameters_[i].detach() - average_[i], 1.0 - decay);
  }
}

void ParameterAverage::Swap() {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    torch::Tensor held = parameters_[i].detach().clone();
    parameters_[i].detach().copy_(average_[i]);
    average_[i].copy_(held);
  }
}

}  // namespace tern::worker
