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
  // What the slices hold on to: the message without its data, and the data.
  struct Owned {
    PushPullRequest headers;
    std::vector<std::string> data;
  };
  auto owned = std::make_shared<Owned>();
  owned->data.resize(request.chunks_size());
  for (int i = 0; i < request.chunks_size(); ++i) {
    owned->data[i] = std::move(
        *request.mutable_chunks(i)->mutable_payload()->mutable_data());
  }
  owned->headers = std::move(request);
  const PushPullRequest& headers = owned->headers;
  std::vector<core::ChunkedMessageBytes::Chunk> chunks;
  for (int i = 0; i < headers.chunks_size(); ++i) {
    chunks.push_back({headers.chunks(i).chunk_key(),
                      &headers.chunks(i).payload(), &owned->data[i]});
  }
  const core::ChunkedMessageBytes bytes(
      {{PushPullRequest::kWorkerIdFieldNumber, headers.worker_id()},
       {PushPullRequest::kStepFieldNumber, headers.step()}},
      PushPullRequest::kChunksFieldNumber, std::move(chunks),
      {{PushPullRequest::kFp32WeightsFieldNumber, headers.fp32_weights()}});
  const std::vector<grpc::Slice> slices =
      core::MessageSlices(bytes.SplitAt(core::kBorrowBytes), owned);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

}  // namespace tern::worker
