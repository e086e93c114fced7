// The serialized bytes of a message whose bulk is chunks (tern.v1's
// PushPullRequest and PushPullResponse: a few varint fields, then a
// repeated ChunkPayload, then a few more), written by hand so that each
// chunk's data need not be copied into a message and out of it again:
// SplitAt leaves the large data out of the bytes it writes and says where
// each belongs, and the caller sends it from where it lies
// (core/message_slices.h). The worker's pushes and the shard's answers are
// sent this way (issue 20, item 3).
//
// Why by hand: protobuf 3.21 serializes a bytes field only from a string
// its message owns, and copies it into the output. Protobuf writes a
// message's fields in field-number order and leaves out proto3 varints at
// 0; this writer does the same and has protobuf serialize each payload's
// header fields, so the bytes equal the message's serialization when the
// fields are given in field-number order (the callers' tests check it
// byte for byte).
#ifndef TERN_CORE_CHUNKED_MESSAGE_BYTES_H_
#define TERN_CORE_CHUNKED_MESSAGE_BYTES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tern/v1/payload.pb.h"

namespace tern::core {

class ChunkedMessageBytes {
 public:
  // A varint field (uint32, uint64 or bool); left out at 0, as proto3 does.
  struct VarintField {
    int number = 0;
    uint64_t value = 0;
  };
  // One tern.v1.ChunkPayload. `header` holds every field of the payload
  // but the data (its data is empty); `data` is the data. Both are
  // borrowed and must outlive the writer, and `data` whatever it is split
  // into. The payload is written even when empty, as a message whose
  // payload is set.
  struct Chunk {
    uint32_t chunk_key = 0;
    const tern::v1::Payload* header = nullptr;
    const std::string* data = nullptr;
  };
  // The message's fields in field-number order: `before`, the repeated
  // ChunkPayload field `chunks_field`, `after`. Every field number must be
  // below 16 (one-byte tags), as in tern.v1's messages.
  ChunkedMessageBytes(std::vector<VarintField> before, int chunks_field,
                      std::vector<Chunk> chunks,
                      std::vector<VarintField> after);

  size_t size() const { return size_; }

  // The size() bytes, but with the data of every chunk of at least
  // `borrow_from` bytes left out of `framing`: each such data belongs at
  // `at` in it (in order, `at` never decreasing). `borrow_from` must be at
  // least 1; SplitAt(SIZE_MAX).framing is all of the bytes.
  struct Borrowed {
    size_t at = 0;
    const std::string* data = nullptr;
  };
  struct Split {
    std::string framing;
    std::vector<Borrowed> borrowed;
  };
  Split SplitAt(size_t borrow_from) const;

 private:
  // The bytes of chunk `i` before its data (or, without data, all of them).
  uint8_t* WriteChunkHead(size_t i, uint8_t* out) const;

  struct Sized {
    size_t payload_size = 0;  // of the whole tern.v1.Payload
    size_t chunk_size = 0;    // of the whole tern.v1.ChunkPayload
  };

  const std::vector<VarintField> before_;
  const int chunks_field_;
  const std::vector<Chunk> chunks_;
  const std::vector<VarintField> after_;
  std::vector<Sized> sized_;
  size_t size_ = 0;
};

}  // namespace tern::core

#endif  // TERN_CORE_CHUNKED_MESSAGE_BYTES_H_
