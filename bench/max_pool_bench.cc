// LeNet's two 2x2 max poolings: libtorch's max_pool2d against tern's own
// loop (worker/max_pool.h), forward and forward + backward, batch 64, one
// thread, in alternating rounds; prints each median and libtorch's time
// over tern's (bench/README.md, "LeNet's pooling").
//
//   bazel run -c opt //bench:max_pool_bench [-- ROUNDS]
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "worker/max_pool.h"

namespace {

namespace F = torch::nn::functional;
using Pool = std::function<torch::Tensor(const torch::Tensor&)>;

// Seconds per call of one pooling, over `calls` calls.
double Time(const Pool& pool, const torch::Tensor& x, const torch::Tensor& g,
            bool backward, int calls) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) {
    torch::Tensor input = x.detach().requires_grad_(backward);
    torch::Tensor out = pool(input);
    if (backward) out.backward(g);
  }
  const std::chrono::duration<double> took =
      std::chrono::steady_clock::now() - start;
  return took.count() / calls;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 15;
  if (rounds < 1) {
    std::fprintf(stderr, "max_pool_bench: ROUNDS must be a positive number\n");
    return 2;
  }
  torch::set_num_threads(1);
  torch::manual_seed(1);
  const Pool libtorch = [](const torch::Tensor& t) {
    return F::max_pool2d(t, F::MaxPool2dFuncOptions(2));
  };
  const Pool tern = [](const torch::Tensor& t) {
    return tern::worker::MaxPool2x2(t);
  };
  // LeNet's two pooled activations (ReLU outputs) for Fashion-MNIST.
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{64, 32, 28, 28}, {64, 64, 14, 14}}) {
    const torch::Tensor x = torch::relu(torch::randn(shape));
    const torch::Tensor g =
        torch::randn({shape[0], shape[1], shape[2] / 2, shape[3] / 2});
    for (const bool backward : {false, true}) {
      std::vector<double> theirs, ours;
      for (int r = 0; r < rounds; ++r) {
        theirs.push_back(Time(libtorch, x, g, backward, 20));
        ours.push_back(Time(tern, x, g, backward, 20));
      }
      std::printf(
          "[%lld, %lld, %lld, %lld] %-16s libtorch %.3f ms  tern %.3f ms  "
          "libtorch / tern %.2f\n",
          static_cast<long long>(shape[0]), static_cast<long long>(shape[1]),
          static_cast<long long>(shape[2]), static_cast<long long>(shape[3]),
          backward ? "forward+backward" : "forward", Median(theirs) * 1e3,
          Median(ours) * 1e3, Median(theirs) / Median(ours));
    }
  }
  return 0;
}
