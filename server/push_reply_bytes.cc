#include "server/push_reply_bytes.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "core/wire.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "tern/v1/parameter_server.pb.h"

namespace tern::server {
namespace {

using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedOutputStream;
using Response = tern::v1::PushPullResponse;
using WireChunk = tern::v1::ChunkPayload;
using WirePayload = tern::v1::Payload;

constexpr uint32_t kLengthDelimited = WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
constexpr uint32_t kVarint = WireFormatLite::WIRETYPE_VARINT;

// Every field number here is below 16, so each tag is one byte.
constexpr uint32_t Tag(int field, uint32_t wire_type) {
  return static_cast<uint32_t>(field) << 3 | wire_type;
}
static_assert(Response::kParamChecksumFieldNumber < 16 &&
              WirePayload::kDataFieldNumber < 16);

// A varint field, left out at 0 as proto3 does.
size_t VarintFieldSize(uint64_t value) {
  return value == 0 ? 0 : 1 + CodedOutputStream::VarintSize64(value);
}

size_t LengthDelimitedSize(size_t length) {
  return 1 + CodedOutputStream::VarintSize64(length) + length;
}

uint8_t* WriteVarintField(int field, uint64_t value, uint8_t* out) {
  if (value == 0) return out;
  out = CodedOutputStream::WriteTagToArray(Tag(field, kVarint), out);
  return CodedOutputStream::WriteVarint64ToArray(value, out);
}

// The tag and length of a length-delimited field; its bytes follow.
uint8_t* WriteLengthPrefix(int field, size_t length, uint8_t* out) {
  out = CodedOutputStream::WriteTagToArray(Tag(field, kLengthDelimited), out);
  return CodedOutputStream::WriteVarint64ToArray(length, out);
}

}  // namespace

PushReplyBytes::PushReplyBytes(const PushReply& reply)
    : reply_(reply), chunks_(reply.chunks.size()) {
  size_ = VarintFieldSize(reply.step);
  for (size_t i = 0; i < chunks_.size(); ++i) {
    const ChunkPayload& chunk = reply.chunks[i];
    Chunk& sized = chunks_[i];
    core::PayloadHeaderToWire(chunk.payload, &sized.header);
    const size_t data = chunk.payload.data.size();
    // ByteSizeLong also caches the header's sizes for SplitAt.
    sized.payload_size = sized.header.ByteSizeLong() +
                         (data == 0 ? 0 : LengthDelimitedSize(data));
    // PushToWire always sets the payload, so it is written even if empty.
    sized.chunk_size = VarintFieldSize(chunk.chunk_key) +
                       LengthDelimitedSize(sized.payload_size);
    size_ += LengthDelimitedSize(sized.chunk_size);
  }
  size_ += VarintFieldSize(reply.param_checksum);
}

uint8_t* PushReplyBytes::WriteChunkHead(size_t i, uint8_t* out) const {
  const ChunkPayload& chunk = reply_.chunks[i];
  const Chunk& sized = chunks_[i];
  out = WriteLengthPrefix(Response::kChunksFieldNumber, sized.chunk_size, out);
  out = WriteVarintField(WireChunk::kChunkKeyFieldNumber, chunk.chunk_key, out);
  out = WriteLengthPrefix(WireChunk::kPayloadFieldNumber, sized.payload_size,
                          out);
  out = sized.header.SerializeWithCachedSizesToArray(out);
  const std::string& data = chunk.payload.data;
  if (data.empty()) return out;
  return WriteLengthPrefix(WirePayload::kDataFieldNumber, data.size(), out);
}

PushReplyBytes::Split PushReplyBytes::SplitAt(size_t borrow_from) const {
  if (borrow_from == 0) std::abort();  // a caller's bug: see the header
  Split split;
  size_t borrowed_bytes = 0;
  for (const ChunkPayload& chunk : reply_.chunks) {
    const size_t data = chunk.payload.data.size();
    if (data >= borrow_from) borrowed_bytes += data;
  }
  split.framing.resize(size_ - borrowed_bytes);
  uint8_t* const start = reinterpret_cast<uint8_t*>(split.framing.data());
  uint8_t* out =
      WriteVarintField(Response::kStepFieldNumber, reply_.step, start);
  for (size_t i = 0; i < chunks_.size(); ++i) {
    out = WriteChunkHead(i, out);
    const std::string& data = reply_.chunks[i].payload.data;
    if (data.size() >= borrow_from) {
      split.borrowed.push_back({static_cast<size_t>(out - start), &data});
      continue;
    }
    std::memcpy(out, data.data(), data.size());
    out += data.size();
  }
  out = WriteVarintField(Response::kParamChecksumFieldNumber,
                         reply_.param_checksum, out);
  // A size that disagrees with what was written is a bug here, not input.
  if (static_cast<size_t>(out - start) != split.framing.size()) std::abort();
  return split;
}

}  // namespace tern::server
