// The sparse CUDA kernels against the CPU, bit for bit: sampled magnitude
// thresholds (one chunk and a multi-chunk flat buffer), signed thresholds,
// and the dropping / adaptive payloads, on random inputs of awkward sizes
// (0, 1, 31, 32, 33, 2^20 + 3), with sample sizes below and above the
// input, NaN and infinities among the threshold inputs, and the CPU codecs'
// errors for bad inputs.
//
// Tests that need a device report themselves SKIPPED without one (never
// passed). The host-side logic (tables, the radix select's steps, the
// kept words and means) is tested in every build by
// sparse_select_math_test.cc and sparse_cuda_plan_test.cc.
//
//   bazel test --config=cuda //kernels:sparse_gpu_test --test_output=all
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/philox.h"
#include "gtest/gtest.h"
#include "kernels/adaptive_codec.h"
#include "kernels/codec.h"
#include "kernels/codec_options.h"
#include "kernels/dropping_codec.h"
#include "kernels/payload.h"
#include "kernels/twin_test_util.h"
#include "kernels/sparse_cuda.h"
#include "kernels/sparse_select.h"
#include "kernels/cuda_context.h"

namespace tern::kernels {
namespace {

using twin_test::Bits;
using twin_test::ExpectSamePayload;

constexpr uint64_t kSizes[] = {0, 1, 31, 32, 33, (1u << 20) + 3};
constexpr uint32_t kSampleSizes[] = {1, 33, 4096, 1u << 21};
constexpr float kDropRatios[] = {0.0f, 0.5f, 0.7f, 0.99f, 0.999f};
constexpr float kProportions[] = {1.0f / 64, 0.3f, 0.5f, 1.0f};
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

const RandomStream kStream{
    .seed = 0xFEEDFACE12345678ull, .step = 41, .chunk = 5, .worker = 1};

// Gaussian values with ties, zeros of both signs and, when asked, NaN and
// infinities.
std::vector<float> Values(size_t n, uint32_t seed, bool nonfinite) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.01f);
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) {
    float v = normal(rng) * (i % 89 == 5 ? 30.0f : 1.0f);
    if (i % 7 == 3) v = std::round(v * 400.0f) / 400.0f;
    if (i % 101 == 5) v = 0.0f;
    if (i % 103 == 6) v = -0.0f;
    if (nonfinite && i % 37 == 11) v = kNaN;
    if (nonfinite && i % 53 == 12) v = i % 2 ? kInf : -kInf;
    values[i] = v;
  }
  return values;
}

DeviceArray<float> Upload(absl::Span<const float> host) {
  absl::StatusOr<DeviceArray<float>> array = DeviceArray<float>::FromHost(host);
  EXPECT_TRUE(array.ok()) << array.status();
  return array.ok() ? *std::move(array) : DeviceArray<float>();
}

void ExpectSameStatus(const absl::Status& got, const absl::Status& want,
                      const std::string& where) {
  EXPECT_EQ(got.code(), want.code()) << where << ": " << got;
  EXPECT_EQ(got.message(), want.message()) << where;
}

// Runs everywhere: the context needs a device, and says so without one.
TEST(SparseCudaHost, CreateIsUnavailableWithoutADevice) {
  const absl::StatusOr<std::unique_ptr<SparseCuda>> context =
      SparseCuda::Create();
  if (CudaDeviceCount() == 0) {
    EXPECT_EQ(context.status().code(), absl::StatusCode::kUnavailable);
  } else {
    EXPECT_TRUE(context.ok()) << context.status();
  }
}

// ---------------------------------------------------------------------------
// On the device.

class SparseCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) {
      GTEST_SKIP() << "no CUDA device: this test needs a GPU";
    }
    absl::StatusOr<std::unique_ptr<SparseCuda>> context = SparseCuda::Create();
    ASSERT_TRUE(context.ok()) << context.status();
    cuda_ = *std::move(context);
  }

  // The values at offset 1 of a device buffer (misaligned, as a model's
  // flat buffer puts tensors anywhere); returns the buffer.
  DeviceArray<float> UploadAtOne(const std::vector<float>& values) {
    std::vector<float> padded(values.size() + 2, 123.0f);
    std::copy(values.begin(), values.end(), padded.begin() + 1);
    return Upload(padded);
  }

  void CheckDropping(const std::vector<float>& values,
                     const CodecOptions& options, const EncodeContext& context,
                     const std::string& where) {
    const DeviceArray<float> device = UploadAtOne(values);
    absl::StatusOr<std::unique_ptr<Codec>> codec = MakeDroppingCodec(options);
    ASSERT_TRUE(codec.ok()) << codec.status();
    const absl::StatusOr<Payload> cpu = (*codec)->Encode(values, context);
    const absl::StatusOr<Payload> gpu = cuda_->EncodeDropping(
        device.data() + 1, values.size(), options, context);
    ExpectSameStatus(gpu.status(), cpu.status(), where);
    if (cpu.ok() && gpu.ok()) ExpectSamePayload(*gpu, *cpu, where);
  }

  void CheckAdaptive(const std::vector<float>& values,
                     const CodecOptions& options, const EncodeContext& context,
                     const std::string& where) {
    const DeviceArray<float> device = UploadAtOne(values);
    absl::StatusOr<std::unique_ptr<Codec>> codec = MakeAdaptiveCodec(options);
    ASSERT_TRUE(codec.ok()) << codec.status();
    const absl::StatusOr<Payload> cpu = (*codec)->Encode(values, context);
    const absl::StatusOr<Payload> gpu = cuda_->EncodeAdaptive(
        device.data() + 1, values.size(), options, context);
    ExpectSameStatus(gpu.status(), cpu.status(), where);
    if (cpu.ok() && gpu.ok()) ExpectSamePayload(*gpu, *cpu, where);
  }

  std::unique_ptr<SparseCuda> cuda_;
};

