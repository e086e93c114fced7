#include "core/wire.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern::core {
namespace {

using ::testing::ElementsAre;

kernels::Payload SomePayload() {
  kernels::Payload payload;
  payload.codec = kernels::CodecId::kTernGrad;
  payload.layout = kernels::Layout::kSumRadix;
  payload.format_version = kernels::kFormatVersion;
  payload.num_elements = 1234;
  payload.num_summands = 4;
  payload.scalers = {0.5f, -2.0f};
  // A zero byte inside: the data is bytes, not a C string.
  payload.data = std::string("\x01\x00\xff", 3);
  return payload;
}

void ExpectSamePayload(const kernels::Payload& a, const kernels::Payload& b) {
  EXPECT_EQ(a.codec, b.codec);
  EXPECT_EQ(a.layout, b.layout);
  EXPECT_EQ(a.format_version, b.format_version);
  EXPECT_EQ(a.num_elements, b.num_elements);
  EXPECT_EQ(a.num_summands, b.num_summands);
  EXPECT_EQ(a.scalers, b.scalers);
  EXPECT_EQ(a.data, b.data);
}

TEST(WireTest, PayloadsKeepEveryFieldBothWays) {
  const kernels::Payload payload = SomePayload();
  tern::v1::Payload wire;
  PayloadToWire(payload, &wire);
  EXPECT_EQ(wire.codec(), tern::v1::CODEC_TERNGRAD);
  EXPECT_EQ(wire.layout(), tern::v1::LAYOUT_SUM_RADIX);
  EXPECT_EQ(wire.format_version(), kernels::kFormatVersion);
  EXPECT_EQ(wire.num_elements(), 1234u);
  EXPECT_EQ(wire.num_summands(), 4u);
  EXPECT_THAT(wire.scalers(), ElementsAre(0.5f, -2.0f));
  EXPECT_EQ(wire.data(), std::string("\x01\x00\xff", 3));

  const absl::StatusOr<kernels::Payload> back = PayloadFromWire(wire);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSamePayload(*back, payload);

  // And wire -> plain -> wire gives the same bytes.
  tern::v1::Payload again;
  PayloadToWire(*back, &again);
  EXPECT_EQ(again.SerializeAsString(), wire.SerializeAsString());
}

TEST(WireTest, TheMovingOverloadWritesTheSameMessage) {
  tern::v1::Payload copied;
  PayloadToWire(SomePayload(), &copied);  // a temporary: the moving overload
  const kernels::Payload payload = SomePayload();
  tern::v1::Payload from_const;
  PayloadToWire(payload, &from_const);
  EXPECT_EQ(copied.SerializeAsString(), from_const.SerializeAsString());
  EXPECT_EQ(payload.data, std::string("\x01\x00\xff", 3));  // left intact

  kernels::Payload moved = SomePayload();
  moved.data.assign(1 << 16, 'x');  // beyond any small-string buffer
  const char* bytes = moved.data.data();
  tern::v1::Payload wire;
  PayloadToWire(std::move(moved), &wire);
  EXPECT_EQ(wire.data().size(), 1u << 16);
  EXPECT_EQ(wire.data().data(), bytes);  // the buffer itself, not a copy
}

TEST(WireTest, TheMovingReaderTakesTheBytesAndKeepsTheHeader) {
  tern::v1::Payload wire;
  kernels::Payload big = SomePayload();
  big.data.assign(1 << 16, 'y');  // beyond any small-string buffer
  PayloadToWire(big, &wire);
  const char* bytes = wire.data().data();
  const absl::StatusOr<kernels::Payload> moved =
      PayloadFromWire(std::move(wire));
  ASSERT_TRUE(moved.ok()) << moved.status();
  ExpectSamePayload(*moved, big);
  EXPECT_EQ(moved->data.data(), bytes);  // the buffer itself, not a copy
  // What error messages read of the message is still there.
  EXPECT_EQ(wire.num_elements(), 1234u);  // NOLINT(bugprone-use-after-move)
  EXPECT_TRUE(wire.data().empty());

  tern::v1::Payload unknown;
  PayloadToWire(SomePayload(), &unknown);
  unknown.set_codec(static_cast<tern::v1::Codec>(99));
  EXPECT_EQ(PayloadFromWire(std::move(unknown)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Every number the kernels know is accepted and keeps its value.
class KnownNumbersTest : public ::testing::TestWithParam<int> {};

TEST_P(KnownNumbersTest, AreAccepted) {
  tern::v1::Payload wire;
  wire.set_codec(static_cast<tern::v1::Codec>(GetParam()));
  wire.set_layout(static_cast<tern::v1::Layout>(GetParam()));
  const absl::StatusOr<kernels::Payload> payload = PayloadFromWire(wire);
  ASSERT_TRUE(payload.ok()) << payload.status();
  EXPECT_EQ(static_cast<int>(payload->codec), GetParam());
  EXPECT_EQ(static_cast<int>(payload->layout), GetParam());
}

INSTANTIATE_TEST_SUITE_P(ZeroToNine, KnownNumbersTest, ::testing::Range(0, 10));

// Layouts 10 (INDEX_2BIT, dropping's 2-bit survivors) and 11 (SUM_HUFFMAN)
// are known; codec 10 is not.
TEST(WireTest, TheLayoutsAfterTheCodecsAreKnown) {
  absl::StatusOr<kernels::Layout> layout =
      LayoutFromWire(tern::v1::LAYOUT_INDEX_2BIT);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(*layout, kernels::Layout::kIndex2Bit);
  layout = LayoutFromWire(tern::v1::LAYOUT_SUM_HUFFMAN);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(*layout, kernels::Layout::kSumHuffman);
  EXPECT_FALSE(CodecFromWire(10).ok());
}

// Numbers outside the enums (a newer or broken peer) are refused, naming
// the field and the number, and never cast.
class UnknownNumbersTest : public ::testing::TestWithParam<int> {};

TEST_P(UnknownNumbersTest, AreRefusedNamingTheNumber) {
  const int number = GetParam();
  tern::v1::Payload wire;
  PayloadToWire(SomePayload(), &wire);
  wire.set_codec(static_cast<tern::v1::Codec>(number));
  absl::StatusOr<kernels::Payload> payload = PayloadFromWire(wire);
  EXPECT_EQ(payload.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(payload.status().message(), absl::StrCat("unknown codec ", number));

  wire.set_codec(tern::v1::CODEC_FP32);
  wire.set_layout(static_cast<tern::v1::Layout>(number));
  payload = PayloadFromWire(wire);
  EXPECT_EQ(payload.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(payload.status().message(),
            absl::StrCat("unknown layout ", number));

  EXPECT_FALSE(CodecFromWire(number).ok());
  EXPECT_FALSE(LayoutFromWire(number).ok());
}

INSTANTIATE_TEST_SUITE_P(OutOfRange, UnknownNumbersTest,
                         ::testing::Values(-2147483647 - 1, -3, -1, 12, 42, 99,
                                           2147483647));

TEST(WireTest, PayloadBytesCountDataAndScalersOnly) {
  kernels::Payload payload = SomePayload();
  tern::v1::Payload wire;
  PayloadToWire(payload, &wire);
  EXPECT_EQ(PayloadBytes(wire), 3u + 2u * 4u);
  EXPECT_EQ(PayloadBytes(payload), 3u + 2u * 4u);
  EXPECT_LT(PayloadBytes(wire), wire.ByteSizeLong());  // no framing counted

  payload.scalers.clear();
  payload.data.clear();
  EXPECT_EQ(PayloadBytes(payload), 0u);
  EXPECT_EQ(PayloadBytes(tern::v1::Payload()), 0u);
}

}  // namespace
}  // namespace tern::core
