#include "worker/param_buffer.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/checksum.h"
#include "torch/nn/module.h"
#include "torch/types.h"
#include "worker/fingerprint.h"

namespace tern::worker {

absl::StatusOr<ParamBuffer> ParamBuffer::Create(
    const torch::nn::Module& module) {
  ParamBuffer buffer;
  uint64_t offset = 0;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    const torch::Tensor& param = item.value();
    if (param.scalar_type() != torch::kFloat32) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter '", item.key(),
                       "' is not float32; tern's wire format carries float32 "
                       "tensors only"));
    }
    if (buffer.params_.empty()) buffer.device_ = param.device();
    if (param.device() != buffer.device_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter '", item.key(), "' is on ", param.device().str(),
          ", the first one on ", buffer.device_.str(),
          "; a model trains on one device"));
    }
    if (!param.is_contiguous()) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter '", item.key(), "' is not contiguous"));
    }
    auto* tensor_spec = buffer.spec_.add_tensors();
    tensor_spec->set_name(item.key());
    for (const int64_t dim : param.sizes()) tensor_spec->add_shape(dim);
    tensor_spec->set_dtype(tern::v1::DTYPE_FLOAT32);

    const uint64_t elements = static_cast<uint64_t>(param.numel());
    buffer.params_.push_back(param);
    buffer.names_.push_back(item.key());
    buffer.tensor_elements_.push_back(elements);
    buffer.tensor_offsets_.push_back(offset);
    offset += elements;
  }
  if (offset == 0) {  // the servers would refuse its join (model_cut.h)
    return absl::InvalidArgumentError(
        buffer.params_.empty() ? "the model has no parameters"
                               : "the model has no parameters to train (all "
                                 "of them have 0 elements)");
  }
  buffer.spec_hash_ = ParamSpecHash(buffer.spec_);
  buffer.gradients_.assign(offset, 0.0f);
  if (!buffer.device_.is_cpu()) {
    buffer.device_gradients_ = torch::zeros(
        {static_cast<int64_t>(offset)},
        torch::TensorOptions().dtype(torch::kFloat32).device(buffer.device_));
  }
  return buffer;
}

ParamBuffer::~ParamBuffer() { Unbind(); }

void ParamBuffer::Unbind() {
  for (uint32_t t = 0; t < params_.size(); ++t) {
    if (IsBound(params_[t].grad(), t)) {
      params_[t].mutable_grad() = params_[t].grad().clone();
    }
  }
}

bool ParamBuffer::IsBound(const torch::Tensor& gradient,
                          uint32_t tensor) const {
  return device_.is_cpu() && gradient.defined() &&
         gradient.scalar_type() == torch::kFloat32 &&
         gradient.is_contiguous() &&
         gradient.data_ptr() == gradients_.data() + tensor_offsets_[tensor];
}

absl::Status ParamBuffer::BindGradients() {
  if (!device_.is_cpu()) {
    return absl::FailedPreconditionError(
        "gradients are bound to the flat buffer on the CPU only");
  }
  if (!hooks_.empty()) {
    return absl::FailedPreconditionError(
        "gradients cannot be bound while gradient hooks gather them");
  }
  for (uint32_t t = 0; t < params_.size(); ++t) {
    torch::Tensor& param = params_[t];
    // What the gradient held so far carries over.
    GatherTensorGradient(t);
    param.mutable_grad() =
        HostGradients()
            .narrow(0, static_cast<int64_t>(tensor_offsets_[t]),
                    static_cast<int64_t>(tensor_elements_[t]))
            .view(param.sizes());
  }
  return absl::OkStatus();
}

absl::Span<float> ParamBuffer::TensorGradients(uint32_t tensor) {
  return absl::MakeSpan(gradients_)
      .subspan(tensor_offsets_[tensor], tensor_elements_[tensor]);
}

torch::Tensor ParamBuffer::HostGradients() {
  return torch::from_blob(gradients_.data(),
                          {static_cast<int64_t>(gradients_.size())},
                          torch::kFloat32);
}

const float* ParamBuffer::GatherDeviceGradients() {
  torch::NoGradGuard no_grad;
  if (!device_gradients_.defined()) {
    // On the CPU only for tests of the GPU path (tests/trainer_test.cc).
    device_gradients_ = torch::zeros(
        {static_cast<int64_t>(gradients_.size())},
        torch::TensorOptions().dtype(torch::kFloat32).device(device_));
  }
  for (size_t t = 0; t < params_.size(); ++t) {
    torch::Tensor slice = device_gradients_.narrow(
        0, static_cast<int64_t>(tensor_offsets_[t]),
        static_cast<int64_t>(tensor_elements_[t]));
    const torch::Tensor& grad = params_[t].grad();
    if (grad.defined()) {
      slice.copy_(grad.reshape({-1}));
    } else {
      slice.zero_();
    }
  }
  return device_gradients_.data_ptr<float>();
}

