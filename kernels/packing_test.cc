// The byte layouts of proto/tern/v1/payload.proto: round trips, known
// bytes, the server's accumulate, and every malformed payload a decoder
// must refuse.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/terngrad.h"

namespace tern::kernels {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kSizes[] = {0, 1, 4, 5, 63, 64, 65, (1u << 20) + 3};
constexpr uint32_t kSummands[] = {1,  2,   3,    4,     7,           8,
                                  16, 100, 1000, 65535, kMaxSummands};
const RandomStream kStream{.seed = 99, .step = 1, .chunk = 2, .worker = 3};

std::vector<int> RandomCodes(uint64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int> codes(n);
  for (int& code : codes) code = static_cast<int>(rng() % 3) - 1;
  return codes;
}

// Writers straight from the proto's comments, one element at a time.
std::vector<uint8_t> ReferenceTwoBit(const std::vector<int>& codes) {
  std::vector<uint8_t> out((codes.size() + 3) / 4, 0);
  for (size_t i = 0; i < codes.size(); ++i) {
    const uint32_t field = codes[i] == 0 ? 0 : (codes[i] == 1 ? 1 : 2);
    out[i / 4] |= static_cast<uint8_t>(field << (2 * (i % 4)));
  }
  return out;
}

std::vector<uint8_t> ReferenceBase3(const std::vector<int>& codes) {
  std::vector<uint8_t> out((codes.size() + 4) / 5, 0);
  for (size_t i = 0; i < codes.size(); ++i) {
    int weight = 1;
    for (size_t j = 0; j < i % 5; ++j) weight *= 3;
    out[i / 5] = static_cast<uint8_t>(out[i / 5] + (codes[i] + 1) * weight);
  }
  return out;
}

std::vector<uint8_t> ReferenceSumBits(const std::vector<int32_t>& sums,
                                      uint32_t n_summands, uint32_t bits) {
  std::vector<uint8_t> out((sums.size() * bits + 7) / 8, 0);
  uint64_t bit = 0;
  for (const int32_t sum : sums) {
    const uint64_t field = static_cast<uint64_t>(sum + int64_t{n_summands});
    for (uint32_t b = 0; b < bits; ++b, ++bit) {
      if ((field >> b) & 1)
        out[bit / 8] |= static_cast<uint8_t>(1 << (bit % 8));
    }
  }
  return out;
}

std::vector<uint8_t> ReferenceSumRadix(const std::vector<int32_t>& sums,
                                       uint32_t n_summands, uint32_t digits) {
  const uint64_t radix = 2 * uint64_t{n_summands} + 1;
  const size_t words = (sums.size() + digits - 1) / digits;
  std::vector<uint8_t> out(8 * words, 0);
  for (size_t w = 0; w < words; ++w) {
    unsigned __int128 word = 0, weight = 1;
    for (size_t j = 0; j < digits && w * digits + j < sums.size(); ++j) {
      word += weight *
              static_cast<uint64_t>(sums[w * digits + j] + int64_t{n_summands});
      weight *= radix;
    }
    for (int b = 0; b < 8; ++b) {
      out[8 * w + b] =
          static_cast<uint8_t>(static_cast<uint64_t>(word) >> (8 * b));
    }
  }
  return out;
}

// Values that ternarize to `codes` deterministically: +-s and 0.
std::vector<float> ValuesFor(const std::vector<int>& codes, float s) {
  std::vector<float> values(codes.size());
  for (size_t i = 0; i < codes.size(); ++i) values[i] = codes[i] * s;
  return values;
}

std::vector<uint8_t> Pack(const std::vector<int>& codes, Layout layout) {
  std::vector<uint8_t> out(PackedTernaryBytes(codes.size(), layout));
  QuantizePack(ValuesFor(codes, 0.25f), 0.25f, kStream, layout,
               absl::MakeSpan(out));
  return out;
}

std::vector<int32_t> RandomSums(uint64_t n, uint32_t n_summands,
                                uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> sums(n);
  for (int32_t& sum : sums) {
    sum = static_cast<int32_t>(rng() % (2 * uint64_t{n_summands} + 1)) -
          static_cast<int32_t>(n_summands);
  }
  // The extremes, where off-by-one errors live.
  if (n > 1) {
    sums[0] = -static_cast<int32_t>(n_summands);
    sums[n - 1] = static_cast<int32_t>(n_summands);
  }
  return sums;
}

// ---------------------------------------------------------------------------
// Ternary layouts

TEST(TernaryLayoutTest, KnownBytes) {
  // +1, -1, 0, +1: fields 01, 10, 00, 01 from the low bits up.
  EXPECT_EQ(Pack({1, -1, 0, 1}, Layout::kTernary2Bit),
            std::vector<uint8_t>{0x49});
  EXPECT_EQ(Pack({-1, 1, 1, 0, 0, -1}, Layout::kTernary2Bit),
            (std::vector<uint8_t>{0b00010110, 0b00001000}));
  // Digits 2, 0, 1, 2 (+ a zero padding digit): 2 + 0 + 9 + 54.
  EXPECT_EQ(Pack({1, -1, 0, 1}, Layout::kTernaryBase3),
            std::vector<uint8_t>{65});
  EXPECT_EQ(Pack({1, 1, 1, 1, 1, 0}, Layout::kTernaryBase3),
            (std::vector<uint8_t>{242, 1}));
}

class TernaryRoundTripTest
    : public ::testing::TestWithParam<std::tuple<uint64_t, Layout>> {};

TEST_P(TernaryRoundTripTest, PackMatchesTheReferenceAndUnpacks) {
  const auto [n, layout] = GetParam();
  const std::vector<int> codes = RandomCodes(n, 1);
  const std::vector<uint8_t> packed = Pack(codes, layout);
  EXPECT_EQ(packed, layout == Layout::kTernary2Bit ? ReferenceTwoBit(codes)
                                                   : ReferenceBase3(codes));
  EXPECT_TRUE(CheckTernaryCodes(packed, n, layout).ok());
  std::vector<int8_t> unpacked(n, 7);
  ASSERT_TRUE(UnpackTernary(packed, n, layout, absl::MakeSpan(unpacked)).ok());
  EXPECT_EQ(std::vector<int>(unpacked.begin(), unpacked.end()), codes);
}

TEST_P(TernaryRoundTripTest, AccumulateAddsCodesAndDecodeScales) {
  const auto [n, layout] = GetParam();
  std::vector<int32_t> sums(n, 5);
  std::vector<int32_t> want(n, 5);
  for (uint32_t push = 0; push < 3; ++push) {
    const std::vector<int> codes = RandomCodes(n, 10 + push);
    for (uint64_t i = 0; i < n; ++i) want[i] += codes[i];
    ASSERT_TRUE(
        AccumulateTernary(Pack(codes, layout), n, layout, absl::MakeSpan(sums))
            .ok());
  }
  EXPECT_EQ(sums, want);

  const std::vector<int> first = RandomCodes(n, 30);
  std::vector<int32_t> assigned(n, 9);
  ASSERT_TRUE(
      AssignTernary(Pack(first, layout), n, layout, absl::MakeSpan(assigned))
          .ok());
  EXPECT_EQ(assigned, std::vector<int32_t>(first.begin(), first.end()));

  const std::vector<int> codes = RandomCodes(n, 20);
  std::vector<float> decoded(n, -9.0f);
  ASSERT_TRUE(DecodeTernary(Pack(codes, layout), n, layout, 0.75f,
                            absl::MakeSpan(decoded))
                  .ok());
  for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(decoded[i], 0.75f * codes[i]);
}

INSTANTIATE_TEST_SUITE_P(
    SizesAndLayouts, TernaryRoundTripTest,
    ::testing::Combine(::testing::ValuesIn(kSizes),
                       ::testing::Values(Layout::kTernary2Bit,
                                         Layout::kTernaryBase3)));

// Every way a ternary payload can be wrong, checked through
// AccumulateTernary, which must leave the sums untouched, and through every
// other reader (CheckTernaryCodes where the expected count is the payload's
// own: it is given no other).
void ExpectRejected(const std::vector<uint8_t>& packed, uint64_t n,
                    Layout layout, size_t out_size, const std::string& why) {
  std::vector<int32_t> sums(out_size, 3);
  const absl::Status status =
      AccumulateTernary(packed, n, layout, absl::MakeSpan(sums));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << why;
  EXPECT_THAT(std::string(status.message()), HasSubstr(why));
  EXPECT_EQ(sums, std::vector<int32_t>(out_size, 3)) << why;
  EXPECT_FALSE(AssignTernary(packed, n, layout, absl::MakeSpan(sums)).ok());
  EXPECT_EQ(sums, std::vector<int32_t>(out_size, 3)) << why;
  std::vector<int8_t> codes(out_size);
  EXPECT_FALSE(UnpackTernary(packed, n, layout, absl::MakeSpan(codes)).ok());
  std::vector<float> values(out_size);
  EXPECT_FALSE(
      DecodeTernary(packed, n, layout, 1.0f, absl::MakeSpan(values)).ok());
  if (n == out_size) {
    EXPECT_THAT(std::string(CheckTernaryCodes(packed, n, layout).message()),
                HasSubstr(why));
  }
}

TEST(TernaryLayoutTest, RejectsMalformedTwoBit) {
  const Layout layout = Layout::kTernary2Bit;
  const std::vector<uint8_t> good = Pack(RandomCodes(1001, 2), layout);
  ASSERT_EQ(good.size(), 251u);
  ExpectRejected(std::vector<uint8_t>(good.begin(), good.end() - 1), 1001,
                 layout, 1001, "has 250 bytes, want 251");
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  ExpectRejected(longer, 1001, layout, 1001, "has 252 bytes");
  for (const size_t at : {size_t{0}, size_t{100}, size_t{249}}) {
    std::vector<uint8_t> corrupt = good;
    corrupt[at] |= 0x30;  // field 2 of the byte becomes 11
    ExpectRejected(corrupt, 1001, layout, 1001,
                   "invalid code 11 for element " + std::to_string(4 * at + 2));
  }
  std::vector<uint8_t> padded = good;
  padded.back() |= 0x40;  // 1001 % 4 == 1: bits 2..7 of the last byte unused
  ExpectRejected(padded, 1001, layout, 1001, "padding");
  ExpectRejected(good, 1001, layout, 1000, "has 1001 elements, want 1000");
  ExpectRejected(good, 1001, Layout::kSumBits, 1001, "not a ternary layout");
}

TEST(TernaryLayoutTest, RejectsMalformedBase3) {
  const Layout layout = Layout::kTernaryBase3;
  const std::vector<uint8_t> good = Pack(RandomCodes(1003, 3), layout);
  ASSERT_EQ(good.size(), 201u);
  ExpectRejected(std::vector<uint8_t>(good.begin(), good.end() - 1), 1003,
                 layout, 1003, "has 200 bytes, want 201");
  std::vector<uint8_t> corrupt = good;
  corrupt[17] = 243;
  ExpectRejected(corrupt, 1003, layout, 1003, "byte 17 is 243");
  corrupt[17] = 255;
  ExpectRejected(corrupt, 1003, layout, 1003, "byte 17 is 255");
  std::vector<uint8_t> padded = good;
  padded.back() = 27;  // 1003 % 5 == 3 digits used: must be below 27
  ExpectRejected(padded, 1003, layout, 1003, "padding");
  padded.back() = 26;
  std::vector<int32_t> sums(1003);
  EXPECT_TRUE(
      AccumulateTernary(padded, 1003, layout, absl::MakeSpan(sums)).ok());
  ExpectRejected(good, 1003, layout, 1004, "has 1003 elements, want 1004");
}

// The check reads eight bytes at a time and the rest one by one: every
// byte value at every position of a word and of the tail is judged alone.
TEST(TernaryLayoutTest, Base3ChecksEveryByteValueAtEveryPosition) {
  const Layout layout = Layout::kTernaryBase3;
  const uint64_t n = 5 * 13;  // 13 bytes: one word, then five more
  for (size_t at = 0; at < 13; ++at) {
    for (int value = 0; value < 256; ++value) {
      std::vector<uint8_t> packed(13, 242);
      packed[at] = static_cast<uint8_t>(value);
      const absl::Status status = CheckTernaryCodes(packed, n, layout);
      if (value <= 242) {
        EXPECT_TRUE(status.ok()) << at << " " << value << ": " << status;
      } else {
        EXPECT_THAT(std::string(status.message()),
                    HasSubstr(absl::StrCat("byte ", at, " is ", value)));
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Sum layouts

TEST(SumLayoutTest, WidthsFollowTheDefinition) {
  for (const uint32_t n : kSummands) {
    uint32_t bits = 0;
    while ((uint64_t{1} << bits) < 2 * uint64_t{n} + 1) ++bits;
    EXPECT_EQ(SumBits(n), bits) << n;
    uint32_t digits = 0;
    unsigned __int128 power = 1;
    while (power * (2 * n + 1) <= (static_cast<unsigned __int128>(1) << 64)) {
      power *= 2 * n + 1;
      ++digits;
    }
    EXPECT_EQ(SumRadixDigitsPerWord(n), digits) << n;
  }
  EXPECT_EQ(SumBits(1), 2u);
  EXPECT_EQ(SumBits(2), 3u);
  EXPECT_EQ(SumBits(4), 4u);
  EXPECT_EQ(SumBits(8), 5u);
  EXPECT_EQ(SumRadixDigitsPerWord(1), 40u);  // 3^40 < 2^64 < 3^41
  EXPECT_EQ(SumBits(0), 0u);
  EXPECT_EQ(PackedSumBytes(10, 0, Layout::kSumBits), 0u);
  EXPECT_EQ(PackedSumBytes(10, 3, Layout::kSumBits), 4u);  // 30 bits
  EXPECT_EQ(PackedSumBytes(41, 1, Layout::kSumRadix), 16u);
}

TEST(SumLayoutTest, KnownBytes) {
  const std::vector<int32_t> sums = {-1, 0, 1};
  std::vector<uint8_t> bits(PackedSumBytes(3, 1, Layout::kSumBits));
  PackSums(sums, 1, Layout::kSumBits, absl::MakeSpan(bits));
  EXPECT_EQ(bits, std::vector<uint8_t>{0x24});  // fields 0, 1, 2
  std::vector<uint8_t> radix(PackedSumBytes(3, 1, Layout::kSumRadix));
  PackSums(sums, 1, Layout::kSumRadix, absl::MakeSpan(radix));
  EXPECT_EQ(radix, (std::vector<uint8_t>{21, 0, 0, 0, 0, 0, 0, 0}));  // 0+3+18
}

class SumRoundTripTest
    : public ::testing::TestWithParam<std::tuple<uint64_t, uint32_t, Layout>> {
};

TEST_P(SumRoundTripTest, PackMatchesTheReferenceAndDecodes) {
  const auto [n, n_summands, layout] = GetParam();
  const std::vector<int32_t> sums = RandomSums(n, n_summands, 4);
  std::vector<uint8_t> packed(PackedSumBytes(n, n_summands, layout));
  PackSums(sums, n_summands, layout, absl::MakeSpan(packed));
  EXPECT_EQ(packed,
            layout == Layout::kSumBits
                ? ReferenceSumBits(sums, n_summands, SumBits(n_summands))
                : ReferenceSumRadix(sums, n_summands,
                                    SumRadixDigitsPerWord(n_summands)));
  std::vector<int32_t> unpacked(n, 12345);
  ASSERT_TRUE(
      UnpackSums(packed, n, n_summands, layout, absl::MakeSpan(unpacked)).ok());
  EXPECT_EQ(unpacked, sums);
  std::vector<float> decoded(n, -1.0f);
  const float scaler = 0.37f;
  ASSERT_TRUE(
      DecodeSums(packed, n, n_summands, layout, scaler, absl::MakeSpan(decoded))
          .ok());
  const float factor = scaler / static_cast<float>(n_summands);
  for (uint64_t i = 0; i < n; ++i) {
    ASSERT_EQ(decoded[i], static_cast<float>(sums[i]) * factor) << i;
  }
}

// Every field width the per-width loops are compiled for (2 to 26 bits),
// each at the smallest N that needs it, against the reference packer.
TEST(SumLayoutTest, EveryBitWidthRoundTrips) {
  for (uint32_t bits = 2; bits <= 26; ++bits) {
    const uint32_t n_summands = uint32_t{1} << (bits - 2);
    ASSERT_EQ(SumBits(n_summands), bits);
    const std::vector<int32_t> sums = RandomSums(77, n_summands, bits);
    std::vector<uint8_t> packed(
        PackedSumBytes(sums.size(), n_summands, Layout::kSumBits));
    PackSums(sums, n_summands, Layout::kSumBits, absl::MakeSpan(packed));
    EXPECT_EQ(packed, ReferenceSumBits(sums, n_summands, bits)) << bits;
    std::vector<int32_t> unpacked(sums.size(), 12345);
    ASSERT_TRUE(UnpackSums(packed, sums.size(), n_summands, Layout::kSumBits,
                           absl::MakeSpan(unpacked))
                    .ok());
    EXPECT_EQ(unpacked, sums) << bits;
  }
}

INSTANTIATE_TEST_SUITE_P(
    SmallSizes, SumRoundTripTest,
    ::testing::Combine(::testing::Values(0, 1, 4, 5, 7, 8, 9, 63, 64, 65, 1000),
                       ::testing::ValuesIn(kSummands),
                       ::testing::Values(Layout::kSumBits, Layout::kSumRadix)));
INSTANTIATE_TEST_SUITE_P(
    LargeSize, SumRoundTripTest,
    ::testing::Combine(::testing::Values((1u << 20) + 3),
                       ::testing::Values(1, 2, 4, 7, 16, 100),
                       ::testing::Values(Layout::kSumBits, Layout::kSumRadix)));

void ExpectSumsRejected(const std::vector<uint8_t>& packed, uint64_t n,
                        uint32_t n_summands, Layout layout, size_t out_size,
                        const std::string& why) {
  std::vector<float> out(out_size);
  const absl::Status status =
      DecodeSums(packed, n, n_summands, layout, 1.0f, absl::MakeSpan(out));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << why;
  EXPECT_THAT(std::string(status.message()), HasSubstr(why));
  std::vector<int32_t> sums(out_size);
  EXPECT_FALSE(
      UnpackSums(packed, n, n_summands, layout, absl::MakeSpan(sums)).ok());
}

TEST(SumLayoutTest, RejectsMalformedSumBits) {
  const Layout layout = Layout::kSumBits;
  // N = 3: 3 bits per field, values 0..6 valid and 7 invalid.
  const std::vector<int32_t> sums = RandomSums(101, 3, 5);
  std::vector<uint8_t> good(PackedSumBytes(101, 3, layout));
  PackSums(sums, 3, layout, absl::MakeSpan(good));
  ASSERT_EQ(good.size(), 38u);  // 303 bits
  ExpectSumsRejected(std::vector<uint8_t>(good.begin(), good.end() - 1), 101, 3,
                     layout, 101, "has 37 bytes, want 38");
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  ExpectSumsRejected(longer, 101, 3, layout, 101, "has 39 bytes");
  for (const uint64_t element : {0, 50, 100}) {
    std::vector<uint8_t> corrupt = ReferenceSumBits(sums, 3, 3);
    for (uint64_t bit = 3 * element; bit < 3 * element + 3; ++bit) {
      corrupt[bit / 8] |= static_cast<uint8_t>(1 << (bit % 8));
    }
    ExpectSumsRejected(corrupt, 101, 3, layout, 101,
                       "field 7 of element " + std::to_string(element));
  }
  std::vector<uint8_t> padded = good;
  padded.back() |= 0x80;  // 303 bits: bit 7 of the last byte is padding
  ExpectSumsRejected(padded, 101, 3, layout, 101, "padding");
  ExpectSumsRejected(good, 101, 3, layout, 100, "has 101 elements, want 100");
  ExpectSumsRejected(good, 101, 0, layout, 101, "0 summands");
  ExpectSumsRejected(good, 101, kMaxSummands + 1, layout, 101, "summands");
  ExpectSumsRejected(good, 101, 3, Layout::kTernary2Bit, 101,
                     "not a sum layout");
  // The same bytes read with another N have another length.
  ExpectSumsRejected(good, 101, 4, layout, 101, "want 51");
}

TEST(SumLayoutTest, RejectsMalformedSumRadix) {
  const Layout layout = Layout::kSumRadix;
  // N = 1: radix 3, 40 digits per word; 100 elements = 3 words, the last
  // holding 20 digits.
  const std::vector<int32_t> sums = RandomSums(100, 1, 6);
  std::vector<uint8_t> good(PackedSumBytes(100, 1, layout));
  PackSums(sums, 1, layout, absl::MakeSpan(good));
  ASSERT_EQ(good.size(), 24u);
  ExpectSumsRejected(std::vector<uint8_t>(good.begin(), good.end() - 8), 100, 1,
                     layout, 100, "has 16 bytes, want 24");
  std::vector<uint8_t> corrupt = good;
  for (int b = 8; b < 16; ++b) corrupt[b] = 0xFF;  // word 1 >= 3^40
  ExpectSumsRejected(corrupt, 100, 1, layout, 100, "word 1 is out of range");
  // Word 0 at exactly 3^40 is one past the largest valid word.
  uint64_t limit = 1;
  for (int j = 0; j < 40; ++j) limit *= 3;
  corrupt = good;
  for (int b = 0; b < 8; ++b)
    corrupt[b] = static_cast<uint8_t>(limit >> (8 * b));
  ExpectSumsRejected(corrupt, 100, 1, layout, 100, "word 0 is out of range");
  for (int b = 0; b < 8; ++b) {
    corrupt[b] = static_cast<uint8_t>((limit - 1) >> (8 * b));
  }
  std::vector<float> out(100);
  EXPECT_TRUE(
      DecodeSums(corrupt, 100, 1, layout, 1.0f, absl::MakeSpan(out)).ok());
  // The last word holds 20 digits: 3^20 and above means a padding digit.
  std::vector<uint8_t> padded = good;
  uint64_t padding = 1;
  for (int j = 0; j < 20; ++j) padding *= 3;
  for (int b = 0; b < 8; ++b)
    padded[16 + b] = static_cast<uint8_t>(padding >> (8 * b));
  ExpectSumsRejected(padded, 100, 1, layout, 100, "word 2 is out of range");
  ExpectSumsRejected(good, 100, 1, layout, 99, "has 100 elements, want 99");
}

}  // namespace
}  // namespace tern::kernels
