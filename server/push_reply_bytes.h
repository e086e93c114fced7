// A PushReply as the bytes of a serialized tern.v1.PushPullResponse,
// written straight from the reply, instead of into a message (PushToWire)
// and again out of it (gRPC's serialization). Split() writes every byte but
// the large chunks' data, which the answer's gRPC slices then borrow from
// the reply itself (server/push_pull_call.h): a step's answer is framed
// once, and every worker's call sends the reply's own bytes.
//
// Why by hand: protobuf 3.21 serializes a bytes field only from a string
// its message owns, and the shard's reply is shared, read-only, by every
// worker's answer, so filling a message means copying every chunk's data.
// Protobuf writes a message's fields in field-number order and leaves out
// proto3 fields at zero (0 integers, empty bytes); this writer does the
// same and has protobuf serialize each payload's header fields
// (core::PayloadHeaderToWire), so the bytes equal those of PushToWire's
// message serialized (push_reply_bytes_test checks it field by field).
#ifndef TERN_SERVER_PUSH_REPLY_BYTES_H_
#define TERN_SERVER_PUSH_REPLY_BYTES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "server/messages.h"
#include "tern/v1/payload.pb.h"

namespace tern::server {

class PushReplyBytes {
 public:
  // Sizes every field; `reply` must outlive the writer.
  explicit PushReplyBytes(const PushReply& reply);

  size_t size() const { return size_; }

  // The size() bytes, but with the data of every chunk of at least
  // `borrow_from` bytes left out of `framing`: each such data belongs at
  // `at` in it (in order, `at` never decreasing), and `data` points into
  // the reply. SplitAt(SIZE_MAX).framing is all of the bytes.
  struct Borrowed {
    size_t at = 0;
    const std::string* data = nullptr;
  };
  struct Split {
    std::string framing;
    std::vector<Borrowed> borrowed;
  };
  // `borrow_from` must be at least 1: empty data is written, not borrowed.
  Split SplitAt(size_t borrow_from) const;

 private:
  // The bytes of chunk `i` before its data (or, without data, all of them).
  uint8_t* WriteChunkHead(size_t i, uint8_t* out) const;

  struct Chunk {
    tern::v1::Payload header;  // every field but the data
    size_t payload_size = 0;   // of the whole tern.v1.Payload
    size_t chunk_size = 0;     // of the whole tern.v1.ChunkPayload
  };

  const PushReply& reply_;
  std::vector<Chunk> chunks_;
  size_t size_ = 0;
};

}  // namespace tern::server

#endif  // TERN_SERVER_PUSH_REPLY_BYTES_H_
