// The classifiers a worker trains (DESIGN section 1: worker/ holds the
// models). Each is the network a paper tern reproduces used, adapted to the
// dataset's input shape:
//
//   "lenet"    the LeNet of TernGrad's MNIST experiments (Wen et al. 2017,
//              Sec. 4.1, Fig. 3) in the widths of TensorFlow's LeNet-5-like
//              MNIST example: two 5x5 convolutions (32, 64 channels, "same"
//              padding) with ReLU and 2x2 max pooling, a 1024-unit ReLU layer
//              and the classifier. (TernGrad's own code trains the same
//              structure in Caffe's widths, 20 / 50 / 500.)
//   "mlp"      Dryden et al. 2016 (Sec. 4) and Aji & Heafield 2017 (Sec. 5):
//              three fully connected ReLU layers of 4096 units and the
//              classifier.
//   "cifarnet" the ConvNet TernGrad trains on CIFAR-10 (Wen et al. 2017,
//              Sec. 4.1, Table 1; TensorFlow's CIFAR-10 example network):
//              two 5x5x64 convolutions with ReLU, 3x3/2 max pooling and
//              local response normalization, then fully connected layers of
//              384 and 192 ReLU units and the classifier.
//
// Parameter names are stable and are the ParamSpec's (DESIGN section 2):
// "conv1.weight", "conv1.bias", ... The classifier layer is named "logits" in
// every model, so "logits.weight,logits.bias" keeps the last layer in fp32
// whatever the model (TernGrad Sec. 4.2 keeps it unquantized).
//
// Initialization is libtorch's default for each layer (Kaiming-uniform
// weights, uniform biases), drawn from libtorch's global generator: after
// torch::manual_seed(s), MakeModel builds the same parameters bit for bit.
//
// Threads: a Model is a torch::nn::Module; like any module it is not safe to
// train from two threads at once.
#ifndef TERN_WORKER_MODELS_H_
#define TERN_WORKER_MODELS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "torch/nn/module.h"
#include "worker/input_shape.h"

namespace tern::worker {

// A model: forward(x [B,C,H,W] float32) -> logits [B, num_classes] (or,
// with --loss=mse, predictions shaped like the targets).
class Model : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor x) = 0;

  // True for a model that computes its own loss: ForwardLoss, not forward,
  // is what the worker calls, and forward is never called.
  virtual bool returns_loss() const { return false; }
  // The model's own loss on inputs `x` and their targets, a scalar; only
  // called when returns_loss().
  virtual torch::Tensor ForwardLoss(torch::Tensor x, torch::Tensor targets);

  // A loaded model's file hash (common/checksum.h of the file's bytes),
  // which the worker sends the shards as its ParamSpec hash; nullopt for the
  // built-in models.
  virtual std::optional<uint64_t> file_hash() const { return std::nullopt; }
  // How errors name the model: "model lenet", "model /path/m.pt".
  virtual std::string description() const { return "the model"; }

  // Writes the model's parameters and buffers, as float32 on the CPU, to
  // `path` (worker/model_export.h says what a user loads it with): a
  // built-in model as libtorch's archive of them, a TorchScript one as a
  // TorchScript file (its code too). Throws c10::Error when it cannot.
  virtual void SaveFile(const std::string& path) const;
};

// "lenet" | "mlp" | "cifarnet" for inputs of shape `input`, or a
// TorchScript module's file, any name ending in ".pt" (LoadTorchScriptModel).
// INVALID_ARGUMENT naming the valid names for any other name, and for a
// shape with a non-positive field or too small for the model (LeNet needs
// height and width of at least 4: two 2x2 poolings).
absl::StatusOr<std::shared_ptr<Model>> MakeModel(absl::string_view name,
                                                 const InputShape& input);

// True for a --model that names a TorchScript file (it ends in ".pt").
bool IsTorchScriptPath(absl::string_view name);

// A TorchScript module saved by torch.jit.script(m).save(path) (or
// torch.jit.trace), loaded on the CPU (worker/models_torchscript.cc):
//   - Its named_parameters(), in their order, are the model's parameters
//     (and so the ParamSpec); they are the module's own tensors, as saved,
//     so every worker that loads the same file starts from the same values.
//   - Its buffers (batch-norm running statistics) move with the model but
//     are not parameters: each worker keeps its own (worker/README.md).
//   - forward(x) takes a batch shaped [B] + input.example_shape (or
//     [B, C, H, W] when that is empty).
//   - A module with a true `returns_loss` attribute or constant (`bool`)
//     computes its own loss: forward(x, y) returns a scalar.
//   - file_hash() is the checksum of the file's bytes.
// NOT_FOUND when `path` does not exist; INVALID_ARGUMENT naming `path` when
// it is not a TorchScript archive, has no forward method, no parameters, a
// parameter that is not float32, or a returns_loss forward that does not
// take two inputs.
absl::StatusOr<std::shared_ptr<Model>> LoadTorchScriptModel(
    const std::string& path, const InputShape& input);

// The names MakeModel accepts, in the order the help text lists them.
std::vector<std::string> ModelNames();

}  // namespace tern::worker

#endif  // TERN_WORKER_MODELS_H_
