// The 1-bit CUDA encoder against the CPU codec, bit for bit: payload bytes
// and means of OneBitCodec::Encode, and the residual of ErrorFeedback over
// several steps, on random inputs of awkward sizes (0, 1, 31, 32, 33,
// 2^20 + 3) and on a multi-chunk buffer in one launch, with exact and
// sampled means and groups from 1 element to the whole chunk.
//
// Tests that need a device report themselves SKIPPED without one (never
// passed); onebit_tile_test.cc runs the kernels' decomposition on the host
// in every build.
//
//   bazel test --config=cuda //kernels:onebit_gpu_test --test_output=all
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/philox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/codec.h"
#include "kernels/codec_options.h"
#include "kernels/error_feedback.h"
#include "kernels/onebit.h"
#include "kernels/onebit_codec.h"
#include "kernels/onebit_cuda.h"
#include "kernels/payload.h"
#include "kernels/twin_test_util.h"
#include "kernels/cuda_context.h"

namespace tern::kernels {
namespace {

using ::testing::HasSubstr;
using twin_test::Bits;
using twin_test::CpuOneBitCodec;
using twin_test::ExpectSamePayload;
using twin_test::OneBitGradient;

constexpr uint64_t kSizes[] = {0, 1, 31, 32, 33, (1u << 20) + 3};
constexpr uint64_t kGroupSizes[] = {0, 1, 7, 64, 1000, 5000};
// Exact means, a sample larger than most groups, and one smaller than a
// warp's draws, and not a multiple of a Philox call's four draws.
constexpr uint32_t kSampleSizes[] = {0, 4096, 99};

const RandomStream kStream{
    .seed = 0x0123456789ABCDEFull, .step = 17, .chunk = 0, .worker = 3};

EncodeContext ContextOf(uint32_t key, uint64_t group_size) {
  EncodeContext context;
  context.stream = kStream;
  context.stream.chunk = key;
  context.group_size = group_size;
  return context;
}

// ---------------------------------------------------------------------------
// On the device.

class OneBitCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) {
      GTEST_SKIP() << "no CUDA device: this test needs a GPU";
    }
  }

  static DeviceArray<float> Upload(const std::vector<float>& host) {
    absl::StatusOr<DeviceArray<float>> device =
        DeviceArray<float>::FromHost(host);
    EXPECT_TRUE(device.ok()) << device.status();
    return device.ok() ? *std::move(device) : DeviceArray<float>();
  }

  // Encodes `chunks` of `values` on both devices and compares.
  static void CheckEncode(const std::vector<float>& values,
                          const std::vector<CudaOneBitChunk>& chunks,
                          uint32_t sample_size, const std::string& where) {
    absl::StatusOr<std::unique_ptr<OneBitCuda>> gpu =
        OneBitCuda::Create(sample_size);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    const std::unique_ptr<Codec> cpu = CpuOneBitCodec(sample_size);
    const DeviceArray<float> device = Upload(values);
    absl::StatusOr<std::vector<Payload>> payloads =
        (*gpu)->Encode(device.data(), values.size(), chunks, kStream);
    ASSERT_TRUE(payloads.ok()) << where << ": " << payloads.status();
    ASSERT_EQ(payloads->size(), chunks.size());
    for (size_t c = 0; c < chunks.size(); ++c) {
      const CudaOneBitChunk& chunk = chunks[c];
      absl::StatusOr<Payload> expected = cpu->Encode(
          absl::MakeConstSpan(values).subspan(chunk.offset, chunk.count),
          ContextOf(chunk.key, chunk.group_size));
      ASSERT_TRUE(expected.ok()) << expected.status();
      ExpectSamePayload((*payloads)[c], *expected,
                        absl::StrCat(where, " chunk ", c));
    }
  }
};

TEST_F(OneBitCudaTest, OneChunkOfEachSizeMatchesTheCpu) {
  for (const uint64_t n : kSizes) {
    const std::vector<float> values =
        OneBitGradient(n, static_cast<uint32_t>(n));
    for (const uint64_t group_size : kGroupSizes) {
      for (const uint32_t sample_size : kSampleSizes) {
        CheckEncode(values, {{.key = 7, .offset = 0, .count = n,
                              .group_size = group_size}},
                    sample_size,
                    absl::StrCat("n ", n, " group ", group_size, " sample ",
                                 sample_size));
      }
    }
  }
}

TEST_F(OneBitCudaTest, ManyChunksInOneLaunchMatchTheCpu) {
  // Every awkward size end to end from a misaligned offset, with groups of
  // their own.
  const uint64_t counts[] = {0, 1, 31, 32, 33, 1000, (1u << 20) + 3, 70000};
  const uint64_t groups[] = {0, 1, 7, 64, 0, 33, 0, 1000};
  std::vector<CudaOneBitChunk> chunks;
  uint64_t total = 3;
  for (size_t c = 0; c < std::size(counts); ++c) {
    chunks.push_back({.key = static_cast<uint32_t>(c + 1),
                      .offset = total,
                      .count = counts[c],
                      .group_size = groups[c]});
    total += counts[c];
  }
  const std::vector<float> values = OneBitGradient(total, 99);
  for (const uint32_t sample_size : kSampleSizes) {
    CheckEncode(values, chunks, sample_size,
                absl::StrCat("sample ", sample_size));
  }
}

