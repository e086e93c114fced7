#include "worker/models.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "torch/torch.h"
#include "worker/datasets.h"

namespace tern::worker {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<Model> Make(const std::string& name, const InputShape& in) {
  auto model = MakeModel(name, in);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : nullptr;
}

// (name, shape) of every tensor in named_parameters() order.
std::vector<std::pair<std::string, std::vector<int64_t>>> Spec(
    const Model& model) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> spec;
  for (const auto& p : model.named_parameters()) {
    spec.emplace_back(p.key(), p.value().sizes().vec());
  }
  return spec;
}

int64_t CountParameters(const Model& model) {
  int64_t count = 0;
  for (const auto& p : model.parameters()) count += p.numel();
  return count;
}

// --- output shapes -------------------------------------------------------

class OutputShapeTest
    : public ::testing::TestWithParam<std::tuple<std::string, InputShape>> {};

TEST_P(OutputShapeTest, LogitsAreBatchByClasses) {
  torch::manual_seed(0);
  const auto& [name, in] = GetParam();
  auto model = Make(name, in);
  ASSERT_NE(model, nullptr);
  for (int64_t batch : {1, 3}) {
    const torch::Tensor x =
        torch::randn({batch, in.channels, in.height, in.width});
    const torch::Tensor logits = model->forward(x);
    EXPECT_EQ(logits.sizes().vec(),
              (std::vector<int64_t>{batch, in.num_classes}));
    EXPECT_EQ(logits.scalar_type(), torch::kFloat32);
    EXPECT_TRUE(torch::isfinite(logits).all().item<bool>());
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllModels, OutputShapeTest,
    ::testing::Values(std::make_tuple("lenet", InputShape{1, 28, 28, 10}),
                      std::make_tuple("lenet", InputShape{3, 32, 32, 10}),
                      std::make_tuple("lenet", InputShape{1, 4, 5, 2}),
                      std::make_tuple("lenet", InputShape{2, 9, 11, 7}),
                      std::make_tuple("mlp", InputShape{1, 28, 28, 10}),
                      std::make_tuple("mlp", InputShape{3, 8, 8, 4}),
                      std::make_tuple("mlp", InputShape{1, 1, 1, 1}),
                      std::make_tuple("cifarnet", InputShape{3, 32, 32, 10}),
                      std::make_tuple("cifarnet", InputShape{3, 24, 24, 10}),
                      std::make_tuple("cifarnet", InputShape{1, 28, 28, 10}),
                      std::make_tuple("cifarnet", InputShape{3, 7, 9, 5}),
                      std::make_tuple("cifarnet", InputShape{1, 1, 1, 2})));

// --- parameter names, shapes and counts ----------------------------------

TEST(ModelsTest, LeNetHasTheDocumentedLayers) {
  auto model = Make("lenet", InputShape{});
  ASSERT_NE(model, nullptr);
  using Shape = std::vector<int64_t>;
  const std::vector<std::pair<std::string, Shape>> expected = {
      {"conv1.weight", {32, 1, 5, 5}},  {"conv1.bias", {32}},
      {"conv2.weight", {64, 32, 5, 5}}, {"conv2.bias", {64}},
      {"fc3.weight", {1024, 3136}},     {"fc3.bias", {1024}},
      {"logits.weight", {10, 1024}},    {"logits.bias", {10}}};
  EXPECT_EQ(Spec(*model), expected);
  EXPECT_EQ(CountParameters(*model),
            800 + 32 + 51200 + 64 + 3211264 + 1024 + 10240 + 10);
}

TEST(ModelsTest, MlpIsThreeHiddenLayersOf4096) {
  auto model = Make("mlp", InputShape{});
  ASSERT_NE(model, nullptr);
  using Shape = std::vector<int64_t>;
  const std::vector<std::pair<std::string, Shape>> expected = {
      {"fc1.weight", {4096, 784}},   {"fc1.bias", {4096}},
      {"fc2.weight", {4096, 4096}},  {"fc2.bias", {4096}},
      {"fc3.weight", {4096, 4096}},  {"fc3.bias", {4096}},
      {"logits.weight", {10, 4096}}, {"logits.bias", {10}}};
  EXPECT_EQ(Spec(*model), expected);
  EXPECT_EQ(CountParameters(*model),
            784 * 4096 + 4096 + 2 * (4096 * 4096 + 4096) + 4096 * 10 + 10);
}

TEST(ModelsTest, CifarNetFollowsTernGradsCifarNet) {
  using Shape = std::vector<int64_t>;
  // TernGrad's 24x24 crops: two "same" 3x3/2 poolings leave 6x6x64.
  auto cropped = Make("cifarnet", InputShape{3, 24, 24, 10});
  ASSERT_NE(cropped, nullptr);
  const std::vector<std::pair<std::string, Shape>> expected = {
      {"conv1.weight", {64, 3, 5, 5}},  {"conv1.bias", {64}},
      {"conv2.weight", {64, 64, 5, 5}}, {"conv2.bias", {64}},
      {"fc3.weight", {384, 2304}},      {"fc3.bias", {384}},
      {"fc4.weight", {192, 384}},       {"fc4.bias", {192}},
      {"logits.weight", {10, 192}},     {"logits.bias", {10}}};
  EXPECT_EQ(Spec(*cropped), expected);
  EXPECT_EQ(CountParameters(*cropped),
            4800 + 64 + 102400 + 64 + 884736 + 384 + 73728 + 192 + 1920 + 10);
  // Full 32x32 images: 8x8x64; odd sizes round up as TensorFlow's "SAME".
  auto full = Make("cifarnet", InputShape{3, 32, 32, 10});
  ASSERT_NE(full, nullptr);
  EXPECT_EQ(Spec(*full)[4].second, (Shape{384, 4096}));
  auto odd = Make("cifarnet", InputShape{3, 7, 9, 5});
  ASSERT_NE(odd, nullptr);
  EXPECT_EQ(Spec(*odd)[4].second, (Shape{384, 64 * 2 * 3}));
}

// Every parameter takes part in the forward pass: a ParamSpec tensor that
// never gets a gradient would travel as zeros forever.
TEST(ModelsTest, EveryParameterGetsAGradient) {
  torch::manual_seed(3);
  for (const std::string& name : ModelNames()) {
    SCOPED_TRACE(name);
    const InputShape in{3, 12, 12, 4};
    auto model = Make(name, in);
    ASSERT_NE(model, nullptr);
    const torch::Tensor x = torch::randn({2, 3, 12, 12});
    torch::nn::functional::cross_entropy(model->forward(x),
                                         torch::tensor({1, 3}, torch::kInt64))
        .backward();
    for (const auto& p : model->named_parameters()) {
      ASSERT_TRUE(p.value().grad().defined()) << p.key();
      EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0.0) << p.key();
    }
  }
}

