#include "server/push_reply_bytes.h"

#include <utility>

#include "core/wire.h"
#include "tern/v1/parameter_server.pb.h"

namespace tern::server {

using Response = tern::v1::PushPullResponse;

PushReplyBytes::PushReplyBytes(const PushReply& reply)
    : headers_(Headers(reply)), bytes_(Writer(reply, headers_)) {}

std::vector<tern::v1::Payload> PushReplyBytes::Headers(const PushReply& reply) {
  std::vector<tern::v1::Payload> headers(reply.chunks.size());
  for (size_t i = 0; i < headers.size(); ++i) {
    core::PayloadHeaderToWire(reply.chunks[i].payload, &headers[i]);
  }
  return headers;
}

core::ChunkedMessageBytes PushReplyBytes::Writer(
    const PushReply& reply, const std::vector<tern::v1::Payload>& headers) {
  // PushToWire sets every chunk's payload, so it is written even if empty.
  std::vector<core::ChunkedMessageBytes::Chunk> chunks;
  for (size_t i = 0; i < headers.size(); ++i) {
    chunks.push_back({reply.chunks[i].chunk_key, &headers[i],
                      &reply.chunks[i].payload.data});
  }
  return core::ChunkedMessageBytes(
      {{Response::kStepFieldNumber, reply.step}}, Response::kChunksFieldNumber,
      std::move(chunks),
      {{Response::kParamChecksumFieldNumber, reply.param_checksum}});
}

}  // namespace tern::server
