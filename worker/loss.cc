#include "worker/loss.h"

#include <algorithm>
#include <exception>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "torch/nn/functional/loss.h"

namespace tern::worker {
namespace {

namespace F = torch::nn::functional;

std::string ShapeText(const torch::Tensor& t) {
  return absl::StrCat("[", absl::StrJoin(t.sizes(), ", "), "]");
}

// The reason of a libtorch error: its first line, or for an error in
// TorchScript code (which starts "The following operation failed in the
// TorchScript interpreter." and goes on with a traceback) the line of its
// last "Error: ".
std::string Reason(const std::exception& e) {
  const std::string text = e.what();
  const size_t error = text.rfind("Error: ");
  if (text.find("TorchScript interpreter") != std::string::npos &&
      error != std::string::npos) {
    const size_t begin = text.rfind('\n', error);
    const size_t start = begin == std::string::npos ? 0 : begin + 1;
    return text.substr(start, text.find('\n', error) - start);
  }
  return text.substr(0, text.find('\n'));
}

absl::Status CheckOutput(const Model& model, LossKind kind,
                         const torch::Tensor& out, const torch::Tensor& y,
                         int64_t num_classes, const std::string& targets_name) {
  if (model.returns_loss()) {
    if (out.dim() != 0 || !out.is_floating_point()) {
      return absl::InvalidArgumentError(absl::StrCat(
          model.description(),
          " sets returns_loss, but forward(x, y) returned ", ShapeText(out),
          " ", c10::toString(out.scalar_type()), ", not a scalar loss"));
    }
    return absl::OkStatus();
  }
  if (out.scalar_type() != torch::kFloat32) {
    return absl::InvalidArgumentError(
        absl::StrCat(model.description(), ": forward(x) returned ",
                     c10::toString(out.scalar_type()), ", not float32"));
  }
  if (kind == LossKind::kCrossEntropy) {
    if (out.dim() != 2 || out.size(0) != y.size(0) ||
        out.size(1) < num_classes) {
      return absl::InvalidArgumentError(absl::StrCat(
          model.description(), ": output ", ShapeText(out), " for ", y.size(0),
          " examples does not fit the labels of ", targets_name,
          ": cross-entropy needs [batch, classes] with classes >= ",
          num_classes, " (the largest label + 1)"));
    }
    return absl::OkStatus();
  }
  if (!out.sizes().equals(y.sizes())) {
    return absl::InvalidArgumentError(absl::StrCat(
        model.description(), ": output ", ShapeText(out),
        " does not fit the targets of ", targets_name, ", ", ShapeText(y),
        " for ", y.size(0), " examples: --loss=mse needs the targets' shape"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LossKind> ParseLoss(absl::string_view name) {
  if (name == "cross_entropy") return LossKind::kCrossEntropy;
  if (name == "mse") return LossKind::kMse;
  return absl::InvalidArgumentError(absl::StrCat(
      "--loss=", name, " is not one of ", absl::StrJoin(LossNames(), ", ")));
}

std::vector<std::string> LossNames() { return {"cross_entropy", "mse"}; }

torch::Tensor BatchLoss(Model& model, LossKind kind, const torch::Tensor& x,
                        const torch::Tensor& targets) {
  if (model.returns_loss()) return model.ForwardLoss(x, targets);
  const torch::Tensor out = model.forward(x);
  if (kind == LossKind::kMse) return F::mse_loss(out, targets);
  return F::cross_entropy(out, targets);
}

BatchEvaluation EvaluateBatch(Model& model, LossKind kind,
                              const torch::Tensor& x,
                              const torch::Tensor& targets) {
  const int64_t n = x.size(0);
  if (model.returns_loss()) {
    return {model.ForwardLoss(x, targets).item<double>() * n, -1};
  }
  const torch::Tensor out = model.forward(x);
  if (kind == LossKind::kMse) {
    return {F::mse_loss(out, targets).item<double>() * n, -1};
  }
  return {F::cross_entropy(out, targets,
                           F::CrossEntropyFuncOptions().reduction(torch::kSum))
              .item<double>(),
          out.argmax(1).eq(targets).sum().item<int64_t>()};
}

absl::Status CheckModelFitsData(Model& model, LossKind kind,
                                const Dataset& train,
                                const std::string& targets_name) {
  const bool labels = train.labels.scalar_type() == torch::kInt64;
  if (!model.returns_loss()) {
    if (kind == LossKind::kCrossEntropy && !labels) {
      return absl::InvalidArgumentError(absl::StrCat(
          targets_name, " holds ",
          train.labels.scalar_type() == torch::kFloat32
              ? "float32"
              : c10::toString(train.labels.scalar_type()),
          " targets; cross-entropy needs int64 class labels (--loss=mse "
          "trains a regression on float32 targets)"));
    }
    if (kind == LossKind::kMse && labels) {
      return absl::InvalidArgumentError(absl::StrCat(
          targets_name,
          " holds int64 class labels; --loss=mse needs float32 targets "
          "(--loss=cross_entropy trains a classifier on labels)"));
    }
  }
  const int64_t n = std::min<int64_t>(2, train.images.size(0));
  const torch::Device device = model.parameters().front().device();
  const torch::Tensor x = train.images.slice(0, 0, n).to(device);
  const torch::Tensor y = train.labels.slice(0, 0, n).to(device);
  torch::NoGradGuard no_grad;
  model.eval();
  torch::Tensor out;
  try {
    out = model.returns_loss() ? model.ForwardLoss(x, y) : model.forward(x);
  } catch (const std::exception& e) {
    model.train();
    return absl::InvalidArgumentError(
        absl::StrCat(model.description(), " fails on the first ", n,
                     " training examples: ", Reason(e)));
  }
  model.train();
  return CheckOutput(model, kind, out, y, train.shape.num_classes,
                     targets_name);
}

}  // namespace tern::worker
