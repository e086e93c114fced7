#include "worker/param_buffer.h"

#include <algorithm>
#include <cstring>

#include "gtest/gtest.h"
#include "torch/nn.h"
#include "worker/fingerprint.h"

namespace tern::worker {
namespace {

// Two layers plus a parameter the forward pass never touches.
struct TwoLayerNet : torch::nn::Module {
  TwoLayerNet() {
    fc1 = register_module("fc1", torch::nn::Linear(3, 4));
    fc2 = register_module("fc2", torch::nn::Linear(4, 2));
    unused = register_parameter("unused", torch::ones({5}));
  }
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::relu(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::Tensor unused;
};

std::vector<float> ToVector(const torch::Tensor& t) {
  const torch::Tensor flat = t.contiguous().view(-1);
  return std::vector<float>(flat.data_ptr<float>(),
                            flat.data_ptr<float>() + flat.numel());
}

TEST(ParamBufferTest, SpecFollowsNamedParameters) {
  TwoLayerNet net;
  auto buffer = ParamBuffer::Create(net);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  const auto& spec = buffer->spec();
  // named_parameters(): a module's own parameters, then its children's.
  ASSERT_EQ(spec.tensors_size(), 5);
  EXPECT_EQ(spec.tensors(0).name(), "unused");
  EXPECT_EQ(spec.tensors(1).name(), "fc1.weight");
  EXPECT_EQ(spec.tensors(2).name(), "fc1.bias");
  EXPECT_EQ(spec.tensors(3).name(), "fc2.weight");
  EXPECT_EQ(spec.tensors(4).name(), "fc2.bias");
  EXPECT_EQ(spec.tensors(1).shape_size(), 2);
  EXPECT_EQ(spec.tensors(1).shape(0), 4);
  EXPECT_EQ(spec.tensors(1).shape(1), 3);
  EXPECT_EQ(spec.tensors(1).dtype(), tern::v1::DTYPE_FLOAT32);
  EXPECT_EQ(buffer->tensor_elements(), (std::vector<uint64_t>{5, 12, 4, 8, 2}));
  EXPECT_EQ(buffer->total_elements(), 31u);
  EXPECT_EQ(buffer->spec_hash(), ParamSpecHash(spec));
}

TEST(ParamBufferTest, GatherThenScatterRoundTripsEveryGradient) {
  TwoLayerNet net;
  const torch::Tensor loss = net.forward(torch::randn({6, 3})).pow(2).sum();
  loss.backward();
  ASSERT_FALSE(net.unused.grad().defined());
  auto buffer = ParamBuffer::Create(net);
  ASSERT_TRUE(buffer.ok());
  buffer->GatherGradients();

  // Flat layout: tensor after tensor, zeros for the unused parameter.
  std::vector<float> expected;
  for (const auto& p : net.parameters()) {
    const std::vector<float> grad = p.grad().defined()
                                        ? ToVector(p.grad())
                                        : std::vector<float>(p.numel(), 0.0f);
    expected.insert(expected.end(), grad.begin(), grad.end());
  }
  const absl::Span<float> flat = buffer->gradients();
  ASSERT_EQ(flat.size(), expected.size());
  for (size_t i = 0; i < flat.size(); ++i) EXPECT_EQ(flat[i], expected[i]) << i;

  // Write distinct values back and read them from param.grad().
  for (size_t i = 0; i < flat.size(); ++i) flat[i] = 0.5f * i - 3.0f;
  buffer->ScatterGradients();
  size_t i = 0;
  for (const auto& p : net.parameters()) {
    ASSERT_TRUE(p.grad().defined());
    for (const float v : ToVector(p.grad())) {
      EXPECT_EQ(v, 0.5f * i - 3.0f) << i;
      ++i;
    }
  }
  EXPECT_EQ(i, flat.size());
}

// --overlap's premise: a hook per parameter, called once per backward, the
// last layer first, with the value that ends up in grad(); none for a
// parameter backward does not reach, and none once removed.
// The flat gradients two backward passes leave in `net` (without binding).
std::vector<float> TwoBackwardsFlat(TwoLayerNet& net, const torch::Tensor& x) {
  net.forward(x).pow(2).sum().backward();
  net.forward(x).sum().backward();
  auto buffer = ParamBuffer::Create(net);
  EXPECT_TRUE(buffer.ok());
  buffer->GatherGradients();
  return std::vector<float>(buffer->gradients().begin(),
                            buffer->gradients().end());
}

TEST(ParamBufferTest, BoundGradientsAreTheFlatBuffer) {
  torch::manual_seed(3);
  TwoLayerNet reference;
  TwoLayerNet net;
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < net.parameters().size(); ++i) {
      net.parameters()[i].copy_(reference.parameters()[i]);
    }
  }
  const torch::Tensor x = torch::randn({6, 3});
  const std::vector<float> want = TwoBackwardsFlat(reference, x);

