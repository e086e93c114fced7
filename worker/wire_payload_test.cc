#include "worker/wire_payload.h"

#include "gtest/gtest.h"

namespace tern::worker {
namespace {

TEST(WirePayloadTest, RoundTripsEveryField) {
  kernels::Payload payload;
  payload.codec = kernels::CodecId::kTernGrad;
  payload.layout = kernels::Layout::kSumRadix;
  payload.format_version = 1;
  payload.num_elements = 1234;
  payload.num_summands = 4;
  payload.scalers = {0.5f, -2.0f};
  payload.data = std::string("\x01\x00\xff", 3);

  tern::v1::Payload wire;
  ToWire(payload, &wire);
  EXPECT_EQ(wire.codec(), tern::v1::CODEC_TERNGRAD);
  EXPECT_EQ(wire.layout(), tern::v1::LAYOUT_SUM_RADIX);
  EXPECT_EQ(PayloadBytes(wire), 3u + 8u);

  const auto back = FromWire(wire);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->codec, payload.codec);
  EXPECT_EQ(back->layout, payload.layout);
  EXPECT_EQ(back->format_version, payload.format_version);
  EXPECT_EQ(back->num_elements, payload.num_elements);
  EXPECT_EQ(back->num_summands, payload.num_summands);
  EXPECT_EQ(back->scalers, payload.scalers);
  EXPECT_EQ(back->data, payload.data);
}

TEST(WirePayloadTest, RefusesUnknownEnumNumbers) {
  tern::v1::Payload wire;
  wire.set_codec(static_cast<tern::v1::Codec>(77));
  EXPECT_EQ(FromWire(wire).status().code(), absl::StatusCode::kInvalidArgument);
  wire.set_codec(tern::v1::CODEC_FP32);
  wire.set_layout(static_cast<tern::v1::Layout>(-3));
  const auto bad = FromWire(wire);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("-3"), absl::string_view::npos);
  wire.set_layout(static_cast<tern::v1::Layout>(10));
  EXPECT_EQ(FromWire(wire).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(WirePayloadTest, TheCompressorsLayoutsAreKnown) {
  for (const tern::v1::Layout layout :
       {tern::v1::LAYOUT_SIGN_BITS, tern::v1::LAYOUT_INDEX_SIGN,
        tern::v1::LAYOUT_INDEX_VALUE, tern::v1::LAYOUT_QSGD_LEVELS}) {
    tern::v1::Payload wire;
    wire.set_codec(tern::v1::CODEC_QSGD);
    wire.set_layout(layout);
    const auto payload = FromWire(wire);
    ASSERT_TRUE(payload.ok()) << payload.status();
    EXPECT_EQ(static_cast<int>(payload->layout), static_cast<int>(layout));
    EXPECT_EQ(payload->codec, kernels::CodecId::kQsgd);
  }
}

}  // namespace
}  // namespace tern::worker
