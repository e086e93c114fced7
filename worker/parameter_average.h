// The exponential moving average of the parameters that a worker evaluates
// with (--eval_ema_decay; TernGrad section 4 evaluates such an average,
// decay 0.9999). As TensorFlow's ExponentialMovingAverage with the step
// count, which TernGrad's training code passes, the decay at step t is
// min(decay, (1 + t) / (10 + t)): early averages follow the weights instead
// of holding the initial ones for tens of thousands of steps.
//
// Training never sees the average: the replicas, their checksums and the
// pushes are unchanged; only the evaluation swaps it in and back.
#ifndef TERN_WORKER_PARAMETER_AVERAGE_H_
#define TERN_WORKER_PARAMETER_AVERAGE_H_

#include <cstdint>
#include <vector>

#include "ATen/core/Tensor.h"

namespace tern::worker {

class ParameterAverage {
 public:
  // Starts from the parameters' current values. `decay` in (0, 1).
  ParameterAverage(double decay, std::vector<at::Tensor> parameters);

  // The decay applied after step `step` (0-based).
  double DecayAt(uint64_t step) const;
  // After step `step`'s update: average <- d * average + (1 - d) * p.
  void Update(uint64_t step);
  // Exchanges the parameters' values with the average's (in place, bit for
  // bit); a second call restores them.
  void Swap();

 private:
  double decay_;
  std::vector<at::Tensor> parameters_;
  std::vector<at::Tensor> average_;
};

}  // namespace tern::worker

#endif  // TERN_WORKER_PARAMETER_AVERAGE_H_
