// Max pooling over 2x2 windows with stride 2 and no padding, as
// F::max_pool2d(x, 2) computes it: the same values and, in backward, the
// same gradient (the whole of an output's gradient goes to its window's
// first maximum in row-major order, or to the window's last NaN). For
// float32 CPU tensors it runs a vectorized loop of its own; every other
// tensor (CUDA, other types) goes to F::max_pool2d.
//
// Why: libtorch 1.13's CPU max_pool2d is a scalar loop that also writes an
// int64 index per output, about 17 ns an output on this project's test
// machine; LeNet's two poolings took about a fifth of a worker's step
// (bench/README.md, "LeNet's pooling").
#ifndef TERN_WORKER_MAX_POOL_H_
#define TERN_WORKER_MAX_POOL_H_

#include "ATen/core/Tensor.h"

namespace tern::worker {

// x: [N, C, H, W]; returns [N, C, H / 2, W / 2] (an odd last row or column
// is left out, as max_pool2d leaves it).
at::Tensor MaxPool2x2(const at::Tensor& x);

}  // namespace tern::worker

#endif  // TERN_WORKER_MAX_POOL_H_
