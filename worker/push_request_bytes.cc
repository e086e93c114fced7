#include "worker/push_request_bytes.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/chunked_message_bytes.h"
#include "core/message_slices.h"

namespace tern::worker {

using tern::v1::PushPullRequest;

grpc::ByteBuffer PushRequestBuffer(PushPullRequest request) {
  // The data moves out of the message into what the slices hold on to;
  // the message, left with its header fields, is framed and dropped.
  auto data = std::make_shared<std::vector<std::string>>(request.chunks_size());
  for (int i = 0; i < request.chunks_size(); ++i) {
    (*data)[i] = std::move(
        *request.mutable_chunks(i)->mutable_payload()->mutable_data());
  }
  std::vector<core::ChunkedMessageBytes::Chunk> chunks;
  for (int i = 0; i < request.chunks_size(); ++i) {
    chunks.push_back({request.chunks(i).chunk_key(),
                      &request.chunks(i).payload(), &(*data)[i]});
  }
  const core::ChunkedMessageBytes bytes(
      {{PushPullRequest::kWorkerIdFieldNumber, request.worker_id()},
       {PushPullRequest::kStepFieldNumber, request.step()}},
      PushPullRequest::kChunksFieldNumber, std::move(chunks),
      {{PushPullRequest::kFp32WeightsFieldNumber, request.fp32_weights()}});
  const std::vector<grpc::Slice> slices =
      core::MessageSlices(bytes.SplitAt(core::kBorrowBytes), data);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

}  // namespace tern::worker
