#include "worker/push_request_bytes.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tern::worker {
namespace {

using tern::v1::PushPullRequest;

std::string Joined(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

void AddChunk(PushPullRequest* request, uint32_t key, std::string data) {
  tern::v1::ChunkPayload* chunk = request->add_chunks();
  chunk->set_chunk_key(key);
  tern::v1::Payload* payload = chunk->mutable_payload();
  payload->set_codec(tern::v1::CODEC_FP32);
  payload->set_layout(tern::v1::LAYOUT_RAW);
  payload->set_num_elements(data.size() / 4);
  payload->set_data(std::move(data));
}

std::string Bytes(size_t size, char seed) {
  std::string bytes(size, '\0');
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>(seed + i * 7);
  return bytes;
}

TEST(PushRequestBytesTest, EqualsTheSerializedMessage) {
  std::vector<PushPullRequest> requests(5);
  // [0]: every field at zero.
  requests[1].set_worker_id(3);
  requests[1].set_step(1);
  AddChunk(&requests[1], 0, "");  // an empty payload is still written
  requests[2].set_worker_id(1u << 31);
  requests[2].set_step(uint64_t{1} << 40);
  AddChunk(&requests[2], 5, Bytes(8, 1));
  AddChunk(&requests[2], 6, Bytes(70000, 2));  // borrowed
  requests[2].mutable_chunks(1)->mutable_payload()->add_scalers(0.25f);
  requests[2].set_fp32_weights(true);
  // Data larger than 2^21 bytes (a 4-byte length), among small chunks.
  requests[3].set_step(9);
  AddChunk(&requests[3], 1, Bytes(100, 3));
  AddChunk(&requests[3], 2, Bytes((size_t{1} << 21) + 12, 4));
  AddChunk(&requests[3], 3, Bytes(16 * 1024, 5));
  requests[4].set_worker_id(2);
  requests[4].set_fp32_weights(true);
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::string want = requests[i].SerializeAsString();
    const std::string got = Joined(PushRequestBuffer(requests[i]));
    EXPECT_EQ(got.size(), want.size()) << "request " << i;
    EXPECT_TRUE(got == want) << "request " << i << " differs";
  }
}

// The writer names every field of these messages; one added to the .proto
// must be added to it (worker/push_request_bytes.cc,
// core/chunked_message_bytes.cc) before this passes again.
TEST(PushRequestBytesTest, WritesEveryFieldTheMessagesHave) {
  EXPECT_EQ(PushPullRequest::descriptor()->field_count(), 4);
  EXPECT_EQ(tern::v1::ChunkPayload::descriptor()->field_count(), 2);
}

}  // namespace
}  // namespace tern::worker
