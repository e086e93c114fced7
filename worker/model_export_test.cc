// --save_model (worker/model_export.h): what the file holds is what the
// model held, and it loads with libtorch's own readers.
#include "worker/model_export.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "common/test_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "torch/script.h"
#include "torch/serialize.h"
#include "torch/torch.h"
#include "worker/models.h"

namespace tern::worker {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<Model> Make(const std::string& name) {
  InputShape shape{1, 8, 8, 4};
  shape.example_shape = {8, 8};
  absl::StatusOr<std::shared_ptr<Model>> model = MakeModel(name, shape);
  EXPECT_TRUE(model.ok()) << model.status();
  return *model;
}

// As training would leave them: every parameter moved off its initial value.
void Perturb(Model& model) {
  torch::NoGradGuard no_grad;
  for (torch::Tensor& param : model.parameters()) param.add_(0.25);
}

TEST(SaveModelTest, ABuiltInModelLoadsBackUnderItsParameterNames) {
  torch::manual_seed(1);
  std::shared_ptr<Model> trained = Make("lenet");
  Perturb(*trained);
  const std::string path = FreshTestDir() + "/out/lenet.pt";
  ASSERT_TRUE(CheckModelPath(path).ok());
  absl::StatusOr<uint64_t> bytes = SaveModel(*trained, path);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, std::filesystem::file_size(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  // A fresh model of another seed, loaded from the file: the same values.
  torch::manual_seed(2);
  std::shared_ptr<Model> loaded = Make("lenet");
  torch::serialize::InputArchive archive;
  archive.load_from(path);
  loaded->load(archive);
  const auto want = trained->named_parameters();
  const auto got = loaded->named_parameters();
  ASSERT_EQ(got.size(), want.size());
  for (const auto& param : want) {
    EXPECT_TRUE(torch::equal(got[param.key()], param.value())) << param.key();
  }
}

TEST(SaveModelTest, ATorchScriptModelKeepsItsCodeAndTheTrainedValues) {
  const char* root = std::getenv("TEST_SRCDIR");
  const std::string source = std::string(root == nullptr ? "." : root) +
                             "/tern/examples/tiny_bn_net.pt";
  std::shared_ptr<Model> trained = Make(source);
  Perturb(*trained);
  trained->eval();
  const std::string path = FreshTestDir() + "/tiny_trained.pt";
  ASSERT_TRUE(SaveModel(*trained, path).ok());

  torch::jit::Module loaded = torch::jit::load(path);
  const auto want = trained->named_parameters();
  size_t count = 0;
  for (const auto& param : loaded.named_parameters()) {
    ASSERT_TRUE(want.contains(param.name)) << param.name;
    EXPECT_TRUE(torch::equal(param.value, want[param.name])) << param.name;
    ++count;
  }
  EXPECT_EQ(count, want.size());
  // Its forward is the trained model's (batch norm's buffers included).
  loaded.eval();
  const torch::Tensor x = torch::randn({3, 8, 8});
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::allclose(loaded.forward({x}).toTensor(),
                              trained->forward(x.reshape({3, 1, 8, 8}))));
}

TEST(SaveModelTest, AReplacedFileIsWhole) {
  torch::manual_seed(1);
  std::shared_ptr<Model> model = Make("mlp");
  const std::string path = FreshTestDir() + "/twice.pt";
  ASSERT_TRUE(SaveModel(*model, path).ok());
  Perturb(*model);
  ASSERT_TRUE(SaveModel(*model, path).ok());
  torch::serialize::InputArchive archive;
  archive.load_from(path);
  torch::serialize::InputArchive logits;
  ASSERT_TRUE(archive.try_read("logits", logits));
  torch::Tensor saved;
  logits.read("bias", saved);
  EXPECT_TRUE(torch::equal(saved, model->named_parameters()["logits.bias"]));
}

TEST(CheckModelPathTest, RefusesWhatCannotTakeTheFile) {
  const std::string tmp = FreshTestDir();
  const std::string dir = tmp + "/a_dir";
  std::filesystem::create_directories(dir);
  absl::Status status = CheckModelPath(dir);
  EXPECT_TRUE(absl::IsInvalidArgument(status));
  EXPECT_THAT(status.message(), HasSubstr("is a directory"));
  EXPECT_THAT(status.message(), HasSubstr(dir + "/model.pt"));

  // A file where its directory would be.
  const std::string file = tmp + "/a_file";
  std::ofstream(file) << "x";
  status = CheckModelPath(file + "/model.pt");
  EXPECT_TRUE(absl::IsInvalidArgument(status));
  EXPECT_THAT(status.message(), HasSubstr("cannot make its directory"));

  EXPECT_TRUE(absl::IsInvalidArgument(CheckModelPath("")));
}

TEST(SaveModelTest, ALinkAtTheTemporaryNameIsNotFollowed) {
  const std::string tmp = FreshTestDir();
  const std::string target = tmp + "/precious";
  std::ofstream(target) << "keep";
  const std::string path = tmp + "/linked.pt";
  std::filesystem::create_symlink(target, path + ".tmp");
  absl::Status status = CheckModelPath(path);
  EXPECT_TRUE(absl::IsInvalidArgument(status));
  EXPECT_THAT(status.message(), HasSubstr(path + ".tmp"));
  // Planted again after the check (which removed it), it fails the save.
  std::filesystem::create_symlink(target, path + ".tmp");
  torch::manual_seed(1);
  EXPECT_FALSE(SaveModel(*Make("mlp"), path).ok());
  EXPECT_FALSE(std::filesystem::exists(path));
  std::ifstream in(target);
  std::string kept;
  in >> kept;
  EXPECT_EQ(kept, "keep");
}

TEST(CheckModelPathTest, MakesTheDirectoryAndLeavesNoFile) {
  const std::string tmp = FreshTestDir();
  const std::string path = tmp + "/new/dir/model.pt";
  ASSERT_TRUE(CheckModelPath(path).ok());
  EXPECT_TRUE(std::filesystem::is_directory(tmp + "/new/dir"));
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

}  // namespace
}  // namespace tern::worker
