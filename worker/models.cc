#include "worker/models.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "torch/nn.h"
#include "torch/serialize.h"
#include "worker/max_pool.h"

namespace tern::worker {
namespace {

namespace F = torch::nn::functional;

// Output size of a "SAME" convolution or pooling with stride 2 (TensorFlow's
// ceil(size / stride)), the padding of the TensorFlow models copied here.
int64_t SameOut2(int64_t size) { return (size + 1) / 2; }

// LeNet for TernGrad's MNIST experiments (Wen et al. 2017, Sec. 4.1) in
// the widths of TensorFlow's LeNet-5-like MNIST example: conv 5x5x32 "same"
// -> ReLU -> maxpool 2/2 -> conv 5x5x64 "same" -> ReLU -> maxpool 2/2 ->
// fc 1024 -> ReLU -> logits. For 1x28x28 inputs: 800+32 + 51200+64 +
// 3211264+1024 + 10240+10 parameters. TernGrad's code (its slim `lenet`)
// has the same structure in Caffe's widths (20, 50, 500) and, like this
// one, no dropout.
class LeNet : public Model {
 public:
  explicit LeNet(const InputShape& in)
      : flat_(64 * (in.height / 4) * (in.width / 4)) {
    conv1_ = register_module(
        "conv1", torch::nn::Conv2d(
                     torch::nn::Conv2dOptions(in.channels, 32, 5).padding(2)));
    conv2_ = register_module(
        "conv2",
        torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 5).padding(2)));
    fc3_ = register_module("fc3", torch::nn::Linear(flat_, 1024));
    logits_ =
        register_module("logits", torch::nn::Linear(1024, in.num_classes));
  }

  std::string description() const override { return "model lenet"; }

  torch::Tensor forward(torch::Tensor x) override {
    x = MaxPool2x2(torch::relu(conv1_(x)));
    x = MaxPool2x2(torch::relu(conv2_(x)));
    x = torch::relu(fc3_(x.flatten(1)));
    return logits_(x);
  }

 private:
  int64_t flat_;
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::Linear fc3_{nullptr}, logits_{nullptr};
};

// The MNIST network of Dryden et al. 2016 (Sec. 4) that Aji & Heafield 2017
// (Sec. 5) reuse: flatten -> 3 x (fc 4096 -> ReLU) -> logits.
class Mlp : public Model {
 public:
  explicit Mlp(const InputShape& in) {
    const int64_t flat = in.channels * in.height * in.width;
    fc1_ = register_module("fc1", torch::nn::Linear(flat, kHidden));
    fc2_ = register_module("fc2", torch::nn::Linear(kHidden, kHidden));
    fc3_ = register_module("fc3", torch::nn::Linear(kHidden, kHidden));
    logits_ =
        register_module("logits", torch::nn::Linear(kHidden, in.num_classes));
  }

  std::string description() const override { return "model mlp"; }

  torch::Tensor forward(torch::Tensor x) override {
    x = torch::relu(fc1_(x.flatten(1)));
    x = torch::relu(fc2_(x));
    x = torch::relu(fc3_(x));
    return logits_(x);
  }

 private:
  static constexpr int64_t kHidden = 4096;
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr}, fc3_{nullptr},
      logits_{nullptr};
};

// TensorFlow's "SAME" max pooling, 3x3 window, stride 2: TensorFlow pads
// the bottom/right first (for an even size it adds one row/column there
// only), which libtorch's symmetric `padding` cannot express, so pad with
// -inf explicitly and pool without padding.
torch::Tensor SameMaxPool3x2(const torch::Tensor& x) {
  auto pads = [](int64_t size) {
    const int64_t total =
        std::max<int64_t>((SameOut2(size) - 1) * 2 + 3 - size, 0);
    return std::make_pair(total / 2, total - total / 2);
  };
  const auto [top, bottom] = pads(x.size(2));
  const auto [left, right] = pads(x.size(3));
  const torch::Tensor padded = torch::constant_pad_nd(
      x, {left, right, top, bottom}, -std::numeric_limits<float>::infinity());
  return F::max_pool2d(padded, F::MaxPool2dFuncOptions(3).stride(2));
}

