#include "global/update_encoding.h"

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/codec_options.h"
#include "kernels/codec_registry.h"

namespace tern::global {
namespace {

using kernels::CodecId;
using kernels::Layout;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<kernels::Codec> MakeCodec(CodecId id, Layout layout) {
  kernels::CodecOptions options;
  options.id = id;
  options.clip = 0.0f;
  options.push_layout = layout;
  return *kernels::MakeCodec(options);
}

TEST(UpdateLayoutTest, ResolvesDefaultsAndRefusesWhatTheGsCannotAverage) {
  EXPECT_EQ(*UpdateLayout(CodecId::kFp32, Layout::kUnspecified), Layout::kRaw);
  EXPECT_EQ(*UpdateLayout(CodecId::kFp16, Layout::kRaw), Layout::kRaw);
  EXPECT_EQ(*UpdateLayout(CodecId::kTernGrad, Layout::kUnspecified),
            Layout::kTernary2Bit);
  EXPECT_EQ(*UpdateLayout(CodecId::kTernGrad, Layout::kTernaryBase3),
            Layout::kTernaryBase3);
  const absl::Status status =
      UpdateLayout(CodecId::kFp32, Layout::kIndexValue).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("is not one the GS averages"));
  EXPECT_FALSE(UpdateLayout(CodecId::kQsgd, Layout::kUnspecified).ok());
}

TEST(AnswerFitsTest, CountsTheWidestEncodingPerChunkToTheByte) {
  // 1 MiB of slack and 128 bytes of framing per chunk (core/limits.h).
  constexpr uint64_t kLimit = (uint64_t{1} << 20) + 128 + 4000;
  EXPECT_TRUE(AnswerFits({1000}, {}, CodecId::kFp32, Layout::kRaw, kLimit));
  EXPECT_FALSE(AnswerFits({1001}, {}, CodecId::kFp32, Layout::kRaw, kLimit));
  // fp16: 2 bytes per element; TernGrad: 4 elements per byte.
  EXPECT_TRUE(AnswerFits({2000}, {}, CodecId::kFp16, Layout::kRaw, kLimit));
  EXPECT_FALSE(AnswerFits({2001}, {}, CodecId::kFp16, Layout::kRaw, kLimit));
  EXPECT_TRUE(AnswerFits({16000}, {}, CodecId::kTernGrad,
                         Layout::kTernary2Bit, kLimit));
  EXPECT_FALSE(AnswerFits({16001}, {}, CodecId::kTernGrad,
                          Layout::kTernary2Bit, kLimit));
  // An fp32 chunk key counts that chunk at 4 bytes per element.
  EXPECT_FALSE(AnswerFits({1001}, {0}, CodecId::kTernGrad,
                          Layout::kTernary2Bit, kLimit));
  // A second chunk adds its framing.
  EXPECT_FALSE(AnswerFits({1000, 0}, {}, CodecId::kFp32, Layout::kRaw,
                          kLimit));
  // Counts beyond the core's limit never fit, and do not wrap.
  EXPECT_FALSE(AnswerFits({uint64_t{1} << 62, uint64_t{1} << 62}, {},
                          CodecId::kFp32, Layout::kRaw,
                          std::numeric_limits<uint64_t>::max()));
}

SyncRequest Request(std::vector<ChunkPayload> updates) {
  SyncRequest request;
  request.datacenter = 2;
  request.round = 7;
  request.updates = std::move(updates);
  return request;
}

TEST(DecodeUpdatesTest, DecodesEachChunkAndTakesFp32ForAnyChunk) {
  const auto terngrad = MakeCodec(CodecId::kTernGrad, Layout::kTernary2Bit);
  const auto fp32 = MakeCodec(CodecId::kFp32, Layout::kRaw);
  const ChunkSpec spec{4, CodecId::kTernGrad, Layout::kTernary2Bit,
                       terngrad.get()};
  const std::vector<float> values = {1.5f, -2.0f, 0.25f, 3.0f};
  const SyncRequest request =
      Request({ChunkPayload{0, *fp32->Encode(values, {})},
               ChunkPayload{1, *terngrad->Encode(values, {})}});
  const absl::StatusOr<DecodedUpdates> decoded =
      DecodeUpdates(request, {&spec, &spec}, fp32.get());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->chunks.size(), 2u);
  EXPECT_EQ(decoded->chunks[0].first, 0u);
  EXPECT_EQ(decoded->chunks[0].second, values);  // fp32: exact
  EXPECT_EQ(decoded->chunks[1].first, 1u);
  EXPECT_THAT(decoded->exact, ElementsAre(0u));
  EXPECT_EQ(decoded->bytes,
            request.updates[0].payload.data.size() +
                request.updates[1].payload.data.size() + 4 * 1);
}

TEST(DecodeUpdatesTest, RefusesNamingRoundChunkAndDataCenter) {
  const auto fp16 = MakeCodec(CodecId::kFp16, Layout::kRaw);
  const auto fp32 = MakeCodec(CodecId::kFp32, Layout::kRaw);
  const ChunkSpec spec{3, CodecId::kFp16, Layout::kRaw, fp16.get()};
  const std::vector<float> bad = {1.0f, std::numeric_limits<float>::infinity(),
                                  2.0f};
  struct Case {
    kernels::Payload payload;
    std::string message;
  };
  kernels::Payload wrong_count = *fp16->Encode({1.0f, 2.0f}, {});
  kernels::Payload version = *fp16->Encode({1.0f, 2.0f, 3.0f}, {});
  version.format_version = 9;
  const std::vector<Case> cases = {
      {wrong_count, "2 elements, but the chunk has 3"},
      {version, "format version 9"},
      {*fp32->Encode(bad, {}), "element 1 is inf"},
  };
  for (const Case& c : cases) {
    const absl::Status status =
        DecodeUpdates(Request({ChunkPayload{5, c.payload}}), {&spec},
                      fp32.get())
            .status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(),
                AllOf(HasSubstr("round 7: chunk 5 of data center 2: "),
                      HasSubstr(c.message)));
  }
}

}  // namespace
}  // namespace tern::global
