#include "common/checksum.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern {
namespace {

// XXH3-64 with seed 0, as the xxHash reference implementation gives it; a
// checksum that changed would split a cluster of old and new processes.
TEST(ChecksumTest, KnownAnswers) {
  EXPECT_EQ(ChecksumOf(""), 0x2d06800538d394c2ull);
  EXPECT_EQ(ChecksumOf("a"), 0xe6c632b61e964e1full);
  EXPECT_EQ(ChecksumOf("abc"), 0x78af5f94892f3950ull);
  EXPECT_EQ(ChecksumOf("The quick brown fox jumps over the lazy dog"),
            0xce7d19a5418fb365ull);
  Checksum empty;
  EXPECT_EQ(empty.value(), 0x2d06800538d394c2ull);
}

TEST(ChecksumTest, UpdateU64AppendsLittleEndianBytes) {
  Checksum words;
  words.UpdateU64(0x0706050403020100ull);
  const std::string bytes("\x00\x01\x02\x03\x04\x05\x06\x07", 8);
  EXPECT_EQ(words.value(), ChecksumOf(bytes));
}

std::string Bytes(size_t n) {
  std::string bytes(n, '\0');
  uint32_t x = 12345;
  for (char& c : bytes) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  return bytes;
}

// Sizes around XXH3's internal boundaries (16, 128, 240 bytes, its 256-byte
// stripe buffer and 1 KiB blocks) and a float model's worth.
class ChecksumSplitTest : public ::testing::TestWithParam<size_t> {};

TEST_P(ChecksumSplitTest, AnySplitGivesTheWholeBuffersChecksum) {
  const std::string bytes = Bytes(GetParam());
  const uint64_t whole = ChecksumOf(bytes);
  for (size_t piece : {size_t{1}, size_t{3}, size_t{64}, size_t{255},
                       size_t{1000}, size_t{4096}}) {
    Checksum pieces;
    for (size_t at = 0; at < bytes.size(); at += piece) {
      pieces.Update(absl::string_view(bytes).substr(at, piece));
    }
    pieces.Update(nullptr, 0);
    EXPECT_EQ(pieces.value(), whole) << "pieces of " << piece;
  }
  // One cut at every position of a short prefix of the buffer.
  for (size_t cut = 0; cut <= std::min<size_t>(bytes.size(), 300); ++cut) {
    Checksum two;
    two.Update(absl::string_view(bytes).substr(0, cut));
    two.Update(absl::string_view(bytes).substr(cut));
    ASSERT_EQ(two.value(), whole) << "cut at " << cut;
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, ChecksumSplitTest,
                         ::testing::Values(0, 1, 15, 16, 17, 128, 129, 240,
                                           241, 256, 1023, 1024, 1025, 5000,
                                           (1 << 20) + 7));

TEST(ChecksumTest, ValueCanBeReadAndAppendingGoesOn) {
  Checksum c;
  c.Update("ab");
  EXPECT_EQ(c.value(), ChecksumOf("ab"));
  c.Update("c");
  EXPECT_EQ(c.value(), ChecksumOf("abc"));
}

TEST(ChecksumTest, AMovedChecksumKeepsItsState) {
  Checksum c;
  c.Update("ab");
  Checksum moved = std::move(c);
  moved.Update("c");
  EXPECT_EQ(moved.value(), ChecksumOf("abc"));
}

TEST(ChecksumTest, OneChangedBitChangesIt) {
  std::string bytes = Bytes(4096);
  const uint64_t before = ChecksumOf(bytes);
  bytes[2049] ^= 0x10;
  EXPECT_NE(ChecksumOf(bytes), before);
}

TEST(FormatChecksumTest, IsZeroPaddedLowerCaseHex) {
  EXPECT_EQ(FormatChecksum(0), "0x0000000000000000");
  EXPECT_EQ(FormatChecksum(0xab), "0x00000000000000ab");
  EXPECT_EQ(FormatChecksum(0xDEADBEEFCAFEF00Dull), "0xdeadbeefcafef00d");
  EXPECT_EQ(FormatChecksum(~0ull), "0xffffffffffffffff");
}

// Every value FormatChecksum writes reads back as itself.
TEST(ParseChecksumTest, ReadsWhatFormatChecksumWrites) {
  for (uint64_t value : {uint64_t{0}, uint64_t{1}, uint64_t{0xdeadbeef},
                         uint64_t{0x0123456789abcdef}, ~uint64_t{0}}) {
    absl::StatusOr<uint64_t> back = ParseChecksum(FormatChecksum(value));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, value);
  }
  absl::StatusOr<uint64_t> upper = ParseChecksum("0x00000000DEADBEEF");
  ASSERT_TRUE(upper.ok()) << upper.status();
  EXPECT_EQ(*upper, 0xdeadbeefull);
}

TEST(ParseChecksumTest, RefusesMalformedTextNamingWhy) {
  using ::testing::HasSubstr;
  const std::pair<std::string, std::string> cases[] = {
      {"", "lacks the 0x prefix"},
      {"00000000deadbeef", "lacks the 0x prefix"},
      {"0X00000000deadbeef", "lacks the 0x prefix"},
      {"0xab", "has 2 digits"},
      {"0x", "has 0 digits"},
      {"0x00000000deadbeef0", "has 17 digits"},
      {"0x00000000deadbeeg", "not a hex digit"},
      {"0x-0000000deadbeef", "not a hex digit"},
      {"0x 0000000deadbeef", "not a hex digit"},
  };
  for (const auto& [text, why] : cases) {
    absl::StatusOr<uint64_t> parsed = ParseChecksum(text);
    ASSERT_FALSE(parsed.ok()) << "'" << text << "' parsed as " << *parsed;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), HasSubstr(why)) << text;
    EXPECT_THAT(parsed.status().message(), HasSubstr("'" + text + "'")) << text;
    EXPECT_THAT(parsed.status().message(), HasSubstr("16 hex digits"));
  }
}

}  // namespace
}  // namespace tern
