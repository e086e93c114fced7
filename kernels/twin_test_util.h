// Test support for the CUDA twins of the CPU codecs (onebit_gpu_test,
// onebit_tile_test, sparse_gpu_test, sparse_select_math_test): comparing
// payloads bit for bit, and the 1-bit tests' inputs and reference codec.
#ifndef TERN_KERNELS_TWIN_TEST_UTIL_H_
#define TERN_KERNELS_TWIN_TEST_UTIL_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "kernels/codec.h"
#include "kernels/codec_options.h"
#include "kernels/onebit_codec.h"
#include "kernels/payload.h"

namespace tern::kernels::twin_test {

// The bits of a float, so that -0 and +0 (and NaN payloads) differ.
inline uint32_t Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return bits;
}

// Every field of two payloads, the scalers bit for bit.
inline void ExpectSamePayload(const Payload& got, const Payload& want,
                              const std::string& where) {
  EXPECT_EQ(got.codec, want.codec) << where;
  EXPECT_EQ(got.layout, want.layout) << where;
  EXPECT_EQ(got.format_version, want.format_version) << where;
  EXPECT_EQ(got.num_elements, want.num_elements) << where;
  EXPECT_EQ(got.num_summands, want.num_summands) << where;
  EXPECT_TRUE(got.data == want.data)
      << where << ": " << got.data.size() << " vs " << want.data.size()
      << " bytes";
  ASSERT_EQ(got.scalers.size(), want.scalers.size()) << where;
  for (size_t i = 0; i < got.scalers.size(); ++i) {
    EXPECT_EQ(Bits(got.scalers[i]), Bits(want.scalers[i]))
        << where << ", scaler " << i << ": " << got.scalers[i] << " vs "
        << want.scalers[i];
  }
}

// A gradient for the 1-bit tests: small Gaussian values with outliers and
// zeros of both signs.
inline std::vector<float> OneBitGradient(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.01f);
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) {
    g[i] = normal(rng) * (i % 97 == 5 ? 40.0f : 1.0f) + 0.001f;
    if (i % 401 == 3) g[i] = 0.0f;
    if (i % 409 == 4) g[i] = -0.0f;
  }
  return g;
}

// The CPU onebit codec: exact means for sample_size 0, else sampled.
inline std::unique_ptr<Codec> CpuOneBitCodec(uint32_t sample_size) {
  CodecOptions options;
  options.id = CodecId::kOneBit;
  options.sampled_means = sample_size != 0;
  options.sample_size = sample_size == 0 ? 4096 : sample_size;
  absl::StatusOr<std::unique_ptr<Codec>> codec = MakeOneBitCodec(options);
  EXPECT_TRUE(codec.ok()) << codec.status();
  return codec.ok() ? *std::move(codec) : nullptr;
}

}  // namespace tern::kernels::twin_test

#endif  // TERN_KERNELS_TWIN_TEST_UTIL_H_
