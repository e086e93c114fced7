#include "core/chunked_message_bytes.h"

#include <cstdlib>
#include <cstring>
#include <utility>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"

namespace tern::core {
namespace {

using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedOutputStream;
using WireChunk = tern::v1::ChunkPayload;
using WirePayload = tern::v1::Payload;

constexpr uint32_t kLengthDelimited = WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
constexpr uint32_t kVarint = WireFormatLite::WIRETYPE_VARINT;

// Every field number here is below 16, so each tag is one byte.
constexpr uint32_t Tag(int field, uint32_t wire_type) {
  return static_cast<uint32_t>(field) << 3 | wire_type;
}
static_assert(WireChunk::kPayloadFieldNumber < 16 &&
              WirePayload::kDataFieldNumber < 16);

// A varint field, left out at 0 as proto3 does.
size_t VarintFieldSize(uint64_t value) {
  return value == 0 ? 0 : 1 + CodedOutputStream::VarintSize64(value);
}

size_t VarintFieldsSize(
    const std::vector<ChunkedMessageBytes::VarintField>& fields) {
  size_t size = 0;
  for (const auto& field : fields) size += VarintFieldSize(field.value);
  return size;
}

size_t LengthDelimitedSize(size_t length) {
  return 1 + CodedOutputStream::VarintSize64(length) + length;
}

uint8_t* WriteVarintField(int field, uint64_t value, uint8_t* out) {
  if (value == 0) return out;
  out = CodedOutputStream::WriteTagToArray(Tag(field, kVarint), out);
  return CodedOutputStream::WriteVarint64ToArray(value, out);
}

uint8_t* WriteVarintFields(
    const std::vector<ChunkedMessageBytes::VarintField>& fields, uint8_t* out) {
  for (const auto& field : fields) {
    out = WriteVarintField(field.number, field.value, out);
  }
  return out;
}

// The tag and length of a length-delimited field; its bytes follow.
uint8_t* WriteLengthPrefix(int field, size_t length, uint8_t* out) {
  out = CodedOutputStream::WriteTagToArray(Tag(field, kLengthDelimited), out);
  return CodedOutputStream::WriteVarint64ToArray(length, out);
}

// Field numbers are the callers' constants; one that is not a one-byte tag
// is a bug here, not input.
void CheckFieldNumber(int field) {
  if (field < 1 || field > 15) std::abort();
}

}  // namespace

ChunkedMessageBytes::ChunkedMessageBytes(std::vector<VarintField> before,
                                         int chunks_field,
                                         std::vector<Chunk> chunks,
                                         std::vector<VarintField> after)
    : before_(std::move(before)),
      chunks_field_(chunks_field),
      chunks_(std::move(chunks)),
      after_(std::move(after)),
      sized_(chunks_.size()) {
  CheckFieldNumber(chunks_field_);
  for (const auto& field : before_) CheckFieldNumber(field.number);
  for (const auto& field : after_) CheckFieldNumber(field.number);
  size_ = VarintFieldsSize(before_) + VarintFieldsSize(after_);
  for (size_t i = 0; i < chunks_.size(); ++i) {
    const Chunk& chunk = chunks_[i];
    Sized& sized = sized_[i];
    const size_t data = chunk.data->size();
    // ByteSizeLong also caches the header's sizes for SplitAt.
    sized.payload_size = chunk.header->ByteSizeLong() +
                         (data == 0 ? 0 : LengthDelimitedSize(data));
    sized.chunk_size = VarintFieldSize(chunk.chunk_key) +
                       LengthDelimitedSize(sized.payload_size);
    size_ += LengthDelimitedSize(sized.chunk_size);
  }
}

uint8_t* ChunkedMessageBytes::WriteChunkHead(size_t i, uint8_t* out) const {
  const Chunk& chunk = chunks_[i];
  const Sized& sized = sized_[i];
  out = WriteLengthPrefix(chunks_field_, sized.chunk_size, out);
  out = WriteVarintField(WireChunk::kChunkKeyFieldNumber, chunk.chunk_key, out);
  out = WriteLengthPrefix(WireChunk::kPayloadFieldNumber, sized.payload_size,
                          out);
  out = chunk.header->SerializeWithCachedSizesToArray(out);
  const std::string& data = *chunk.data;
  if (data.empty()) return out;
  return WriteLengthPrefix(WirePayload::kDataFieldNumber, data.size(), out);
}

ChunkedMessageBytes::Split ChunkedMessageBytes::SplitAt(
    size_t borrow_from) const {
  if (borrow_from == 0) std::abort();  // a caller's bug: see the header
  Split split;
  size_t borrowed_bytes = 0;
  for (const Chunk& chunk : chunks_) {
    if (chunk.data->size() >= borrow_from) borrowed_bytes += chunk.data->size();
  }
  split.framing.resize(size_ - borrowed_bytes);
  uint8_t* const start = reinterpret_cast<uint8_t*>(split.framing.data());
  uint8_t* out = WriteVarintFields(before_, start);
  for (size_t i = 0; i < chunks_.size(); ++i) {
    out = WriteChunkHead(i, out);
    const std::string& data = *chunks_[i].data;
    if (data.size() >= borrow_from) {
      split.borrowed.push_back({static_cast<size_t>(out - start), &data});
      continue;
    }
    std::memcpy(out, data.data(), data.size());
    out += data.size();
  }
  out = WriteVarintFields(after_, out);
  // A size that disagrees with what was written is a bug here, not input.
  if (static_cast<size_t>(out - start) != split.framing.size()) std::abort();
  return split;
}

}  // namespace tern::core
