#include "kernels/sum_huffman.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "kernels/payload.h"
#include "kernels/ternary_math.h"
#include "kernels/terngrad.h"

namespace tern::kernels {
namespace {

absl::Span<const uint8_t> Bytes(const std::string& s) {
  return absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()),
                                   s.size());
}

// Sums of n workers' codes as TernGrad makes them: each code nonzero with
// probability `p`, its sign shared with probability `agree` (workers'
// gradients are correlated). The engine's raw output is portable.
std::vector<int32_t> TernarySums(uint32_t workers, size_t count, double p,
                                 double agree, uint64_t seed) {
  std::mt19937_64 engine(seed);
  auto uniform = [&engine] {
    return static_cast<double>(engine() >> 11) * 0x1.0p-53;
  };
  std::vector<int32_t> sums(count, 0);
  for (int32_t& sum : sums) {
    const int sign = uniform() < 0.5 ? -1 : 1;
    for (uint32_t w = 0; w < workers; ++w) {
      if (uniform() >= p) continue;
      sum += uniform() < agree ? sign : -sign;
    }
  }
  return sums;
}

std::vector<int32_t> Unpack(const std::string& packed, uint32_t workers,
                            size_t count, absl::Status* status) {
  std::vector<int32_t> sums(count, 0);
  *status = UnpackSums(Bytes(packed), count, workers, Layout::kSumHuffman,
                       absl::MakeSpan(sums));
  return sums;
}

void ExpectRoundTrip(const std::vector<int32_t>& sums, uint32_t workers) {
  const std::string packed = PackSumsHuffman(sums, workers);
  absl::Status status;
  EXPECT_EQ(Unpack(packed, workers, sums.size(), &status), sums)
      << "N = " << workers;
  ASSERT_TRUE(status.ok()) << status;
  const float factor = DecodeFactor(0.37f, workers);
  std::vector<float> values(sums.size());
  ASSERT_TRUE(DecodeSums(Bytes(packed), sums.size(), workers,
                         Layout::kSumHuffman, 0.37f, absl::MakeSpan(values))
                  .ok());
  for (size_t i = 0; i < sums.size(); ++i) {
    ASSERT_EQ(values[i], DecodeValue(sums[i], factor)) << "element " << i;
  }
}

// Huffman's bound over the order-0 entropy H: at most H + p_max + 0.086
// bits per element, p_max the likeliest symbol's share (Gallager, "Variations
// on a theme by Huffman", 1978).
double HuffmanBoundBits(const std::vector<int32_t>& sums, uint32_t workers) {
  std::vector<double> counts(2 * workers + 1, 0.0);
  for (int32_t sum : sums) counts[sum + workers] += 1.0;
  double bits = 0.0, largest = 0.0;
  for (double c : counts) {
    if (c > 0) bits -= c * std::log2(c / sums.size());
    largest = std::max(largest, c);
  }
  return bits + (largest / sums.size() + 0.086) * sums.size();
}

size_t HeaderBytes(uint32_t workers) {
  const uint32_t direct = std::min(workers, kHuffmanDirectLimit);
  const uint32_t symbols = 2 * direct + 1 + (workers > direct ? 1 : 0);
  return (symbols + 1) / 2;
}

TEST(SumHuffmanTest, EveryNFrom1To64RoundTripsAndNearsTheEntropy) {
  for (uint32_t workers = 1; workers <= 64; ++workers) {
    const std::vector<int32_t> sums =
        TernarySums(workers, 20011, 0.3, 0.7, workers);
    ExpectRoundTrip(sums, workers);
    // Up to 7 padding bits; the 12-bit limit never binds for these sums.
    const double bits =
        8.0 * (PackSumsHuffman(sums, workers).size() - HeaderBytes(workers)) -
        7;
    EXPECT_LE(bits, HuffmanBoundBits(sums, workers)) << "N = " << workers;
    EXPECT_LT(PackSumsHuffman(sums, workers).size(),
              PackedSumBytes(sums.size(), workers, Layout::kSumRadix))
        << "N = " << workers;
  }
}

