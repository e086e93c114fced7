// The INDEX_SIGN and INDEX_VALUE layouts: their bytes as payload.proto
// documents them, round trips, the means reconstruction, and the rejection
// of every malformed field.
#include "kernels/index_packing.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/codec_options.h"
#include "kernels/codec_test_util.h"
#include "kernels/payload.h"

namespace tern::kernels {
namespace {

using codec_test::ExpectInvalid;
using codec_test::Gaussian;

constexpr uint64_t kSizes[] = {0, 1, 31, 32, 33, 1000, (1u << 20) + 3};
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::string Words(std::initializer_list<uint32_t> words) {
  std::string bytes;
  for (const uint32_t word : words) {
    for (int b = 0; b < 4; ++b)
      bytes.push_back(static_cast<char>(word >> 8 * b));
  }
  return bytes;
}

std::string Pair(uint32_t index, float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return Words({index, bits});
}

Payload Header(uint64_t n, Layout layout) {
  Payload payload;
  payload.codec = CodecId::kAdaptive;
  payload.layout = layout;
  payload.num_elements = n;
  payload.num_summands = 1;
  return payload;
}

// 5 elements in groups of 2: +a at 0, -b at 3, +c at 4.
Payload SignExample() {
  Payload payload = Header(5, Layout::kIndexSign);
  payload.data = Words({2, 0u << 1, (3u << 1) | 1, 4u << 1});
  payload.scalers = {1.5f, -0.5f, 2.0f, -2.5f, 3.0f, 0.0f};
  return payload;
}

Payload ValueExample() {
  Payload payload = Header(6, Layout::kIndexValue);
  payload.data = Pair(1, -0.25f) + Pair(2, 7.0f) + Pair(5, 1e-30f);
  return payload;
}

absl::Status Decode(const Payload& payload, std::vector<float>* out) {
  return DecodeSparsePayload(payload, payload.codec, payload.layout,
                             absl::MakeSpan(*out));
}

// Decodes a payload that must be rejected, and checks `out` is untouched.
void ExpectRejected(const Payload& payload, const std::string& why) {
  std::vector<float> out(payload.num_elements, -7.0f);
  ExpectInvalid(Decode(payload, &out), why);
  for (const float value : out) ASSERT_EQ(value, -7.0f);
}

TEST(IndexPackingTest, IndexSignBytesAndDecode) {
  Payload payload = Header(5, Layout::kIndexSign);
  const uint32_t words[] = {IndexSignWord(0, false), IndexSignWord(3, true),
                            IndexSignWord(4, false)};
  const float scalers[] = {1.5f, -0.5f, 2.0f, -2.5f, 3.0f, 0.0f};
  PackIndexSign(2, words, scalers, &payload);
  EXPECT_EQ(payload.data, SignExample().data);
  EXPECT_EQ(payload.data.substr(0, 8), std::string("\x02\0\0\0\x00\0\0\0", 8));
  EXPECT_EQ(payload.data.substr(8, 4), std::string("\x07\0\0\0", 4));
  EXPECT_EQ(payload.scalers, SignExample().scalers);

  std::vector<float> out(5, -1.0f);
  ASSERT_TRUE(Decode(payload, &out).ok());
  // Element 3 is in group 1: its negative value; element 4 in group 2.
  EXPECT_EQ(out, (std::vector<float>{1.5f, 0.0f, 0.0f, -2.5f, 3.0f}));
}

TEST(IndexPackingTest, IndexValueBytesAndDecode) {
  Payload payload = Header(6, Layout::kIndexValue);
  payload.scalers = {1.0f};  // cleared
  const uint32_t indices[] = {1, 2, 5};
  const float values[] = {-0.25f, 7.0f, 1e-30f};
  PackIndexValue(indices, values, &payload);
  EXPECT_EQ(payload.data, ValueExample().data);
  EXPECT_TRUE(payload.scalers.empty());
  std::vector<float> out(6, -1.0f);
  ASSERT_TRUE(Decode(payload, &out).ok());
  EXPECT_EQ(out, (std::vector<float>{0, -0.25f, 7.0f, 0, 0, 1e-30f}));
}

TEST(IndexPackingTest, SignMeansPerGroup) {
  // Groups of 3; thresholds +2 and -1.
  const std::vector<float> values = {3, 1, 5, -1, -4, 2, 0, -0.5f};
  Payload payload = Header(values.size(), Layout::kIndexSign);
  PackIndexSignMeans(values, 2.0f, -1.0f, 3, &payload);
  // Group 0 sends 3, 5 (mean 4); group 1 sends -1, -4 (mean -2.5) and 2;
  // group 2 sends nothing (0 and -0.5 are under the thresholds).
  EXPECT_EQ(payload.scalers,
            (std::vector<float>{4.0f, 0.0f, 2.0f, -2.5f, 0.0f, 0.0f}));
  std::vector<float> out(values.size());
  ASSERT_TRUE(Decode(payload, &out).ok());
  EXPECT_EQ(out, (std::vector<float>{4, 0, 4, -2.5f, -2.5f, 2, 0, 0}));
  EXPECT_EQ(payload.data.size(), 4u * (1 + 5));

  // Threshold 0 sends every nonzero value, never a zero.
  PackIndexSignMeans(values, 0.0f, 0.0f, 8, &payload);
  EXPECT_EQ(payload.data.size(), 4u * (1 + 7));
}

TEST(IndexPackingTest, RoundTripsAtEverySize) {
  for (const uint64_t n : kSizes) {
    const std::vector<float> values = Gaussian(n, static_cast<uint32_t>(n));
    std::vector<uint32_t> indices;
    std::vector<float> kept;
    std::vector<float> want(n, 0.0f);
    for (uint32_t i = 0; i < n; ++i) {
      if (std::fabs(values[i]) > 1.5f) {
        indices.push_back(i);
        kept.push_back(values[i]);
        want[i] = values[i];
      }
    }
    Payload payload = Header(n, Layout::kIndexValue);
    PackIndexValue(indices, kept, &payload);
    EXPECT_EQ(payload.data.size(), 8 * indices.size());
    std::vector<float> out(n, 1.0f);
    ASSERT_TRUE(Decode(payload, &out).ok()) << n;
    EXPECT_EQ(out, want) << n;

    // INDEX_SIGN, groups of 32 (one group below 32 elements).
    payload = Header(n, Layout::kIndexSign);
    const uint32_t group = SparseGroupSize(32, n);
    PackIndexSignMeans(values, 1.5f, -1.5f, group, &payload);
    EXPECT_EQ(payload.scalers.size(), 2 * NumGroups(n, group)) << n;
    ASSERT_TRUE(Decode(payload, &out).ok()) << n;
    for (uint64_t i = 0; i < n; ++i) {
      const float* scalers = &payload.scalers[2 * (i / group)];
      const float expected = values[i] > 1.5f    ? scalers[0]
                             : values[i] < -1.5f ? scalers[1]
                                                 : 0.0f;
      ASSERT_EQ(out[i], expected) << "n " << n << " i " << i;
    }
  }
}

TEST(IndexPackingTest, GroupSizeOfAnEncoder) {
  EXPECT_EQ(SparseGroupSize(0, 0), 1u);
  EXPECT_EQ(SparseGroupSize(5, 0), 1u);
  EXPECT_EQ(SparseGroupSize(0, 33), 33u);
  EXPECT_EQ(SparseGroupSize(100, 33), 33u);
  EXPECT_EQ(SparseGroupSize(32, 33), 32u);
  EXPECT_EQ(NumGroups(0, 1), 0u);
  EXPECT_EQ(NumGroups(33, 32), 2u);
  EXPECT_EQ(NumGroups(32, 32), 1u);
}

TEST(IndexPackingTest, RejectsBadHeaders) {
  Payload payload = SignExample();
  std::vector<float> out(5);
  EXPECT_TRUE(Decode(payload, &out).ok());

  ExpectInvalid(DecodeSparsePayload(payload, CodecId::kThreshold,
                                    Layout::kIndexSign, absl::MakeSpan(out)),
                "codec is adaptive");
  ExpectInvalid(DecodeSparsePayload(payload, CodecId::kAdaptive,
                                    Layout::kIndexValue, absl::MakeSpan(out)),
                "layout INDEX_SIGN, want INDEX_VALUE");
  payload.format_version = 2;
  ExpectRejected(payload, "format version 2");
  payload = SignExample();
  std::vector<float> longer(6);
  ExpectInvalid(Decode(payload, &longer), "has 5 elements, want 6");
  payload.num_summands = 0;
  ExpectRejected(payload, "0 summands");
  payload.num_summands = 3;  // a pull: decodes to the same values
  std::vector<float> pull(5);
  ASSERT_TRUE(Decode(payload, &pull).ok());
  EXPECT_EQ(pull, (std::vector<float>{1.5f, 0.0f, 0.0f, -2.5f, 3.0f}));
}

TEST(IndexPackingTest, RejectsBadIndexSignBodies) {
  Payload payload = SignExample();
  payload.data = "abc";
  ExpectRejected(payload, "too few for its group_size");
  payload.data = SignExample().data + "x";
  ExpectRejected(payload, "not whole 4-byte words");
  payload.data = Words({0, 0});
  ExpectRejected(payload, "group_size 0");
  payload = SignExample();
  payload.scalers.pop_back();
  ExpectRejected(payload, "has 5 scalers, want 6");
  payload.data = Words({5});  // one group: 2 scalers
  ExpectRejected(payload, "has 5 scalers, want 2");
  payload.scalers = {1.0f, -1.0f};
  payload.data = Words({7});  // group_size above n is one group
  std::vector<float> out(5);
  EXPECT_TRUE(Decode(payload, &out).ok());

  const struct {
    size_t position;
    float value;
    const char* why;
  } bad_scalers[] = {
      {0, kNaN, "scaler 0 (group 0's positive value) is nan"},
      {1, kInf, "scaler 1 (group 0's negative value) is inf"},
      {2, -1.0f, "scaler 2 (group 1's positive value) is -1"},
      {5, 0.5f, "scaler 5 (group 2's negative value) is 0.5"},
  };
  for (const auto& bad : bad_scalers) {
    payload = SignExample();
    payload.scalers[bad.position] = bad.value;
    ExpectRejected(payload, bad.why);
  }

  payload = SignExample();
  payload.data = Words({2, 5u << 1});
  ExpectRejected(payload, "index 5 (entry 0) is out of range: 5 elements");
  payload.data = Words({2, 0xFFFFFFFFu});
  ExpectRejected(payload, "index 2147483647 (entry 0) is out of range");
  payload.data = Words({2, 1u << 1, (1u << 1) | 1});
  ExpectRejected(payload, "index 1 (entry 1) does not increase");
  payload.data = Words({2, 3u << 1, 2u << 1});
  ExpectRejected(payload,
                 "index 2 (entry 1) does not increase on the previous "
                 "index 3");
  // Empty chunk: header only, no scalers.
  payload = Header(0, Layout::kIndexSign);
  payload.data = Words({1});
  std::vector<float> none;
  EXPECT_TRUE(Decode(payload, &none).ok());
  payload.data = Words({1, 0});
  ExpectRejected(payload, "index 0 (entry 0) is out of range: 0 elements");
}

TEST(IndexPackingTest, RejectsBadIndexValueBodies) {
  Payload payload = ValueExample();
  payload.scalers = {1.0f};
  ExpectRejected(payload, "has 1 scalers, want 0");
  payload = ValueExample();
  payload.data.pop_back();
  ExpectRejected(payload, "not whole 8-byte pairs");
  payload.data = Pair(6, 1.0f);
  ExpectRejected(payload, "index 6 (entry 0) is out of range: 6 elements");
  payload.data = Pair(2, 1.0f) + Pair(2, 1.0f);
  ExpectRejected(payload, "index 2 (entry 1) does not increase");
  payload.data = Pair(2, 1.0f) + Pair(1, 1.0f);
  ExpectRejected(payload, "index 1 (entry 1) does not increase");
  payload.data = Pair(1, 1.0f) + Pair(3, kNaN);
  ExpectRejected(payload, "value of index 3 (entry 1) is nan");
  payload.data = Pair(1, -kInf);
  ExpectRejected(payload, "value of index 1 (entry 0) is -inf");
  payload.data.clear();
  std::vector<float> out(6, 1.0f);
  ASSERT_TRUE(Decode(payload, &out).ok());
  EXPECT_EQ(out, std::vector<float>(6, 0.0f));
}

TEST(IndexPackingTest, RejectsOtherLayouts) {
  Payload payload = SignExample();
  payload.layout = Layout::kRaw;
  std::vector<float> out(5);
  ExpectInvalid(DecodeSparsePayload(payload, CodecId::kAdaptive, Layout::kRaw,
                                    absl::MakeSpan(out)),
                "RAW is not a sparse layout");
}

TEST(IndexPackingTest, CheckSparseInput) {
  std::vector<float> values(40, 1.0f);
  EXPECT_TRUE(CheckSparseInput(values, CodecId::kDropping).ok());
  values[33] = kNaN;
  ExpectInvalid(CheckSparseInput(values, CodecId::kDropping),
                "dropping chunk value 33 is nan");
  values[33] = 1.0f;
  values[39] = -kInf;
  ExpectInvalid(CheckSparseInput(values, CodecId::kThreshold),
                "threshold chunk value 39 is -inf");
  // The length is checked before any value is read, so a span that only
  // claims 2^31 elements is safe here.
  const absl::Span<const float> huge(values.data(), kMaxSparseElements);
  ExpectInvalid(CheckSparseInput(huge, CodecId::kAdaptive),
                "adaptive chunk of 2147483648 values is too long");
  EXPECT_TRUE(CheckSparseInput({}, CodecId::kAdaptive).ok());
}

TEST(IndexPackingTest, CheckSparseLayouts) {
  CodecOptions options;
  EXPECT_TRUE(
      CheckSparseLayouts(options, CodecId::kDropping, Layout::kIndexValue)
          .ok());
  options.push_layout = Layout::kIndexValue;
  options.pull_layout = Layout::kIndexValue;
  EXPECT_TRUE(
      CheckSparseLayouts(options, CodecId::kDropping, Layout::kIndexValue)
          .ok());
  ExpectInvalid(
      CheckSparseLayouts(options, CodecId::kDropping, Layout::kIndexSign),
      "codec dropping with these options writes layout INDEX_SIGN, not "
      "INDEX_VALUE");
  options.push_layout = Layout::kUnspecified;
  options.pull_layout = Layout::kRaw;
  ExpectInvalid(
      CheckSparseLayouts(options, CodecId::kThreshold, Layout::kIndexSign),
      "not RAW");
}

}  // namespace
}  // namespace tern::kernels