// --- deterministic initialization ----------------------------------------

TEST(ModelsTest, InitializationIsAFunctionOfTheSeed) {
  for (const std::string& name : ModelNames()) {
    SCOPED_TRACE(name);
    const InputShape in = name == "cifarnet" ? InputShape{3, 24, 24, 10}
                                             : InputShape{1, 28, 28, 10};
    torch::manual_seed(7);
    auto a = Make(name, in);
    torch::manual_seed(7);
    auto b = Make(name, in);
    torch::manual_seed(8);
    auto c = Make(name, in);
    ASSERT_TRUE(a && b && c);
    const auto pa = a->parameters(), pb = b->parameters(), pc = c->parameters();
    ASSERT_EQ(pa.size(), pb.size());
    ASSERT_EQ(pa.size(), pc.size());
    for (size_t i = 0; i < pa.size(); ++i) {
      EXPECT_TRUE(torch::equal(pa[i], pb[i])) << "tensor " << i;
      // Every tensor is drawn at random, so another seed changes each one.
      EXPECT_FALSE(torch::equal(pa[i], pc[i])) << "tensor " << i;
    }
  }
}

// --- errors -----------------------------------------------------------------

TEST(ModelsTest, UnknownNameListsTheValidOnes) {
  auto model = MakeModel("resnet", InputShape{});
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(model.status().message()),
              HasSubstr("lenet, mlp, cifarnet"));
  EXPECT_THAT(std::string(model.status().message()), HasSubstr("resnet"));
}

