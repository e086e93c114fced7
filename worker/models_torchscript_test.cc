// --model=PATH.pt (worker/models_torchscript.cc) and --loss
// (worker/loss.h) on examples/tiny_bn_net.py's TorchScript files, which
// the build makes with Debian's python3-torch.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/checksum.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "torch/optim/sgd.h"
#include "worker/datasets.h"
#include "worker/loss.h"
#include "worker/models.h"
#include "worker/param_buffer.h"

namespace tern::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Runfile(const std::string& path) {
  const char* root = std::getenv("TEST_SRCDIR");
  return std::string(root == nullptr ? "." : root) + "/tern/" + path;
}

const std::string& TinyBnNet() {
  static const std::string path = Runfile("examples/tiny_bn_net.pt");
  return path;
}
const std::string& TinyBnNetOwnLoss() {
  static const std::string path = Runfile("examples/tiny_bn_net_own_loss.pt");
  return path;
}

// The npy files' shape: 8x8 examples (seen by built-in models as 1x8x8),
// 4 classes.
InputShape EightByEight() {
  InputShape shape{1, 8, 8, 4};
  shape.example_shape = {8, 8};
  return shape;
}

std::shared_ptr<Model> Load(const std::string& path) {
  absl::StatusOr<std::shared_ptr<Model>> model =
      MakeModel(path, EightByEight());
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : nullptr;
}

// 4-class data: example i has label i % 4 and a pattern that tells it.
Dataset Classes(int64_t n) {
  Dataset data;
  data.labels = torch::arange(n, torch::kInt64).remainder(4);
  data.images =
      torch::randn({n, 1, 8, 8}) * 0.1 + torch::one_hot(data.labels, 64)
                                                 .to(torch::kFloat32)
                                                 .reshape({n, 1, 8, 8}) *
                                             3;
  data.shape = EightByEight();
  return data;
}

std::string WriteFile(const std::string& name, const std::string& bytes) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path =
      std::string(tmp == nullptr ? "/tmp" : tmp) + "/" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

TEST(TorchScriptModelTest, ParametersAreTheModulesInTheirOrder) {
  std::shared_ptr<Model> model = Load(TinyBnNet());
  ASSERT_NE(model, nullptr);
  absl::StatusOr<ParamBuffer> params = ParamBuffer::Create(*model);
  ASSERT_TRUE(params.ok()) << params.status();
  // Batch norm's running_mean, running_var and num_batches_tracked are
  // buffers, not parameters: they are not in the ParamSpec.
  EXPECT_THAT(params->names(),
              ElementsAre("fc1.weight", "fc1.bias", "bn1.weight", "bn1.bias",
                          "logits.weight", "logits.bias"));
  EXPECT_THAT(params->tensor_elements(),
              ElementsAre(64 * 32, 32, 32, 32, 32 * 4, 4));
  std::vector<std::string> buffers;
  for (const auto& b : model->named_buffers()) buffers.push_back(b.key());
  EXPECT_THAT(buffers, ElementsAre("bn1.running_mean", "bn1.running_var",
                                   "bn1.num_batches_tracked"));
  EXPECT_EQ(model->description(), "model " + TinyBnNet());
  EXPECT_FALSE(model->returns_loss());
}

TEST(TorchScriptModelTest, FrozenParametersAreBuffers) {
  std::shared_ptr<Model> model =
      Load(Runfile("examples/tiny_bn_net_frozen.pt"));
  ASSERT_NE(model, nullptr);
  absl::StatusOr<ParamBuffer> params = ParamBuffer::Create(*model);
  ASSERT_TRUE(params.ok()) << params.status();
  // fc1 (requires_grad False) is neither exchanged nor given to the
  // optimizer; it moves with the model as a buffer.
  EXPECT_THAT(params->names(), ElementsAre("bn1.weight", "bn1.bias",
                                           "logits.weight", "logits.bias"));
  std::vector<std::string> buffers;
  for (const auto& b : model->named_buffers()) buffers.push_back(b.key());
  EXPECT_THAT(buffers,
              ElementsAre("fc1.weight", "fc1.bias", "bn1.running_mean",
                          "bn1.running_var", "bn1.num_batches_tracked"));
}

