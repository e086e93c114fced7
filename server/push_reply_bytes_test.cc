#include "server/push_reply_bytes.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "server/wire.h"

namespace tern::server {
namespace {

// What the services sent before: PushToWire's message, serialized.
std::string ViaMessage(const PushReply& reply) {
  tern::v1::PushPullResponse wire;
  PushToWire(reply, &wire);
  return wire.SerializeAsString();
}

std::string Written(const PushReply& reply) {
  const PushReplyBytes writer(reply);
  core::ChunkedMessageBytes::Split split = writer.SplitAt(SIZE_MAX);
  EXPECT_TRUE(split.borrowed.empty());
  EXPECT_EQ(split.framing.size(), writer.size());
  return std::move(split.framing);
}

// SplitAt's framing with each borrowed data put back where it belongs.
std::string Reassembled(const PushReply& reply, size_t borrow_from) {
  const core::ChunkedMessageBytes::Split split =
      PushReplyBytes(reply).SplitAt(borrow_from);
  std::string bytes;
  size_t from = 0;
  for (const core::ChunkedMessageBytes::Borrowed& borrowed : split.borrowed) {
    EXPECT_GE(borrowed.at, from);
    EXPECT_GE(borrowed.data->size(), borrow_from);
    bytes.append(split.framing, from, borrowed.at - from);
    bytes.append(*borrowed.data);
    from = borrowed.at;
  }
  bytes.append(split.framing, from);
  return bytes;
}

kernels::Payload Fp32(size_t bytes) {
  kernels::Payload payload;
  payload.codec = kernels::CodecId::kFp32;
  payload.layout = kernels::Layout::kRaw;
  payload.num_elements = bytes / 4;
  payload.data.resize(bytes);
  for (size_t i = 0; i < bytes; ++i) payload.data[i] = static_cast<char>(i * 7);
  return payload;
}

kernels::Payload TernarySum() {
  kernels::Payload payload;
  payload.codec = kernels::CodecId::kTernGrad;
  payload.layout = kernels::Layout::kSumHuffman;
  payload.num_elements = 1000;
  payload.num_summands = 4;
  payload.scalers = {0.125f, -3.5e-20f};
  payload.data = std::string("\x00\x01\xff\x80", 4);
  return payload;
}

TEST(PushReplyBytesTest, EqualsTheSerializedMessage) {
  std::vector<PushReply> replies(5);
  // [0]: every field at zero; nothing to write.
  replies[1].step = 1;                                   // a one-byte varint
  replies[1].chunks.push_back({0, kernels::Payload{}});  // key 0, all empty
  replies[2].step = uint64_t{1} << 40;
  replies[2].chunks.push_back({3, TernarySum()});
  replies[2].chunks.push_back({0, Fp32(8)});
  replies[2].param_checksum = 0xfedcba9876543210;
  // Lengths whose varints take 2 and 3 bytes, and a large key.
  replies[3].step = 77;
  replies[3].chunks.push_back({200, Fp32(200)});
  replies[3].chunks.push_back({1u << 31, Fp32(70000)});
  // A chunk whose data is larger than 2^21 bytes (a 4-byte length).
  replies[4].step = 5;
  replies[4].chunks.push_back({9, Fp32((size_t{1} << 21) + 12)});
  replies[4].param_checksum = 1;
  for (size_t i = 0; i < replies.size(); ++i) {
    const std::string want = ViaMessage(replies[i]);
    const std::string got = Written(replies[i]);
    EXPECT_EQ(got.size(), want.size()) << "reply " << i;
    EXPECT_TRUE(got == want) << "reply " << i << " differs";
    // Split anywhere from all data borrowed to none, the same bytes.
    for (size_t borrow_from :
         {size_t{1}, size_t{8}, size_t{200}, size_t{1} << 22}) {
      EXPECT_TRUE(Reassembled(replies[i], borrow_from) == want)
          << "reply " << i << " split at " << borrow_from << " differs";
    }
    // And a worker reads it back as the reply.
    tern::v1::PushPullResponse parsed;
    ASSERT_TRUE(parsed.ParseFromString(got)) << "reply " << i;
    absl::StatusOr<PushReply> back = PushReplyFromWire(parsed);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->step, replies[i].step);
    EXPECT_EQ(back->param_checksum, replies[i].param_checksum);
    ASSERT_EQ(back->chunks.size(), replies[i].chunks.size());
    for (size_t c = 0; c < back->chunks.size(); ++c) {
      EXPECT_EQ(back->chunks[c].chunk_key, replies[i].chunks[c].chunk_key);
      EXPECT_TRUE(back->chunks[c].payload.data ==
                  replies[i].chunks[c].payload.data);
      EXPECT_EQ(back->chunks[c].payload.scalers,
                replies[i].chunks[c].payload.scalers);
    }
  }
}

TEST(PushReplyBytesTest, SplitBorrowsTheReplysOwnData) {
  PushReply reply;
  reply.step = 3;
  reply.chunks.push_back({0, Fp32(64)});
  reply.chunks.push_back({1, TernarySum()});  // 4 bytes: written
  reply.chunks.push_back({2, Fp32(4096)});
  const core::ChunkedMessageBytes::Split split =
      PushReplyBytes(reply).SplitAt(64);
  ASSERT_EQ(split.borrowed.size(), 2u);
  EXPECT_EQ(split.borrowed[0].data, &reply.chunks[0].payload.data);
  EXPECT_EQ(split.borrowed[1].data, &reply.chunks[2].payload.data);
  EXPECT_EQ(split.framing.size(), PushReplyBytes(reply).size() - 64 - 4096);
}

// The writer names every field of the answer; one added to the .proto must
// be added to it (push_reply_bytes.cc) before this passes again.
TEST(PushReplyBytesTest, WritesEveryFieldTheMessageHas) {
  EXPECT_EQ(tern::v1::PushPullResponse::descriptor()->field_count(), 3);
}

}  // namespace
}  // namespace tern::server
