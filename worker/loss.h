// What a worker minimizes (--loss): cross-entropy on a classifier's logits
// (the default), the mean squared error of predictions against float
// targets (--loss=mse, regression on npy files), or, for a model that
// computes its own loss (Model::returns_loss(), a TorchScript module with
// returns_loss = True), the scalar its forward(x, y) returns, whatever
// --loss says.
//
// Before training, CheckModelFitsData runs the model once on two training
// examples, so a model whose output does not fit the targets is an error
// naming the model and both shapes, not an exception at step 0.
#ifndef TERN_WORKER_LOSS_H_
#define TERN_WORKER_LOSS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/datasets.h"
#include "worker/models.h"

namespace tern::worker {

enum class LossKind { kCrossEntropy, kMse };

// "cross_entropy" | "mse"; INVALID_ARGUMENT naming the valid ones.
absl::StatusOr<LossKind> ParseLoss(absl::string_view name);
std::vector<std::string> LossNames();

// The mean loss of `model` on the batch (`x`, `targets`), with the graph
// for backward: the model's own when it returns_loss(), else `kind` on
// forward(x).
torch::Tensor BatchLoss(Model& model, LossKind kind, const torch::Tensor& x,
                        const torch::Tensor& targets);

// The summed loss (for the test set's mean) and, for a classifier under
// cross-entropy, the number of examples classified right; `correct` is -1
// where accuracy means nothing (--loss=mse, a model's own loss). No
// gradients are recorded by the caller's NoGradGuard.
struct BatchEvaluation {
  double loss_sum = 0;
  int64_t correct = -1;
};
BatchEvaluation EvaluateBatch(Model& model, LossKind kind,
                              const torch::Tensor& x,
                              const torch::Tensor& targets);

// Checks that `model` and `kind` fit the targets of `train` before any
// step: cross-entropy needs int64 labels and an output [B, K] with K at
// least the data set's class count; mse needs float32 targets and an
// output of their shape; a model's own loss must be a scalar. Runs the
// model in eval mode without gradients on the first two examples (buffers
// such as batch norm's are not changed) and leaves it in training mode.
// INVALID_ARGUMENT naming model.description(), `targets_name` (what holds
// the targets, e.g. "DIR/train_y.npy") and both shapes; an exception the
// model's code throws becomes INVALID_ARGUMENT with its first line.
absl::Status CheckModelFitsData(Model& model, LossKind kind,
                                const Dataset& train,
                                const std::string& targets_name);

}  // namespace tern::worker

#endif  // TERN_WORKER_LOSS_H_
