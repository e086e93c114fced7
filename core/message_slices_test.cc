#include "core/message_slices.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tern::core {
namespace {

struct Message {
  std::vector<tern::v1::Payload> headers;
  std::vector<std::string> data;
};

// A message of three chunks: large data, small data, large data.
std::shared_ptr<Message> ThreeChunks() {
  auto message = std::make_shared<Message>();
  message->headers.resize(3);
  message->headers[1].set_num_elements(5);
  message->headers[1].add_scalers(0.5f);
  message->data = {std::string(40000, 'a'), "tiny", std::string(20000, 'c')};
  return message;
}

ChunkedMessageBytes WriterOf(const Message& message) {
  std::vector<ChunkedMessageBytes::Chunk> chunks;
  for (size_t i = 0; i < message.data.size(); ++i) {
    chunks.push_back(
        {static_cast<uint32_t>(i + 7), &message.headers[i], &message.data[i]});
  }
  return ChunkedMessageBytes({{1, 3}}, 2, std::move(chunks), {{3, 0}});
}

std::string Joined(const std::vector<grpc::Slice>& slices) {
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

TEST(MessageSlicesTest, TheSlicesAreTheMessagesBytes) {
  std::shared_ptr<Message> message = ThreeChunks();
  const ChunkedMessageBytes writer = WriterOf(*message);
  const std::string all = writer.SplitAt(SIZE_MAX).framing;
  ASSERT_EQ(all.size(), writer.size());
  const std::vector<grpc::Slice> slices =
      MessageSlices(writer.SplitAt(kBorrowBytes), message);
  EXPECT_TRUE(Joined(slices) == all);
  // The two large data are sent from where they lie, not copied.
  int borrowed = 0;
  for (const grpc::Slice& slice : slices) {
    const char* begin = reinterpret_cast<const char*>(slice.begin());
    if (begin == message->data[0].data() || begin == message->data[2].data()) {
      ++borrowed;
    }
  }
  EXPECT_EQ(borrowed, 2);
}

TEST(MessageSlicesTest, TheSlicesKeepTheDataAliveUntilReleased) {
  std::shared_ptr<Message> message = ThreeChunks();
  const std::weak_ptr<Message> watch = message;
  std::vector<grpc::Slice> slices =
      MessageSlices(WriterOf(*message).SplitAt(kBorrowBytes), message);
  const std::string before = Joined(slices);
  message.reset();
  ASSERT_FALSE(watch.expired());
  EXPECT_TRUE(Joined(slices) == before);
  slices.clear();
  EXPECT_TRUE(watch.expired());
}

TEST(MessageSlicesTest, NothingBorrowedIsOneSlice) {
  std::shared_ptr<Message> message = ThreeChunks();
  const ChunkedMessageBytes writer = WriterOf(*message);
  const std::vector<grpc::Slice> slices =
      MessageSlices(writer.SplitAt(SIZE_MAX), message);
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0].size(), writer.size());
}

}  // namespace
}  // namespace tern::core