// Sums that are all +-N, or spread evenly over [-N, N], have nothing to
// compress: the code must still decode them, within SUM_BITS' size plus the
// header (a fixed-width code is one of the prefix codes Huffman beats).
TEST(SumHuffmanTest, AdversarialSumsStayWithinSumBits) {
  std::mt19937_64 engine(5);
  for (uint32_t workers = 1; workers <= 64; ++workers) {
    const int32_t n = static_cast<int32_t>(workers);
    std::vector<int32_t> extreme(4099), uniform(4099);
    for (size_t i = 0; i < extreme.size(); ++i) {
      extreme[i] = (engine() & 1) != 0 ? n : -n;
      uniform[i] = static_cast<int32_t>(engine() % (2 * workers + 1)) - n;
    }
    for (const auto& sums : {extreme, uniform}) {
      ExpectRoundTrip(sums, workers);
      if (workers > kHuffmanDirectLimit) continue;  // escapes add a code
      EXPECT_LE(PackSumsHuffman(sums, workers).size(),
                PackedSumBytes(sums.size(), workers, Layout::kSumBits) +
                    HeaderBytes(workers))
          << "N = " << workers;
    }
  }
}

TEST(SumHuffmanTest, LargeNEscapesTheRareSums) {
  for (const uint32_t workers : {100u, 1000u, kMaxSummands}) {
    std::vector<int32_t> sums = TernarySums(64, 5000, 0.5, 0.9, workers);
    const int32_t n = static_cast<int32_t>(workers);
    sums[0] = n;
    sums[1] = -n;
    sums[2] = 64;
    sums[3] = -64;
    ExpectRoundTrip(sums, workers);
  }
}

TEST(SumHuffmanTest, EmptyAndSingleSymbolChunks) {
  EXPECT_EQ(PackSumsHuffman({}, 4), std::string(HeaderBytes(4), '\0'));
  ExpectRoundTrip({}, 4);
  ExpectRoundTrip({3}, 4);
  // One symbol costs the header only: its code is zero bits.
  const std::vector<int32_t> zeros(100000, 0);
  EXPECT_EQ(PackSumsHuffman(zeros, 4).size(), HeaderBytes(4));
  ExpectRoundTrip(zeros, 4);
  // Only the escape (N = 200, every sum +-200): raw fields, no code bits.
  std::vector<int32_t> far(9, 200);
  far[4] = -200;
  EXPECT_EQ(PackSumsHuffman(far, 200).size(),
            HeaderBytes(200) + (9 * SumBits(200) + 7) / 8);
  ExpectRoundTrip(far, 200);
}

// Counts growing like Fibonacci numbers make the optimal code as deep as
// the alphabet; the encoder limits it to kHuffmanMaxCodeBits.
TEST(SumHuffmanTest, DeepCodesAreLimited) {
  const uint32_t workers = 12;  // 25 symbols
  std::vector<int32_t> sums;
  uint64_t a = 1, b = 1;
  for (int32_t s = -12; s <= 12; ++s) {
    sums.insert(sums.end(), a, s);
    const uint64_t next = a + b;
    a = b;
    b = next;
  }
  const std::string packed = PackSumsHuffman(sums, workers);
  for (size_t byte = 0; byte < HeaderBytes(workers); ++byte) {
    EXPECT_LE(packed[byte] & 0xF, static_cast<int>(kHuffmanMaxCodeBits));
    EXPECT_LE((packed[byte] >> 4) & 0xF, static_cast<int>(kHuffmanMaxCodeBits));
  }
  ExpectRoundTrip(sums, workers);
}

// ---------------------------------------------------------------------------
// Malformed payloads: every one is refused with a message, never a crash.

std::string ErrorOf(const std::string& packed, uint32_t workers, size_t count) {
  absl::Status status;
  Unpack(packed, workers, count, &status);
  EXPECT_FALSE(status.ok());
  return std::string(status.message());
}

TEST(SumHuffmanTest, RefusesWrongLengths) {
  const std::vector<int32_t> sums = TernarySums(4, 1000, 0.3, 0.7, 1);
  const std::string good = PackSumsHuffman(sums, 4);
  EXPECT_NE(ErrorOf(good.substr(0, good.size() - 1), 4, sums.size())
                .find("ends inside element"),
            std::string::npos);
  EXPECT_NE(ErrorOf(good + '\0', 4, sums.size()).find("after the last"),
            std::string::npos);
  EXPECT_NE(ErrorOf(good.substr(0, 2), 4, sums.size()).find("header"),
            std::string::npos);
  // The same bytes read as more elements than they hold.
  EXPECT_FALSE(ErrorOf(good, 4, sums.size() + 100).empty());
}