TEST_F(SparseCudaTest, MagnitudeThresholdMatchesTheCpu) {
  for (const uint64_t n : kSizes) {
    const std::vector<float> values = Values(n, 11 + n, /*nonfinite=*/true);
    const DeviceArray<float> device = UploadAtOne(values);
    const absl::Span<const float> spans[] = {values};
    const CudaSparseChunk chunks[] = {{1, n}};
    for (const uint32_t sample_size : kSampleSizes) {
      for (const float drop_ratio : kDropRatios) {
        const absl::StatusOr<float> gpu = cuda_->SampledMagnitudeThreshold(
            device.data(), n + 2, chunks, drop_ratio, sample_size, kStream);
        ASSERT_TRUE(gpu.ok()) << gpu.status();
        EXPECT_EQ(Bits(*gpu), Bits(SampledMagnitudeThreshold(
                                  spans, drop_ratio, sample_size, kStream)))
            << "n = " << n << ", sample " << sample_size << ", R = "
            << drop_ratio;
      }
    }
  }
}

TEST_F(SparseCudaTest, MultiChunkMagnitudeThresholdMatchesTheCpu) {
  const uint64_t counts[] = {33, 0, 1, 31, 0, 32, 1000, (1u << 20) + 3};
  std::vector<CudaSparseChunk> chunks;
  uint64_t at = 3;
  for (const uint64_t count : counts) {
    chunks.push_back({at, count});
    at += count + 5;
  }
  std::swap(chunks[0], chunks[6]);  // not in buffer order
  const std::vector<float> buffer = Values(at, 77, /*nonfinite=*/true);
  const DeviceArray<float> device = Upload(buffer);
  std::vector<absl::Span<const float>> spans;
  for (const CudaSparseChunk& chunk : chunks) {
    spans.push_back(
        absl::MakeConstSpan(buffer).subspan(chunk.offset, chunk.count));
  }
  for (const uint32_t sample_size : kSampleSizes) {
    for (const float drop_ratio : kDropRatios) {
      const absl::StatusOr<float> gpu = cuda_->SampledMagnitudeThreshold(
          device.data(), buffer.size(), chunks, drop_ratio, sample_size,
          kStream);
      ASSERT_TRUE(gpu.ok()) << gpu.status();
      EXPECT_EQ(Bits(*gpu), Bits(SampledMagnitudeThreshold(
                                spans, drop_ratio, sample_size, kStream)))
          << "sample " << sample_size << ", R = " << drop_ratio;
    }
  }
}

TEST_F(SparseCudaTest, SignedThresholdsMatchTheCpu) {
  std::vector<std::pair<std::string, std::vector<float>>> inputs;
  for (const uint64_t n : kSizes) {
    inputs.push_back({"n = " + std::to_string(n), Values(n, 3 + n, true)});
  }
  std::vector<float> positive = Values(1000, 8, false);
  for (float& v : positive) v = std::fabs(v);
  std::vector<float> negative = positive;
  for (float& v : negative) v = -v - 1e-3f;
  inputs.push_back({"all non-negative", positive});
  inputs.push_back({"all negative", negative});
  inputs.push_back({"zeros", {0.0f, -0.0f, -0.0f, 0.0f, kNaN}});
  inputs.push_back({"only non-finite", {kNaN, kNaN, kInf}});
  for (const auto& [name, values] : inputs) {
    const DeviceArray<float> device = UploadAtOne(values);
    for (const uint32_t sample_size : kSampleSizes) {
      for (const float proportion : kProportions) {
        const absl::StatusOr<SignedThresholds> gpu =
            cuda_->SampledSignedThresholds(device.data() + 1, values.size(),
                                           proportion, sample_size, kStream);
        ASSERT_TRUE(gpu.ok()) << gpu.status();
        const SignedThresholds cpu =
            SampledSignedThresholds(values, proportion, sample_size, kStream);
        EXPECT_EQ(Bits(gpu->positive), Bits(cpu.positive))
            << name << ", sample " << sample_size << ", pi = " << proportion;
        EXPECT_EQ(Bits(gpu->negative), Bits(cpu.negative))
            << name << ", sample " << sample_size << ", pi = " << proportion;
      }
    }
  }
}