  auto buffer = ParamBuffer::Create(net);
  ASSERT_TRUE(buffer.ok());
  ASSERT_TRUE(buffer->BindGradients().ok());
  for (uint32_t t = 0; t < 5; ++t) {
    EXPECT_EQ(net.parameters()[t].grad().data_ptr<float>(),
              buffer->TensorGradients(t).data());
  }
  // Backward accumulates into the buffer itself, bit for bit as into
  // gradients of their own; Gather copies nothing over it.
  net.forward(x).pow(2).sum().backward();
  net.forward(x).sum().backward();
  buffer->GatherGradients();
  const absl::Span<float> flat = buffer->gradients();
  ASSERT_EQ(flat.size(), want.size());
  for (size_t i = 0; i < flat.size(); ++i) EXPECT_EQ(flat[i], want[i]) << i;

  // What is decoded into the buffer is the gradient; Scatter keeps it.
  for (size_t i = 0; i < flat.size(); ++i) flat[i] = 0.25f * i;
  buffer->ScatterGradients();
  EXPECT_EQ(ToVector(net.fc1->bias.grad())[1],
            0.25f * (5 + 12 + 1));  // unused, fc1.weight, then fc1.bias[1]

  // zero_grad() zeroes in place: still bound.
  net.zero_grad();
  EXPECT_EQ(net.fc2->bias.grad().data_ptr<float>(),
            buffer->TensorGradients(4).data());
  for (const float v : flat) EXPECT_EQ(v, 0.0f);
}

TEST(ParamBufferTest, AReplacedGradientIsCopiedAgain) {
  TwoLayerNet net;
  auto buffer = ParamBuffer::Create(net);
  ASSERT_TRUE(buffer.ok());
  ASSERT_TRUE(buffer->BindGradients().ok());
  net.fc2->bias.mutable_grad() = torch::full({2}, 7.0f);
  buffer->GatherGradients();
  EXPECT_EQ(buffer->TensorGradients(4)[1], 7.0f);
  buffer->TensorGradients(4)[1] = -1.0f;
  buffer->ScatterGradients();
  EXPECT_EQ(ToVector(net.fc2->bias.grad())[1], -1.0f);
}

TEST(ParamBufferTest, TheModuleKeepsItsGradientsAfterTheBuffer) {
  TwoLayerNet net;
  {
    auto buffer = ParamBuffer::Create(net);
    ASSERT_TRUE(buffer.ok());
    ASSERT_TRUE(buffer->BindGradients().ok());
    buffer->TensorGradients(1)[0] = 2.5f;
  }
  // The buffer is gone; the gradient is a copy of what it held.
  EXPECT_EQ(ToVector(net.fc1->weight.grad())[0], 2.5f);
  net.forward(torch::ones({1, 3})).sum().backward();  // no use after free
  EXPECT_TRUE(net.fc1->weight.grad().defined());
}

TEST(ParamBufferTest, HooksUnbindTheGradients) {
  TwoLayerNet net;
  auto buffer = ParamBuffer::Create(net);
  ASSERT_TRUE(buffer.ok());
  ASSERT_TRUE(buffer->BindGradients().ok());
  buffer->AddGradientHooks([](uint32_t, const torch::Tensor&) {});
  EXPECT_NE(net.fc1->weight.grad().data_ptr<float>(),
            buffer->TensorGradients(1).data());
  EXPECT_FALSE(buffer->BindGradients().ok());
  buffer->RemoveGradientHooks();
}

TEST(ParamBufferTest, GradientHooksSeeEachGradientLastLayerFirst) {
  TwoLayerNet net;
  auto buffer = ParamBuffer::Create(net);
  ASSERT_TRUE(buffer.ok());
  std::vector<uint32_t> order;
  buffer->AddGradientHooks([&](uint32_t tensor, const torch::Tensor& gradient) {
    order.push_back(tensor);
    buffer->GatherTensorGradient(tensor, gradient);
  });
  net.zero_grad();
  net.forward(torch::randn({6, 3})).pow(2).sum().backward();
  ASSERT_EQ(order.size(), 4u) << "the unused parameter has no gradient";
  // fc2 (tensors 3 and 4) before fc1 (1 and 2).
  EXPECT_GT(std::min(order[0], order[1]), std::max(order[2], order[3]));
  buffer->GatherTensorGradient(0);  // unused: zeros, as GatherGradients
  std::vector<float> hooked(buffer->gradients().begin(),
                            buffer->gradients().end());
  buffer->GatherGradients();
  for (size_t i = 0; i < hooked.size(); ++i) {
    EXPECT_EQ(hooked[i], buffer->gradients()[i]) << i;
  }

  buffer->RemoveGradientHooks();
  net.zero_grad();
  net.forward(torch::randn({6, 3})).pow(2).sum().backward();
  EXPECT_EQ(order.size(), 4u);
}

TEST(ParamBufferTest, ChunkViewsFollowThePartition) {
  TwoLayerNet net;
  auto buffer = ParamBuffer::Create(net);
  ASSERT_TRUE(buffer.ok());
  // 5 floats per chunk: fc1.weight (12) becomes 3 chunks, fc2.weight 2.
  auto partition = Partition::Create(buffer->tensor_elements(), 20, 2);
  ASSERT_TRUE(partition.ok());
  const absl::Span<float> flat = buffer->gradients();
  for (size_t i = 0; i < flat.size(); ++i) flat[i] = static_cast<float>(i);
  uint64_t covered = 0;
  for (const Chunk& chunk : partition->chunks()) {
    const absl::Span<float> view = buffer->ChunkGradients(chunk);
    ASSERT_EQ(view.size(), chunk.num_elements);
    for (size_t j = 0; j < view.size(); ++j) {
      EXPECT_EQ(view[j], static_cast<float>(chunk.flat_offset + j));
    }
    covered += view.size();
  }
  EXPECT_EQ(covered, buffer->total_elements());
  EXPECT_GT(partition->chunks().size(), buffer->tensor_elements().size());
}

TEST(ParamBufferTest, ChecksumSeesEveryBit) {
  torch::manual_seed(7);
  TwoLayerNet a;
  torch::manual_seed(7);
  TwoLayerNet b;
  auto buffer_a = ParamBuffer::Create(a);
  auto buffer_b = ParamBuffer::Create(b);
  ASSERT_TRUE(buffer_a.ok());
  ASSERT_TRUE(buffer_b.ok());
  const uint64_t base = buffer_a->Checksum();
  EXPECT_EQ(base, buffer_b->Checksum());

  // Flip the lowest mantissa bit of one element of the last-but-one tensor.
  float* value = b.fc2->bias.data_ptr<float>() + 1;
  uint32_t bits;
  std::memcpy(&bits, value, sizeof(bits));
  bits ^= 1u;
  std::memcpy(value, &bits, sizeof(bits));
  EXPECT_NE(buffer_b->Checksum(), base);
  bits ^= 1u;
  std::memcpy(value, &bits, sizeof(bits));
  EXPECT_EQ(buffer_b->Checksum(), base);

  // The checksum tracks the live parameters, not a copy.
  {
    torch::NoGradGuard no_grad;
    a.unused.add_(1.0f);
  }
  EXPECT_NE(buffer_a->Checksum(), base);
}

TEST(ParamBufferTest, RejectsNonFloatParameters) {
  struct DoubleNet : torch::nn::Module {
    DoubleNet() { register_parameter("w", torch::ones({3}, torch::kFloat64)); }
  } net;
  const auto buffer = ParamBuffer::Create(net);
  ASSERT_FALSE(buffer.ok());
  EXPECT_EQ(buffer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(buffer.status().message().find("'w'"), absl::string_view::npos);
}

TEST(ParamBufferTest, RejectsAModelWithoutParameters) {
  torch::nn::Module empty;
  EXPECT_FALSE(ParamBuffer::Create(empty).ok());
}

}  // namespace
}  // namespace tern::worker
