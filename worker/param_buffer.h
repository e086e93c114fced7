// A model's parameters as the wire sees them (DESIGN section 2): the
// ParamSpec (name, shape, dtype of every tensor of named_parameters(), in
// order), one contiguous float buffer holding all gradients laid out flat,
// tensor after tensor (so a Chunk's flat_offset indexes it directly), and
// the parameter checksum that proves replicas are bit-identical.
//
// Ownership and threads: a ParamBuffer holds handles to the module's
// parameter tensors (they share storage with the module) and owns the flat
// gradient buffer. It is not thread-safe; one training loop uses it.
#ifndef TERN_WORKER_PARAM_BUFFER_H_
#define TERN_WORKER_PARAM_BUFFER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ATen/core/Tensor.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "c10/core/Device.h"
#include "common/partitioner.h"
#include "tern/v1/payload.pb.h"

// Declared, not included: torch/nn/module.h takes 12 s to parse, and most
// files that hold a ParamBuffer never see a module.
namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace tern::worker {

class ParamBuffer {
 public:
  // Takes the parameters of `module` in named_parameters() order.
  // INVALID_ARGUMENT when a parameter is not a contiguous float32 tensor,
  // when the parameters are not all on one device, or the module has none.
  // On a GPU the flat gradient buffer exists twice: on the device (what
  // the GPU encoder reads) and on the host (what the CPU codecs read and
  // the pulls decode into).
  static absl::StatusOr<ParamBuffer> Create(const torch::nn::Module& module);

  ParamBuffer(ParamBuffer&&) = default;
  ParamBuffer& operator=(ParamBuffer&&) = default;
  // A parameter whose gradient still views the flat buffer (BindGradients)
  // gets a copy of its own, so that the module may outlive this.
  ~ParamBuffer();

  const tern::v1::ParamSpec& spec() const { return spec_; }
  // ParamSpecHash(spec()) (worker/fingerprint.h).
  uint64_t spec_hash() const { return spec_hash_; }
  const std::vector<std::string>& names() const { return names_; }
  // Element counts of the tensors, in order: the input of Partition::Create.
  const std::vector<uint64_t>& tensor_elements() const {
    return tensor_elements_;
  }
  uint64_t total_elements() const { return gradients_.size(); }

  // The device of the parameters (the CPU unless the model was moved).
  const c10::Device& device() const { return device_; }

  // Copies every parameter's gradient into the flat buffer; a parameter
  // without a gradient (unused in the forward pass) contributes zeros. A
  // gradient that already is its part of the flat buffer (BindGradients,
  // or a caller's gradient at TensorGradients) is not copied, here or in
  // ScatterGradients.
  void GatherGradients();
  // The same for tensor `tensor` alone, from its parameter's gradient or
  // from `gradient`, the value a gradient hook was given (CPU only). Each
  // writes only that tensor's part of the flat buffer, so threads may
  // gather different tensors while others read or write other parts.
  void GatherTensorGradient(uint32_t tensor);
  void GatherTensorGradient(uint32_t tensor, const at::Tensor& gradient);
  // Calls `hook(tensor, gradient)` each time autograd has computed a
  // parameter's gradient, before it is accumulated into grad() (libtorch's
  // tensor hooks), until RemoveGradientHooks. The hook runs on the thread
  // that runs backward.
  void AddGradientHooks(
      std::function<void(uint32_t, const at::Tensor&)> hook);
  void RemoveGradientHooks();
  // Gathers the gradients into the flat device buffer and returns it
  // (total_elements() floats on device(); on the CPU a second buffer,
  // for tests of the GPU path); the host buffer is not touched. CopyChunkToHost
  // then brings one chunk of it to the host buffer (for chunks a GPU does not
  // encode, such as fp32 ones).
  const float* GatherDeviceGradients();
  void CopyChunkToHost(const Chunk& chunk);
  // Writes the flat buffer into every parameter's gradient, allocating the
  // gradient where it is undefined.
  void ScatterGradients();
  // Makes every parameter's gradient a view of its part of the flat buffer
  // (zeros), so that backward accumulates into the buffer and Gather- and
  // ScatterGradients copy nothing, as PyTorch DDP's gradient_as_bucket_view
  // does. It lasts while the gradient stays that view: zero_grad() keeps it
  // (it zeroes in place); a gradient set to undefined or replaced is copied
  // again. CPU only (FAILED_PRECONDITION otherwise), and not with gradient
  // hooks (AddGradientHooks unbinds), whose values are gathered before
  // autograd adds them into the gradient.
  absl::Status BindGradients();
  // Tensor `tensor`'s part of the flat buffer: where its gradient is bound.
  absl::Span<float> TensorGradients(uint32_t tensor);

  // Copies every parameter into `out` (total_elements() values, flat, as
  // the gradients), and back: the WeightGrad worker sends its initial
  // weights this way and loads the weights its LPS answers with.
  void GatherParameters(absl::Span<float> out) const;
  void ScatterParameters(absl::Span<const float> values);

  // The flat gradient buffer and the part of it one chunk covers. Views stay
  // valid as long as this ParamBuffer lives and is not moved.
  absl::Span<float> gradients() { return absl::MakeSpan(gradients_); }
  absl::Span<float> ChunkGradients(const Chunk& chunk);
  absl::Span<const float> ChunkGradients(const Chunk& chunk) const;

  // The checksum (common/checksum.h) of the raw float32 bytes (the
  // machine's byte order, little-endian on every platform tern runs on) of
  // all parameters in named_parameters() order, each tensor in row-major
  // order. Any change of any bit of any parameter changes it with
  // overwhelming probability.
  uint64_t Checksum() const;

 private:
  ParamBuffer() = default;

  std::vector<at::Tensor> params_;
  // AddGradientHooks' handles, by tensor (empty without hooks).
  std::vector<unsigned> hooks_;
  std::vector<std::string> names_;
  std::vector<uint64_t> tensor_elements_;
  std::vector<uint64_t> tensor_offsets_;
  tern::v1::ParamSpec spec_;
  uint64_t spec_hash_ = 0;
  // A CPU tensor viewing gradients_.
  at::Tensor HostGradients();
  // Whether `gradient` is tensor `tensor`'s part of gradients_ (bound).
  bool IsBound(const at::Tensor& gradient, uint32_t tensor) const;
  // Gives every bound gradient a copy of its own.
  void Unbind();

  c10::Device device_ = c10::kCPU;
  std::vector<float> gradients_;
  at::Tensor device_gradients_;  // allocated off the CPU, or when asked
};

}  // namespace tern::worker

#endif  // TERN_WORKER_PARAM_BUFFER_H_