TEST_F(SparseCudaTest, DroppingPayloadsMatchTheCpu) {
  for (const uint64_t n : kSizes) {
    const std::vector<float> values = Values(n, 21 + n, /*nonfinite=*/false);
    for (const bool quantize : {false, true}) {
      for (const DropScope scope : {DropScope::kGlobal, DropScope::kPerTensor}) {
        for (const float drop_ratio : {0.0f, 0.5f, 0.99f}) {
          for (const uint32_t sample_size : {33u, 4096u, 1u << 21}) {
            CodecOptions options;
            options.id = CodecId::kDropping;
            options.drop_ratio = drop_ratio;
            options.drop_survivors =
                quantize ? DropSurvivors::k1Bit : DropSurvivors::kValues;
            options.drop_scope = scope;
            options.sample_size = sample_size;
            // A global threshold is used only with kGlobal; 0 selects.
            for (const float threshold : {0.0f, 0.0075f}) {
              EncodeContext context;
              context.stream = kStream;
              context.threshold = threshold;
              CheckDropping(values, options, context,
                            "n = " + std::to_string(n) +
                                (quantize ? ", quantized" : "") +
                                (scope == DropScope::kGlobal ? ", global"
                                                             : ", per tensor") +
                                ", R = " + std::to_string(drop_ratio) +
                                ", sample " + std::to_string(sample_size) +
                                ", threshold " + std::to_string(threshold));
            }
          }
        }
      }
    }
  }
}

TEST_F(SparseCudaTest, AdaptivePayloadsMatchTheCpu) {
  for (const uint64_t n : kSizes) {
    const std::vector<float> values = Values(n, 31 + n, /*nonfinite=*/false);
    for (const float proportion : kProportions) {
      for (const uint32_t sample_size : {33u, 4096u, 1u << 21}) {
        for (const uint64_t group_size :
             {0ull, 1ull, 7ull, 1000ull, 1ull << 21}) {
          CodecOptions options;
          options.id = CodecId::kAdaptive;
          options.proportion = proportion;
          options.sample_size = sample_size;
          EncodeContext context;
          context.stream = kStream;
          context.group_size = group_size;
          CheckAdaptive(values, options, context,
                        "n = " + std::to_string(n) + ", pi = " +
                            std::to_string(proportion) + ", sample " +
                            std::to_string(sample_size) + ", group " +
                            std::to_string(group_size));
        }
      }
    }
  }
}

TEST_F(SparseCudaTest, BadInputsGiveTheCpuErrors) {
  std::vector<float> values = Values(5000, 4, /*nonfinite=*/false);
  values[4100] = kInf;  // in the third tile
  values[4500] = kNaN;
  CodecOptions dropping;
  dropping.id = CodecId::kDropping;
  dropping.drop_ratio = 0.9f;
  EncodeContext context;
  context.stream = kStream;
  CheckDropping(values, dropping, context, "non-finite value");
  CodecOptions adaptive;
  adaptive.id = CodecId::kAdaptive;
  CheckAdaptive(values, adaptive, context, "non-finite value");

  // A non-finite dropping threshold, reported after the values' check.
  values[4100] = 1.0f;
  values[4500] = 2.0f;
  context.threshold = kNaN;
  CheckDropping(values, dropping, context, "NaN threshold");
  context.threshold = 0.0f;

  // Options the CPU codecs refuse.
  const DeviceArray<float> device = Upload(values);
  CodecOptions bad = dropping;
  bad.drop_ratio = 1.0f;
  EXPECT_EQ(
      cuda_->EncodeDropping(device.data(), values.size(), bad, context)
          .status()
          .message(),
      MakeDroppingCodec(bad).status().message());
  bad = adaptive;
  bad.sample_size = 0;
  EXPECT_EQ(
      cuda_->EncodeAdaptive(device.data(), values.size(), bad, context)
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
  // 2-bit survivors have no GPU encoder: refused, not encoded otherwise.
  bad = dropping;
  bad.drop_survivors = DropSurvivors::k2Bit;
  EXPECT_EQ(cuda_->EncodeDropping(device.data(), values.size(), bad, context)
                .status()
                .code(),
            absl::StatusCode::kUnimplemented);

  // The context stays usable after a rejected input.
  CheckDropping(values, dropping, context, "after errors");
}

TEST_F(SparseCudaTest, BadTablesAreRejectedBeforeAnyLaunch) {
  const DeviceArray<float> device = Upload(std::vector<float>(10, 1.0f));
  const CudaSparseChunk chunks[] = {{0, 4}, {5, 6}};
  const absl::StatusOr<float> threshold = cuda_->SampledMagnitudeThreshold(
      device.data(), 10, chunks, 0.5f, 4096, kStream);
  EXPECT_EQ(threshold.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(threshold.status().message().find("entry 1"),
            absl::string_view::npos)
      << threshold.status();
}

}  // namespace
}  // namespace tern::kernels
