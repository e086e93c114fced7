// Test support for the CPU codecs' tests (codec_test, onebit_test,
// qsgd_test, int8_codec_test, sparse_codecs_test, sparse_select_test,
// index_packing_test): Gaussian inputs, an encode and a decode that expect
// success, the check of an INVALID_ARGUMENT answer, and the shard's rule
// for a pull (DESIGN section 6: the codec's own encoding of the workers'
// decoded average, with the shard's stream).
#ifndef TERN_KERNELS_CODEC_TEST_UTIL_H_
#define TERN_KERNELS_CODEC_TEST_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/codec.h"
#include "kernels/payload.h"

namespace tern::kernels::codec_test {

// n draws of N(mean, stddev^2) from std::mt19937(seed): the same values on
// every run and every machine with the same standard library.
inline std::vector<float> Gaussian(size_t n, uint32_t seed, float mean = 0.0f,
                                   float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(mean, stddev);
  std::vector<float> values(n);
  for (float& value : values) value = normal(rng);
  return values;
}

// `codec`'s payload of `values`; a failure fails the test and gives an
// empty payload.
inline Payload Encode(const Codec& codec, absl::Span<const float> values,
                      const EncodeContext& context) {
  absl::StatusOr<Payload> payload = codec.Encode(values, context);
  EXPECT_TRUE(payload.ok()) << payload.status();
  return payload.ok() ? *std::move(payload) : Payload();
}

// The decoded values of `payload`. The buffer starts at -123 so that an
// element the decoder leaves unwritten shows.
inline std::vector<float> Decode(const Codec& codec, const Payload& payload) {
  std::vector<float> out(payload.num_elements, -123.0f);
  const absl::Status status = codec.Decode(payload, absl::MakeSpan(out));
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

// `status` is INVALID_ARGUMENT and its message says `why`.
inline void ExpectInvalid(const absl::Status& status, const std::string& why) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr(why));
}

// The average of the pushes' decodes (at least one push, all of one
// length), added in worker order whatever order they arrived in, as a shard
// adds them (float_aggregation.h).
inline std::vector<float> DecodedAverage(const Codec& codec,
                                         const std::vector<Payload>& pushes) {
  std::vector<float> sum(pushes.front().num_elements, 0.0f);
  for (const Payload& push : pushes) {
    const std::vector<float> decoded = Decode(codec, push);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += decoded[i];
  }
  for (float& value : sum) value /= static_cast<float>(pushes.size());
  return sum;
}

// `pull` is what the shard owes: `codec`'s encoding of `average` with the
// default context (no residual yet, one group) and the shard's stream (0,
// 0, 0, kShardStreamWorker), byte for byte.
inline void ExpectShardEncoding(const Codec& codec, const Payload& pull,
                                absl::Span<const float> average) {
  EncodeContext shard;
  shard.stream.worker = kShardStreamWorker;
  const Payload want = Encode(codec, average, shard);
  EXPECT_EQ(pull.data, want.data);
  EXPECT_EQ(pull.scalers, want.scalers);
}

}  // namespace tern::kernels::codec_test

#endif  // TERN_KERNELS_CODEC_TEST_UTIL_H_