// The CIFAR-10 ConvNet of TernGrad (Wen et al. 2017, Sec. 4.1, Table 1;
// its code's `cifar10_alexnet`, TensorFlow's CIFAR-10 example network):
// conv 5x5x64 "same" -> ReLU -> maxpool 3/2 "same" -> LRN -> conv 5x5x64 ->
// ReLU -> LRN -> maxpool 3/2 -> fc 384 -> ReLU -> fc 192 -> ReLU -> logits,
// no dropout. The flattened size follows the input (TernGrad's 24x24 crops
// give 6x6x64, full 32x32 images 8x8x64).
class CifarNet : public Model {
 public:
  explicit CifarNet(const InputShape& in)
      : flat_(64 * SameOut2(SameOut2(in.height)) *
              SameOut2(SameOut2(in.width))) {
    conv1_ = register_module(
        "conv1", torch::nn::Conv2d(
                     torch::nn::Conv2dOptions(in.channels, 64, 5).padding(2)));
    conv2_ = register_module(
        "conv2",
        torch::nn::Conv2d(torch::nn::Conv2dOptions(64, 64, 5).padding(2)));
    fc3_ = register_module("fc3", torch::nn::Linear(flat_, 384));
    fc4_ = register_module("fc4", torch::nn::Linear(384, 192));
    logits_ = register_module("logits", torch::nn::Linear(192, in.num_classes));
  }

  std::string description() const override { return "model cifarnet"; }

  torch::Tensor forward(torch::Tensor x) override {
    x = Lrn(SameMaxPool3x2(torch::relu(conv1_(x))));
    x = SameMaxPool3x2(Lrn(torch::relu(conv2_(x))));
    x = torch::relu(fc3_(x.flatten(1)));
    x = torch::relu(fc4_(x));
    return logits_(x);
  }

 private:
  // TensorFlow: lrn(depth_radius=4, bias=1, alpha=0.001/9, beta=0.75), where
  // alpha multiplies the sum over the 9 channels; libtorch's alpha multiplies
  // their mean, hence alpha = 9 * 0.001/9 = 0.001.
  static torch::Tensor Lrn(const torch::Tensor& x) {
    return F::local_response_norm(
        x, F::LocalResponseNormFuncOptions(9).alpha(0.001).beta(0.75).k(1.0));
  }

  int64_t flat_;
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::Linear fc3_{nullptr}, fc4_{nullptr}, logits_{nullptr};
};

absl::Status CheckShape(absl::string_view name, const InputShape& in,
                        int64_t min_side) {
  if (in.channels <= 0 || in.height <= 0 || in.width <= 0 ||
      in.num_classes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", name, ": input shape must be positive, got channels=",
        in.channels, " height=", in.height, " width=", in.width,
        " num_classes=", in.num_classes));
  }
  if (in.height < min_side || in.width < min_side) {
    return absl::InvalidArgumentError(
        absl::StrCat("model ", name, " needs inputs of at least ", min_side,
                     "x", min_side, ", got ", in.height, "x", in.width));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> ModelNames() { return {"lenet", "mlp", "cifarnet"}; }

torch::Tensor Model::ForwardLoss(torch::Tensor x, torch::Tensor targets) {
  // Our invariant: callers ask returns_loss() first.
  TORCH_CHECK(false, description(), " does not compute its own loss");
}

namespace {

// `module`'s own parameters and buffers, copied to the CPU, and its
// submodules' in nested archives: what torch::nn::Module::save writes, but
// readable on a machine without the worker's --device.
void WriteOnCpu(const torch::nn::Module& module,
                torch::serialize::OutputArchive& archive) {
  for (const auto& param : module.named_parameters(/*recurse=*/false)) {
    archive.write(param.key(), param.value().detach().to(torch::kCPU));
  }
  for (const auto& buffer : module.named_buffers(/*recurse=*/false)) {
    archive.write(buffer.key(), buffer.value().to(torch::kCPU),
                  /*is_buffer=*/true);
  }
  for (const auto& child : module.named_children()) {
    torch::serialize::OutputArchive nested(archive.compilation_unit());
    WriteOnCpu(*child.value(), nested);
    archive.write(child.key(), nested);
  }
}

}  // namespace

void Model::SaveFile(const std::string& path) const {
  torch::serialize::OutputArchive archive;
  WriteOnCpu(*this, archive);
  archive.save_to(path);
}

bool IsTorchScriptPath(absl::string_view name) {
  return absl::EndsWith(name, ".pt");
}

absl::StatusOr<std::shared_ptr<Model>> MakeModel(absl::string_view name,
                                                 const InputShape& input) {
  if (IsTorchScriptPath(name)) {
    return LoadTorchScriptModel(std::string(name), input);
  }
  if (name == "lenet") {
    TERN_RETURN_IF_ERROR(CheckShape(name, input, 4));
    return std::shared_ptr<Model>(std::make_shared<LeNet>(input));
  }
  if (name == "mlp") {
    TERN_RETURN_IF_ERROR(CheckShape(name, input, 1));
    return std::shared_ptr<Model>(std::make_shared<Mlp>(input));
  }
  if (name == "cifarnet") {
    TERN_RETURN_IF_ERROR(CheckShape(name, input, 1));
    return std::shared_ptr<Model>(std::make_shared<CifarNet>(input));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown model \"", name, "\"; valid models: ",
      absl::StrJoin(ModelNames(), ", "), ", or a TorchScript file PATH.pt"));
}

}  // namespace tern::worker
