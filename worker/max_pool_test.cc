#include "worker/max_pool.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "torch/nn/functional/pooling.h"

namespace tern::worker {
namespace {

namespace F = torch::nn::functional;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Pooled {
  torch::Tensor out, grad;  // the values, and the gradient backward gives x
};

// Pools `x` with `pool` and runs backward with the output gradient
// 1, 2, 3, ... (every output's gradient distinct, so a misrouted one shows).
template <typename Pool>
Pooled Run(const torch::Tensor& x, Pool pool) {
  const torch::Tensor input = x.detach().clone().requires_grad_();
  torch::Tensor out = pool(input);
  const torch::Tensor grad_out =
      torch::arange(1, out.numel() + 1, out.options()).view(out.sizes());
  out.backward(grad_out);
  return {out.detach(), input.grad()};
}

// MaxPool2x2 against libtorch's max_pool2d: values equal (NaN where it has
// NaN) and every gradient element bit-equal.
void ExpectSameAsLibtorch(const torch::Tensor& x) {
  const Pooled theirs = Run(x, [](const torch::Tensor& t) {
    return F::max_pool2d(t, F::MaxPool2dFuncOptions(2));
  });
  const Pooled ours =
      Run(x, [](const torch::Tensor& t) { return MaxPool2x2(t); });
  ASSERT_EQ(ours.out.sizes(), theirs.out.sizes()) << x.sizes();
  EXPECT_TRUE(torch::isclose(ours.out, theirs.out, /*rtol=*/0, /*atol=*/0,
                             /*equal_nan=*/true)
                  .all()
                  .item<bool>())
      << "values differ for input of shape " << x.sizes();
  EXPECT_TRUE(torch::equal(ours.grad, theirs.grad))
      << "gradients differ for input of shape " << x.sizes();
}

// Every window of four values drawn from `values` (all orders, ties and
// NaN included), laid out as one row of windows and as one window per plane.
std::vector<torch::Tensor> EveryWindow(const std::vector<float>& values) {
  const int64_t n = static_cast<int64_t>(values.size());
  const int64_t windows = n * n * n * n;
  torch::Tensor row = torch::empty({1, 1, 2, 2 * windows});
  torch::Tensor planes = torch::empty({1, windows, 2, 2});
  auto r = row.accessor<float, 4>();
  auto p = planes.accessor<float, 4>();
  for (int64_t w = 0; w < windows; ++w) {
    int64_t code = w;
    for (int k = 0; k < 4; ++k, code /= n) {
      const float v = values[code % n];
      r[0][0][k / 2][2 * w + k % 2] = v;
      p[0][w][k / 2][k % 2] = v;
    }
  }
  return {row, planes};
}

TEST(MaxPool2x2Test, EveryWindowOfTiesInfinitiesAndNaNAsLibtorch) {
  for (const torch::Tensor& x :
       EveryWindow({-kInf, -1.0f, 0.0f, 0.5f, kInf, kNaN})) {
    ExpectSameAsLibtorch(x);
  }
}

TEST(MaxPool2x2Test, ShapesAroundTheFourWindowGroupsAsLibtorch) {
  torch::manual_seed(7);
  // Widths of 1 to 11 windows (below, at and between groups of four), odd
  // heights and widths (their last row or column is left out), LeNet's
  // two poolings.
  std::vector<std::vector<int64_t>> shapes = {
      {64, 32, 28, 28}, {64, 64, 14, 14}, {3, 5, 7, 9},
      {2, 2, 2, 2},     {1, 1, 3, 3},     {2, 3, 5, 23}};
  for (int64_t width = 2; width <= 22; ++width) {
    shapes.push_back({1, 2, 4, width});
  }
  for (const auto& shape : shapes) {
    // ReLU of small integers: many ties, as after LeNet's ReLUs.
    ExpectSameAsLibtorch(torch::relu(torch::randn(shape).mul(2).round()));
    ExpectSameAsLibtorch(torch::randn(shape));
  }
}

TEST(MaxPool2x2Test, NonContiguousInputAsLibtorch) {
  torch::manual_seed(8);
  const torch::Tensor x = torch::randn({2, 3, 12, 10}).transpose(2, 3);
  ASSERT_FALSE(x.is_contiguous());
  ExpectSameAsLibtorch(x);
}

TEST(MaxPool2x2Test, OtherTypesAndTooSmallInputsGoToLibtorch) {
  torch::manual_seed(9);
  ExpectSameAsLibtorch(torch::randn({2, 3, 6, 6}, torch::kFloat64));
  // A plane smaller than a window: max_pool2d's own error.
  EXPECT_THROW(MaxPool2x2(torch::randn({1, 1, 1, 4})), c10::Error);
}

}  // namespace
}  // namespace tern::worker