TEST(TorchScriptModelTest, FileHashIsTheChecksumOfTheBytes) {
  std::shared_ptr<Model> model = Load(TinyBnNet());
  ASSERT_NE(model, nullptr);
  ASSERT_TRUE(model->file_hash().has_value());
  EXPECT_EQ(*model->file_hash(), ChecksumOf(ReadFile(TinyBnNet())));
  std::shared_ptr<Model> other = Load(TinyBnNetOwnLoss());
  ASSERT_NE(other, nullptr);
  EXPECT_NE(*other->file_hash(), *model->file_hash());
  // Built-in models have none: their ParamSpec hash is what the shards see.
  absl::StatusOr<std::shared_ptr<Model>> lenet =
      MakeModel("lenet", EightByEight());
  ASSERT_TRUE(lenet.ok());
  EXPECT_FALSE((*lenet)->file_hash().has_value());
}

TEST(TorchScriptModelTest, TwoLoadsStartIdentical) {
  // Every worker loads the file: the same parameters, whatever the seed.
  torch::manual_seed(1);
  std::shared_ptr<Model> a = Load(TinyBnNet());
  torch::manual_seed(2);
  std::shared_ptr<Model> b = Load(TinyBnNet());
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(ParamBuffer::Create(*a)->Checksum(),
            ParamBuffer::Create(*b)->Checksum());
}

TEST(TorchScriptModelTest, TrainingTheMirrorTrainsTheModule) {
  torch::manual_seed(0);
  std::shared_ptr<Model> model = Load(TinyBnNet());
  ASSERT_NE(model, nullptr);
  absl::StatusOr<ParamBuffer> params = ParamBuffer::Create(*model);
  ASSERT_TRUE(params.ok());
  const Dataset data = Classes(64);
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.1));
  model->train();
  const uint64_t before = params->Checksum();
  const torch::Tensor running_mean =
      model->named_buffers()["bn1.running_mean"].clone();
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    sgd.zero_grad();
    const torch::Tensor loss =
        BatchLoss(*model, LossKind::kCrossEntropy, data.images, data.labels);
    loss.backward();
    // The gradients reach the parameters the ParamBuffer holds.
    params->GatherGradients();
    if (step == 0) {
      double norm = 0;
      for (float g : params->gradients()) norm += g * g;
      EXPECT_GT(norm, 0);
    }
    sgd.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, 0.5 * first);
  EXPECT_NE(params->Checksum(), before);
  // Batch norm updated its running statistics in training mode.
  EXPECT_FALSE(
      torch::equal(model->named_buffers()["bn1.running_mean"], running_mean));
  // eval() reaches the TorchScript module: batch norm uses its running
  // statistics, so one example's output does not depend on its batch.
  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor alone = model->forward(data.images.slice(0, 0, 1));
  const torch::Tensor in_batch = model->forward(data.images).slice(0, 0, 1);
  EXPECT_TRUE(torch::allclose(alone, in_batch, 1e-5, 1e-6));
  model->train();
  const torch::Tensor train_alone = model->forward(data.images.slice(0, 0, 2));
  const torch::Tensor train_batch = model->forward(data.images).slice(0, 0, 2);
  EXPECT_FALSE(torch::allclose(train_alone, train_batch, 1e-5, 1e-6));
}

TEST(TorchScriptModelTest, ModelWithItsOwnLoss) {
  torch::manual_seed(0);
  std::shared_ptr<Model> model = Load(TinyBnNetOwnLoss());
  ASSERT_NE(model, nullptr);
  EXPECT_TRUE(model->returns_loss());
  absl::StatusOr<ParamBuffer> params = ParamBuffer::Create(*model);
  ASSERT_TRUE(params.ok());
  EXPECT_EQ(params->names().front(), "net.fc1.weight");
  const Dataset data = Classes(64);
  // --loss is the model's own, whatever the flag says: label smoothing
  // keeps it above plain cross-entropy.
  EXPECT_TRUE(CheckModelFitsData(*model, LossKind::kMse, data, "y").ok());
  const torch::Tensor loss =
      BatchLoss(*model, LossKind::kMse, data.images, data.labels);
  EXPECT_EQ(loss.dim(), 0);
  loss.backward();
  params->GatherGradients();
  double norm = 0;
  for (float g : params->gradients()) norm += g * g;
  EXPECT_GT(norm, 0);
  torch::NoGradGuard no_grad;
  const BatchEvaluation eval =
      EvaluateBatch(*model, LossKind::kCrossEntropy, data.images, data.labels);
  EXPECT_EQ(eval.correct, -1);
  EXPECT_GT(eval.loss_sum, 0);
}

