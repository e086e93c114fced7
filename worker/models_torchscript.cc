// --model=PATH.pt: a TorchScript module as a Model (worker/models.h).
//
// The module stays a torch::jit::Module and runs its own code; the Model
// around it is a torch::nn::Module whose parameters and buffers are the
// TorchScript module's tensors (the same tensors, not copies), registered
// under the same names in a tree of plain modules that mirrors the
// TorchScript one. So the trainer sees one interface for every model:
// named_parameters() gives the ParamSpec, to(device) moves the TorchScript
// module's tensors in place, zero_grad() clears their gradients, and
// train()/eval() reach the TorchScript module (batch norm, dropout).
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/checksum.h"
#include "torch/script.h"
#include "worker/models.h"

namespace tern::worker {
namespace {

// The first line of a libtorch error; what() goes on with a backtrace.
std::string FirstLine(const std::exception& e) {
  const std::string text = e.what();
  return text.substr(0, text.find('\n'));
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat(
        "model ", path,
        " does not exist (--model=PATH.pt names a TorchScript module saved "
        "by torch.jit.script(model).save(PATH))"));
  }
  if (!std::filesystem::is_regular_file(path, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model ", path, " is not a regular file"));
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (!in.good() && !in.eof()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model ", path, ": cannot read the file"));
  }
  return std::move(bytes).str();
}

// Registers `from`'s own parameters and buffers on `to` and mirrors its
// submodules, so that to.named_parameters() lists the TorchScript module's
// trainable parameters under their own dotted names. A frozen parameter
// (requires_grad false) becomes a buffer: PyTorch's optimizers skip it, and
// so must tern's exchange and optimizer (weight decay would move it).
void Mirror(const torch::jit::Module& from, torch::nn::Module& to) {
  for (const auto& param : from.named_parameters(/*recurse=*/false)) {
    if (param.value.requires_grad()) {
      to.register_parameter(param.name, param.value);
    } else {
      to.register_buffer(param.name, param.value);
    }
  }
  for (const auto& buffer : from.named_buffers(/*recurse=*/false)) {
    to.register_buffer(buffer.name, buffer.value);
  }
  for (const auto& child : from.named_children()) {
    auto mirror = std::make_shared<torch::nn::Module>();
    Mirror(child.value, *mirror);
    to.register_module(child.name, std::move(mirror));
  }
}

class TorchScriptModel : public Model {
 public:
  TorchScriptModel(std::string path, uint64_t hash, torch::jit::Module module,
                   std::vector<int64_t> example_shape, bool returns_loss)
      : path_(std::move(path)),
        hash_(hash),
        module_(std::move(module)),
        example_shape_(std::move(example_shape)),
        returns_loss_(returns_loss) {
    Mirror(module_, *this);
  }

  torch::Tensor forward(torch::Tensor x) override {
    return AsTensor(module_.forward({AsExamples(x)}), "forward(x)");
  }

  bool returns_loss() const override { return returns_loss_; }

  torch::Tensor ForwardLoss(torch::Tensor x, torch::Tensor targets) override {
    TORCH_CHECK(returns_loss_, description(), " does not compute its own loss");
    return AsTensor(module_.forward({AsExamples(x), std::move(targets)}),
                    "forward(x, y)");
  }

  void train(bool on) override {
    torch::nn::Module::train(on);
    module_.train(on);
  }

  std::optional<uint64_t> file_hash() const override { return hash_; }

  // The module with its code, so that torch.jit.load(path) runs it.
  void SaveFile(const std::string& path) const override {
    bool on_cpu = true;
    for (const torch::Tensor& t : module_.parameters()) {
      on_cpu = on_cpu && t.device().is_cpu();
    }
    for (const torch::Tensor& t : module_.buffers()) {
      on_cpu = on_cpu && t.device().is_cpu();
    }
    if (on_cpu) {
      module_.save(path);
      return;
    }
    torch::jit::Module copy = module_.deepcopy();
    copy.to(torch::kCPU);
    copy.save(path);
  }
  std::string description() const override {
    return absl::StrCat("model ", path_);
  }

 private:
  // The batch in the shape of the data set's files.
  torch::Tensor AsExamples(const torch::Tensor& x) const {
    if (example_shape_.empty()) return x;
    std::vector<int64_t> shape = {x.size(0)};
    shape.insert(shape.end(), example_shape_.begin(), example_shape_.end());
    return x.reshape(shape);
  }

  torch::Tensor AsTensor(const c10::IValue& out, const char* call) const {
    TORCH_CHECK(out.isTensor(), description(), ": ", call, " returned a ",
                out.tagKind(), ", not a tensor");
    return out.toTensor();
  }

  const std::string path_;
  const uint64_t hash_;
  torch::jit::Module module_;
  const std::vector<int64_t> example_shape_;
  const bool returns_loss_;
};

// The module's `returns_loss` attribute or constant: absent is false.
absl::StatusOr<bool> ReturnsLoss(const std::string& path,
                                 const torch::jit::Module& module) {
  if (!module.hasattr("returns_loss")) return false;
  const c10::IValue value = module.attr("returns_loss");
  if (!value.isBool()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model ", path, ": attribute returns_loss is a ",
                     value.tagKind(), ", not a bool"));
  }
  return value.toBool();
}