TEST(SumHuffmanTest, RefusesBadHeaders) {
  const std::vector<int32_t> sums = TernarySums(4, 1000, 0.3, 0.7, 2);
  const std::string good = PackSumsHuffman(sums, 4);  // 9 symbols, 5 bytes
  std::string bad = good;
  bad[0] = static_cast<char>((bad[0] & 0xF0) | 13);
  EXPECT_NE(ErrorOf(bad, 4, sums.size()).find("above 12"), std::string::npos);
  bad = good;
  bad[4] = static_cast<char>(bad[4] | 0x10);  // symbol 9 does not exist
  EXPECT_NE(ErrorOf(bad, 4, sums.size()).find("padding nibble"),
            std::string::npos);
  bad = good;
  bad[2] = static_cast<char>(bad[2] + 1);  // symbol 4 (sum 0) one bit longer
  EXPECT_NE(ErrorOf(bad, 4, sums.size()).find("complete prefix code"),
            std::string::npos);
  EXPECT_NE(ErrorOf(std::string(5, '\0'), 4, 10).find("codes 0 symbols"),
            std::string::npos);
  EXPECT_NE(ErrorOf(good.substr(0, 5), 4, 0).find("for 0 elements"),
            std::string::npos);
  // One symbol must say length 1.
  EXPECT_NE(ErrorOf(std::string("\0\0\x02\0\0", 5), 4, 3)
                .find("complete prefix code"),
            std::string::npos);
  EXPECT_NE(ErrorOf(good, 0, sums.size()).find("summands"), std::string::npos);
}

TEST(SumHuffmanTest, RefusesNonzeroPadding) {
  // 3 elements of a 2-symbol code: 3 bits, 5 padding bits.
  const std::string good = PackSumsHuffman({1, -1, 1}, 1);
  ASSERT_EQ(good.size(), 2u + 1u);
  std::string bad = good;
  bad[2] = static_cast<char>(bad[2] | 0x80);
  EXPECT_NE(ErrorOf(bad, 1, 3).find("nonzero padding"), std::string::npos);
}

TEST(SumHuffmanTest, RefusesEscapesOfDirectOrOutOfRangeSums) {
  // N = 100: symbols 0..126 direct, 127 the escape; raw fields of 8 bits.
  // Header: only the escape, length 1 (byte 63, high nibble).
  std::string escape_only(HeaderBytes(100), '\0');
  escape_only[63] = 0x10;
  std::string direct = escape_only + static_cast<char>(100 + 5);  // sum 5
  EXPECT_NE(ErrorOf(direct, 100, 1).find("escapes the sum 5"),
            std::string::npos);
  std::string beyond = escape_only + static_cast<char>(201);  // 2N + 1
  EXPECT_NE(ErrorOf(beyond, 100, 1).find("escapes the sum 101"),
            std::string::npos);
  std::string fine = escape_only + static_cast<char>(200);
  absl::Status status;
  EXPECT_EQ(Unpack(fine, 100, 1, &status), std::vector<int32_t>{100});
  EXPECT_TRUE(status.ok()) << status;
}

// Random corruption of valid chunks: decoding either fails or yields sums
// in [-N, N]; under the sanitizers it also never reads out of bounds.
// Returns how many were refused. Chunks of `min_count` or more elements
// take the decoder's multi-symbol path.
int CorruptAndDecode(int trials, size_t min_count, size_t max_count) {
  std::mt19937_64 engine(11);
  int refused = 0;
  for (int trial = 0; trial < trials; ++trial) {
    const uint32_t workers = 1 + engine() % 80;
    const size_t count = min_count + engine() % (max_count - min_count);
    const std::vector<int32_t> sums =
        TernarySums(workers, count, 0.4, 0.6, trial);
    std::string packed = PackSumsHuffman(sums, workers);
    const int flips = 1 + static_cast<int>(engine() % 3);
    for (int f = 0; f < flips; ++f) {
      packed[engine() % packed.size()] ^= static_cast<char>(1 + engine() % 255);
    }
    if (engine() % 4 == 0) packed.resize(engine() % (packed.size() + 1));
    absl::Status status;
    const std::vector<int32_t> got = Unpack(packed, workers, count, &status);
    if (!status.ok()) {
      ++refused;
      continue;
    }
    for (const int32_t sum : got) {
      EXPECT_LE(std::abs(sum), static_cast<int32_t>(workers));
    }
  }
  return refused;
}

TEST(SumHuffmanTest, CorruptedChunksNeverEscapeTheRange) {
  // Most corruptions are caught (a length, the padding or the header no
  // longer fits), not decoded to other sums.
  EXPECT_GT(CorruptAndDecode(3000, 0, 300), 1500);
  EXPECT_GT(CorruptAndDecode(200, 20000, 40000), 100);
}

}  // namespace
}  // namespace tern::kernels