TEST(TorchScriptModelTest, OutputThatDoesNotFitTheLabels) {
  std::shared_ptr<Model> model = Load(TinyBnNet());
  ASSERT_NE(model, nullptr);
  Dataset data = Classes(8);
  EXPECT_TRUE(
      CheckModelFitsData(*model, LossKind::kCrossEntropy, data, "y").ok());
  data.shape.num_classes = 10;  // labels up to 9; the model has 4 outputs
  absl::Status status =
      CheckModelFitsData(*model, LossKind::kCrossEntropy, data, "DIR/y.npy");
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr(TinyBnNet()));
  EXPECT_THAT(status.message(), HasSubstr("output [2, 4]"));
  EXPECT_THAT(status.message(), HasSubstr("classes >= 10"));
  EXPECT_THAT(status.message(), HasSubstr("DIR/y.npy"));
  EXPECT_TRUE(model->is_training());

  // --loss=mse: float targets of another shape.
  Dataset regression = Classes(8);
  regression.labels = torch::zeros({8, 3});
  status = CheckModelFitsData(*model, LossKind::kMse, regression, "DIR/y.npy");
  EXPECT_THAT(status.message(), HasSubstr("output [2, 4]"));
  EXPECT_THAT(status.message(), HasSubstr("[2, 3]"));
  regression.labels = torch::zeros({8, 4});
  EXPECT_TRUE(CheckModelFitsData(*model, LossKind::kMse, regression, "y").ok());
  // The wrong kind of targets for the loss.
  status = CheckModelFitsData(*model, LossKind::kCrossEntropy, regression,
                              "DIR/y.npy");
  EXPECT_THAT(status.message(), HasSubstr("DIR/y.npy holds float32 targets"));
  status = CheckModelFitsData(*model, LossKind::kMse, data, "DIR/y.npy");
  EXPECT_THAT(status.message(), HasSubstr("int64 class labels"));

  // Inputs the model cannot take: its own error, named.
  Dataset wide = Classes(8);
  wide.images = torch::zeros({8, 1, 8, 9});
  status = CheckModelFitsData(*model, LossKind::kCrossEntropy, wide, "y");
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr(TinyBnNet() + " fails on"));
}

TEST(TorchScriptModelTest, MalformedFiles) {
  absl::StatusOr<std::shared_ptr<Model>> model =
      MakeModel(WriteFile("not_a_zip.pt", "hello"), EightByEight());
  EXPECT_TRUE(absl::IsInvalidArgument(model.status())) << model.status();
  EXPECT_THAT(model.status().message(), HasSubstr("not_a_zip.pt"));
  EXPECT_THAT(model.status().message(), HasSubstr("not a TorchScript module"));

  // Half of a good file.
  const std::string good = ReadFile(TinyBnNet());
  model = MakeModel(WriteFile("truncated.pt", good.substr(0, good.size() / 2)),
                    EightByEight());
  EXPECT_TRUE(absl::IsInvalidArgument(model.status())) << model.status();
  EXPECT_THAT(model.status().message(), HasSubstr("truncated.pt"));

  model = MakeModel("/nonexistent/m.pt", EightByEight());
  EXPECT_TRUE(absl::IsNotFound(model.status())) << model.status();
  EXPECT_THAT(model.status().message(), HasSubstr("/nonexistent/m.pt"));

  model = MakeModel("resnet", EightByEight());
  EXPECT_THAT(model.status().message(), HasSubstr("PATH.pt"));
}

TEST(LossTest, ParseLoss) {
  EXPECT_EQ(*ParseLoss("cross_entropy"), LossKind::kCrossEntropy);
  EXPECT_EQ(*ParseLoss("mse"), LossKind::kMse);
  EXPECT_THAT(ParseLoss("l1").status().message(),
              HasSubstr("cross_entropy, mse"));
}

}  // namespace
}  // namespace tern::worker