// forward must take x, or (x, y) when the module returns its own loss.
absl::Status CheckForward(const std::string& path,
                          const torch::jit::Module& module, bool returns_loss) {
  const auto forward = module.find_method("forward");
  if (!forward.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model ", path, " has no forward method"));
  }
  const auto& arguments = forward->function().getSchema().arguments();
  size_t inputs = 0, required = 0;  // self aside
  for (size_t i = 1; i < arguments.size(); ++i) {
    ++inputs;
    if (!arguments[i].default_value().has_value()) ++required;
  }
  const size_t wanted = returns_loss ? 2 : 1;
  if (required > wanted || inputs < wanted) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", path, ": forward takes ", inputs, " input(s) (", required,
        " required), but ",
        returns_loss
            ? "a module with returns_loss = True is called as "
              "forward(x, y) and returns its loss"
            : "tern calls forward(x) (a module that computes its "
              "own loss from forward(x, y) sets returns_loss = True)"));
  }
  return absl::OkStatus();
}

absl::Status CheckParameters(const std::string& path,
                             const torch::jit::Module& module) {
  size_t count = 0;
  for (const auto& param : module.named_parameters(/*recurse=*/true)) {
    if (!param.value.requires_grad()) continue;  // frozen: not on the wire
    ++count;
    if (param.value.scalar_type() != torch::kFloat32) {
      return absl::InvalidArgumentError(
          absl::StrCat("model ", path, ": parameter '", param.name, "' is ",
                       c10::toString(param.value.scalar_type()),
                       "; tern's wire format carries float32 tensors only"));
    }
  }
  if (count == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", path,
        " has no parameters to train (named_parameters() is empty, or "
        "every one has requires_grad False): tern trains a module's "
        "parameters"));
  }
  return absl::OkStatus();
}

// The trainable parameters' names, in TorchScript's order.
std::vector<std::string> Names(const torch::jit::Module& module) {
  std::vector<std::string> names;
  for (const auto& param : module.named_parameters(/*recurse=*/true)) {
    if (param.value.requires_grad()) names.push_back(param.name);
  }
  return names;
}

}  // namespace

absl::StatusOr<std::shared_ptr<Model>> LoadTorchScriptModel(
    const std::string& path, const InputShape& input) {
  absl::StatusOr<std::string> bytes = ReadWholeFile(path);
  if (!bytes.ok()) return bytes.status();
  // Loaded from the bytes that were hashed: the hash is of what runs.
  const uint64_t hash = ChecksumOf(*bytes);
  torch::jit::Module module;
  try {
    std::istringstream stream(*std::move(bytes));
    module = torch::jit::load(stream, torch::kCPU);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", path,
        " is not a TorchScript module saved by torch.jit.script(model)."
        "save(PATH) (libtorch: ",
        FirstLine(e), ")"));
  }
  absl::StatusOr<bool> returns_loss = ReturnsLoss(path, module);
  if (!returns_loss.ok()) return returns_loss.status();
  if (absl::Status s = CheckForward(path, module, *returns_loss); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckParameters(path, module); !s.ok()) return s;

  auto model = std::make_shared<TorchScriptModel>(
      path, hash, module, input.example_shape, *returns_loss);
  // The mirror lists each module's own parameters before its children's,
  // as PyTorch's named_parameters() does; TorchScript lists them in
  // attribute order. They agree for every module that registers its own
  // parameters first (all of torch.nn's); otherwise say so rather than
  // train under another order than the module's.
  const std::vector<std::string> theirs = Names(module);
  const std::vector<std::string> ours = model->named_parameters().keys();
  if (theirs != ours) {
    return absl::UnimplementedError(absl::StrCat(
        "model ", path, ": named_parameters() lists [",
        absl::StrJoin(theirs, ", "),
        "], an order that interleaves a module's own parameters with its "
        "submodules'; tern needs each module's own parameters first (",
        absl::StrJoin(ours, ", "), ")"));
  }
  return std::shared_ptr<Model>(std::move(model));
}

}  // namespace tern::worker