TEST_F(OneBitCudaTest, ErrorFeedbackKeepsTheCpuResidualOverSteps) {
  const uint64_t counts[] = {33, (1u << 20) + 3, 5000};
  const uint64_t groups[] = {0, 0, 64};
  for (const uint32_t sample_size : kSampleSizes) {
    std::vector<CudaOneBitChunk> chunks;
    uint64_t total = 0;
    for (size_t c = 0; c < std::size(counts); ++c) {
      chunks.push_back({.key = static_cast<uint32_t>(c),
                        .offset = total,
                        .count = counts[c],
                        .group_size = groups[c]});
      total += counts[c];
    }
    absl::StatusOr<std::unique_ptr<OneBitCuda>> gpu =
        OneBitCuda::Create(sample_size);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    ErrorFeedback cpu(CpuOneBitCodec(sample_size));
    for (const CudaOneBitChunk& chunk : chunks) {
      ASSERT_TRUE(cpu.Register(chunk.key, chunk.count).ok());
    }
    DeviceArray<float> residual = Upload(std::vector<float>(total, 0.0f));
    for (uint32_t step = 0; step < 4; ++step) {
      const std::vector<float> gradient = OneBitGradient(total, 1000 + step);
      const DeviceArray<float> device = Upload(gradient);
      RandomStream stream = kStream;
      stream.step = step;
      absl::StatusOr<std::vector<Payload>> payloads =
          (*gpu)->EncodeCompensated(device.data(), residual.data(), total,
                                    chunks, stream);
      ASSERT_TRUE(payloads.ok()) << payloads.status();
      absl::StatusOr<std::vector<float>> gpu_residual = residual.ToHost();
      ASSERT_TRUE(gpu_residual.ok()) << gpu_residual.status();
      for (size_t c = 0; c < chunks.size(); ++c) {
        const CudaOneBitChunk& chunk = chunks[c];
        std::vector<float> compensated(gradient.begin() + chunk.offset,
                                       gradient.begin() + chunk.offset +
                                           chunk.count);
        ASSERT_TRUE(cpu.Compensate(chunk.key, absl::MakeSpan(compensated)).ok());
        EncodeContext context = ContextOf(chunk.key, chunk.group_size);
        context.stream.step = step;
        absl::StatusOr<Payload> expected =
            cpu.EncodeCompensated(chunk.key, compensated, context);
        ASSERT_TRUE(expected.ok()) << expected.status();
        const std::string where =
            absl::StrCat("sample ", sample_size, " step ", step, " chunk ", c);
        ExpectSamePayload((*payloads)[c], *expected, where);
        absl::StatusOr<absl::Span<const float>> want = cpu.Residual(chunk.key);
        ASSERT_TRUE(want.ok());
        for (uint64_t i = 0; i < chunk.count; ++i) {
          ASSERT_EQ(Bits((*gpu_residual)[chunk.offset + i]),
                    Bits((*want)[i]))
              << where << " element " << i;
        }
      }
    }
  }
}

TEST_F(OneBitCudaTest, NonFiniteValuesAreRefusedAndLeaveTheResidual) {
  absl::StatusOr<std::unique_ptr<OneBitCuda>> gpu = OneBitCuda::Create(0);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  std::vector<float> values = OneBitGradient(3000, 5);
  values[2500] = std::numeric_limits<float>::quiet_NaN();
  values[2700] = std::numeric_limits<float>::infinity();
  const std::vector<CudaOneBitChunk> chunks = {
      {.key = 1, .offset = 0, .count = 2000, .group_size = 0},
      {.key = 2, .offset = 2000, .count = 1000, .group_size = 0}};
  const DeviceArray<float> device = Upload(values);
  absl::Status status =
      (*gpu)->Encode(device.data(), values.size(), chunks, kStream).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("chunk 2: element 500 is nan"));

  const std::vector<float> before = OneBitGradient(3000, 6);
  DeviceArray<float> residual = Upload(before);
  status = (*gpu)
               ->EncodeCompensated(device.data(), residual.data(),
                                   values.size(), chunks, kStream)
               .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("compensated value 500"));
  absl::StatusOr<std::vector<float>> after = residual.ToHost();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, before);
}

// A value and its residual can each be finite while their sum is not; the
// push is refused and the residual kept. (The next residual itself cannot
// overflow with onebit: it is a value minus a mean of values of its sign.)
TEST_F(OneBitCudaTest, ACompensationThatOverflowsIsRefused) {
  absl::StatusOr<std::unique_ptr<OneBitCuda>> gpu = OneBitCuda::Create(0);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const float big = std::numeric_limits<float>::max();
  const std::vector<float> values = {big, -big};
  const std::vector<float> residual_values = {big, 0.0f};
  const DeviceArray<float> device = Upload(values);
  DeviceArray<float> residual = Upload(residual_values);
  const std::vector<CudaOneBitChunk> chunks = {
      {.key = 3, .offset = 0, .count = 2, .group_size = 0}};
  absl::Status status =
      (*gpu)->EncodeCompensated(device.data(), residual.data(), 2, chunks,
                                kStream)
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("compensated value 0"));
  absl::StatusOr<std::vector<float>> after = residual.ToHost();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, residual_values);
}

}  // namespace
}  // namespace tern::kernels
