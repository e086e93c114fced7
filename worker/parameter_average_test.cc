#include "worker/parameter_average.h"

#include "gtest/gtest.h"
#include "torch/types.h"

namespace tern::worker {
namespace {

TEST(ParameterAverageTest, TheDecayRampsUpToItsValueAsTensorFlowsDoes) {
  const ParameterAverage average(0.9999, {torch::zeros({1})});
  EXPECT_DOUBLE_EQ(average.DecayAt(0), 0.1);
  EXPECT_DOUBLE_EQ(average.DecayAt(90), 91.0 / 100.0);
  EXPECT_DOUBLE_EQ(average.DecayAt(1'000'000), 0.9999);
}

TEST(ParameterAverageTest, AveragesTheUpdatesAndSwapsBitForBit) {
  torch::Tensor weights = torch::tensor({1.0f, -2.0f});
  ParameterAverage average(0.5, {weights});
  // Step 0: d = min(0.5, 0.1) = 0.1, so the average moves 90% of the way.
  weights.copy_(torch::tensor({3.0f, 2.0f}));
  average.Update(0);
  // Step 5: d = min(0.5, 6/15) = 0.4.
  weights.copy_(torch::tensor({5.0f, 0.0f}));
  average.Update(5);
  const torch::Tensor trained = weights.clone();
  average.Swap();
  const float first = 0.1f * 1.0f + 0.9f * 3.0f;    // 2.8
  const float second = 0.1f * -2.0f + 0.9f * 2.0f;  // 1.6
  EXPECT_NEAR(weights[0].item<float>(), 0.4f * first + 0.6f * 5.0f, 1e-5);
  EXPECT_NEAR(weights[1].item<float>(), 0.4f * second + 0.6f * 0.0f, 1e-5);
  average.Swap();
  EXPECT_TRUE(torch::equal(weights, trained));
}

TEST(ParameterAverageTest, LeavesTheGradientGraphAlone) {
  torch::Tensor weights = torch::ones({3}, torch::requires_grad());
  ParameterAverage average(0.9, {weights});
  average.Update(0);
  average.Swap();
  average.Swap();
  (weights * 2).sum().backward();
  EXPECT_TRUE(torch::equal(weights.grad(), torch::full({3}, 2.0f)));
}

}  // namespace
}  // namespace tern::worker