void ParamBuffer::CopyChunkToHost(const Chunk& chunk) {
  HostGradients()
      .narrow(0, static_cast<int64_t>(chunk.flat_offset),
              static_cast<int64_t>(chunk.num_elements))
      .copy_(device_gradients_.narrow(0,
                                      static_cast<int64_t>(chunk.flat_offset),
                                      static_cast<int64_t>(chunk.num_elements)));
}

void ParamBuffer::GatherGradients() {
  if (!device_.is_cpu()) {
    // One flat copy to the host instead of one per tensor.
    GatherDeviceGradients();
    HostGradients().copy_(device_gradients_);
    return;
  }
  for (uint32_t t = 0; t < params_.size(); ++t) GatherTensorGradient(t);
}

void ParamBuffer::GatherTensorGradient(uint32_t tensor) {
  GatherTensorGradient(tensor, params_[tensor].grad());
}

void ParamBuffer::GatherTensorGradient(uint32_t tensor,
                                       const torch::Tensor& gradient) {
  if (IsBound(gradient, tensor)) return;  // already in place
  float* out = gradients_.data() + tensor_offsets_[tensor];
  const uint64_t n = tensor_elements_[tensor];
  if (!gradient.defined()) {
    std::fill(out, out + n, 0.0f);
    return;
  }
  const torch::Tensor dense = gradient.contiguous();
  std::memcpy(out, dense.data_ptr<float>(), n * sizeof(float));
}

void ParamBuffer::AddGradientHooks(
    std::function<void(uint32_t, const torch::Tensor&)> hook) {
  // A hook gathers the value autograd then adds into the gradient: were the
  // gradient the buffer, the buffer would hold it twice.
  Unbind();
  RemoveGradientHooks();
  for (uint32_t t = 0; t < params_.size(); ++t) {
    hooks_.push_back(params_[t].register_hook(
        [hook, t](const torch::Tensor& gradient) { hook(t, gradient); }));
  }
}

void ParamBuffer::RemoveGradientHooks() {
  for (size_t t = 0; t < hooks_.size(); ++t) params_[t].remove_hook(hooks_[t]);
  hooks_.clear();
}

void ParamBuffer::GatherParameters(absl::Span<float> out) const {
  for (size_t t = 0; t < params_.size(); ++t) {
    const torch::Tensor dense =
        params_[t].detach().to(torch::kCPU).contiguous();
    std::memcpy(out.data() + tensor_offsets_[t], dense.data_ptr<float>(),
                tensor_elements_[t] * sizeof(float));
  }
}

void ParamBuffer::ScatterParameters(absl::Span<const float> values) {
  torch::NoGradGuard no_grad;
  for (size_t t = 0; t < params_.size(); ++t) {
    torch::Tensor& param = params_[t];
    const torch::Tensor source =
        torch::from_blob(const_cast<float*>(values.data()) + tensor_offsets_[t],
                         param.sizes(), torch::kFloat32);
    param.copy_(source);
  }
}

void ParamBuffer::ScatterGradients() {
  for (uint32_t t = 0; t < params_.size(); ++t) {
    torch::Tensor& param = params_[t];
    if (IsBound(param.grad(), t)) continue;  // the buffer is the gradient
    if (!param.grad().defined() || !param.grad().is_contiguous()) {
      param.mutable_grad() = torch::zeros_like(param);
    }
    if (!device_.is_cpu()) {
      param.grad().copy_(
          HostGradients()
              .narrow(0, static_cast<int64_t>(tensor_offsets_[t]),
                      static_cast<int64_t>(tensor_elements_[t]))
              .view(param.sizes()));
      continue;
    }
    std::memcpy(param.grad().data_ptr<float>(),
                gradients_.data() + tensor_offsets_[t],
                tensor_elements_[t] * sizeof(float));
  }
}

absl::Span<float> ParamBuffer::ChunkGradients(const Chunk& chunk) {
  return absl::MakeSpan(gradients_)
      .subspan(chunk.flat_offset, chunk.num_elements);
}

absl::Span<const float> ParamBuffer::ChunkGradients(const Chunk& chunk) const {
  return absl::MakeConstSpan(gradients_)
      .subspan(chunk.flat_offset, chunk.num_elements);
}

uint64_t ParamBuffer::Checksum() const {
  tern::Checksum hash;  // the class, not this method
  for (const torch::Tensor& param : params_) {
    // Parameters on a GPU are hashed from a host copy of their bytes.
    const torch::Tensor host = param.detach().to(torch::kCPU).contiguous();
    hash.Update(host.data_ptr<float>(),
                static_cast<size_t>(host.numel()) * sizeof(float));
  }
  return hash.value();
}

}  // namespace tern::worker
