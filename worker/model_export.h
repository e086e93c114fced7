// --save_model=PATH: the trained model, written by the worker after its last
// step, for the user to load outside tern.
//
//   --model=PATH.pt   a TorchScript file of the same module with the trained
//                     parameters and this worker's buffers:
//                     torch.jit.load(PATH) in Python, torch::jit::load in C++.
//   built-in models   libtorch's archive of their parameters and buffers,
//                     under the ParamSpec's names ("conv1.weight", ...):
//                     torch.jit.load(PATH).state_dict() in Python,
//                     torch::load(model, PATH) in C++.
//
// Tensors are float32 on the CPU, whatever --device trained them. The file is
// written to PATH.tmp, synced and renamed over PATH (common/replace_file.h),
// so PATH holds a whole model or what was there before.
#ifndef TERN_WORKER_MODEL_EXPORT_H_
#define TERN_WORKER_MODEL_EXPORT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/models.h"

namespace tern::worker {

// Before training: INVALID_ARGUMENT when `path` cannot take the model at the
// end (a directory; a directory that cannot be made; not writable), so that
// a run does not train for hours and then fail to write it. Creates the
// file's directory when missing.
absl::Status CheckModelPath(const std::string& path);

// Writes `model` to `path` as above; returns the file's size in bytes.
// INTERNAL naming the path and the reason when it cannot.
absl::StatusOr<uint64_t> SaveModel(const Model& model, const std::string& path);

}  // namespace tern::worker

#endif  // TERN_WORKER_MODEL_EXPORT_H_
