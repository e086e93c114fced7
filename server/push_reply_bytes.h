// A PushReply as the bytes of a serialized tern.v1.PushPullResponse,
// written straight from the reply (core/chunked_message_bytes.h), instead
// of into a message (PushToWire) and again out of it (gRPC's
// serialization): SplitAt leaves the large chunks' data out, and the
// answer's gRPC slices borrow it from the reply itself
// (server/push_pull_call.h). The bytes equal those of PushToWire's message
// serialized (push_reply_bytes_test checks it field by field).
#ifndef TERN_SERVER_PUSH_REPLY_BYTES_H_
#define TERN_SERVER_PUSH_REPLY_BYTES_H_

#include <cstddef>
#include <vector>

#include "core/chunked_message_bytes.h"
#include "server/messages.h"
#include "tern/v1/payload.pb.h"

namespace tern::server {

class PushReplyBytes {
 public:
  // Sizes every field; `reply` must outlive the writer and the data of
  // whatever it is split into.
  explicit PushReplyBytes(const PushReply& reply);
  // The writer refers to headers_: neither is copied.
  PushReplyBytes(const PushReplyBytes&) = delete;
  PushReplyBytes& operator=(const PushReplyBytes&) = delete;

  size_t size() const { return bytes_.size(); }
  // See ChunkedMessageBytes::SplitAt; the borrowed data is the reply's.
  core::ChunkedMessageBytes::Split SplitAt(size_t borrow_from) const {
    return bytes_.SplitAt(borrow_from);
  }

 private:
  // Each chunk's payload but its data; the writer refers to them.
  static std::vector<tern::v1::Payload> Headers(const PushReply& reply);
  static core::ChunkedMessageBytes Writer(
      const PushReply& reply, const std::vector<tern::v1::Payload>& headers);

  const std::vector<tern::v1::Payload> headers_;
  const core::ChunkedMessageBytes bytes_;
};

}  // namespace tern::server

#endif  // TERN_SERVER_PUSH_REPLY_BYTES_H_