TEST(ModelsTest, BadShapesAreRejected) {
  for (const std::string& name : ModelNames()) {
    for (const InputShape& in :
         {InputShape{0, 28, 28, 10}, InputShape{1, -1, 28, 10},
          InputShape{1, 28, 0, 10}, InputShape{1, 28, 28, 0}}) {
      auto model = MakeModel(name, in);
      ASSERT_FALSE(model.ok()) << name;
      EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
  // LeNet pools twice by 2: a 3-pixel side would vanish.
  auto small = MakeModel("lenet", InputShape{1, 3, 28, 10});
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ModelsTest, NamesAreTheDocumentedOnes) {
  EXPECT_EQ(ModelNames(),
            (std::vector<std::string>{"lenet", "mlp", "cifarnet"}));
}

// --- a short training run -------------------------------------------------

// A few dozen SGD steps on the synthetic set lower the loss on held-out
// examples: the model, its gradients and the data fit together. Sizes keep
// the MLP's 37M-parameter steps affordable on one thread of a reference BLAS.
struct TrainingCase {
  std::string model;
  uint32_t batch_size;
  int steps;
  double lr;
  double momentum;
  int64_t held_out;
  double max_ratio;  // of the held-out loss after and before training
};

class TrainingSanityTest : public ::testing::TestWithParam<TrainingCase> {};

TEST_P(TrainingSanityTest, SgdLowersTheHeldOutLoss) {
  const TrainingCase& c = GetParam();
  torch::set_num_threads(1);
  auto sets = LoadDataset("synthetic", "", /*seed=*/5);
  ASSERT_TRUE(sets.ok()) << sets.status();
  torch::manual_seed(5);
  auto model = Make(c.model, sets->train.shape);
  ASSERT_NE(model, nullptr);
  const torch::Tensor test_x = sets->test.images.slice(0, 0, c.held_out);
  const torch::Tensor test_y = sets->test.labels.slice(0, 0, c.held_out);
  auto held_out_loss = [&] {
    torch::NoGradGuard no_grad;
    return torch::nn::functional::cross_entropy(model->forward(test_x), test_y)
        .item<double>();
  };
  const double before = held_out_loss();
  torch::optim::SGD sgd(model->parameters(),
                        torch::optim::SGDOptions(c.lr).momentum(c.momentum));
  ShardedBatches batches(sets->train, 0, 1, c.batch_size, /*seed=*/5);
  for (int step = 0; step < c.steps; ++step) {
    auto [x, y] = batches.Next();
    sgd.zero_grad();
    torch::nn::functional::cross_entropy(model->forward(x), y).backward();
    sgd.step();
  }
  const double after = held_out_loss();
  // An untrained classifier is near uniform: log(10) = 2.30.
  EXPECT_NEAR(before, std::log(10.0), 0.3);
  EXPECT_LT(after, c.max_ratio * before)
      << "before " << before << " after " << after;
}

// Measured: LeNet 2.30 -> 0.25, the MLP 2.31 -> 0.97. The MLP's steps are
// small and few because each costs ~0.8 s on one thread of Debian's
// reference BLAS (37M parameters).
INSTANTIATE_TEST_SUITE_P(
    LeNetAndMlp, TrainingSanityTest,
    ::testing::Values(TrainingCase{"lenet", 16, 24, 0.02, 0.9, 128, 0.5},
                      TrainingCase{"mlp", 8, 12, 0.2, 0.0, 32, 0.7}),
    [](const auto& info) { return info.param.model; });

}  // namespace
}  // namespace tern::worker
