#include "server/push_pull_call.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "core/message_slices.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "server/push_reply_bytes.h"
#include "server/wire.h"
#include "tern/v1/parameter_server.pb.h"

namespace tern::server {

PushPullCall::PushPullCall(Admit admit, Handle handle, RefusalLog* refusals,
                           ShardMetrics* metrics)
    : admit_(std::move(admit)),
      handle_(std::move(handle)),
      refusals_(refusals),
      metrics_(metrics) {}

grpc::ServerUnaryReactor* PushPullCall::Serve(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const absl::Time arrived = absl::Now();
  metrics_->Received(request->Length());
  // gRPC keeps the request until Finish, which for a push held at the
  // barrier comes when the step completes. Parsing clears the buffer
  // (gRPC's GenericDeserialize), so the push's bytes live on only in
  // `wire`, and from there move into `push`, which dies when this returns.
  // Clearing it is sound: the const is the API's; the buffer is the
  // handler's own, read only before this method is called.
  tern::v1::PushPullRequest wire;
  const grpc::Status parsed =
      grpc::SerializationTraits<tern::v1::PushPullRequest>::Deserialize(
          const_cast<grpc::ByteBuffer*>(request), &wire);
  if (!parsed.ok()) {
    const absl::Status status = absl::InvalidArgumentError(
        "PushPull: the request is not a tern.v1.PushPullRequest");
    refusals_->WarnCall(context->peer(), "PushPull", status, "{}",
                        std::string(status.message()));
    metrics_->Rejected(status);
    reactor->Finish(ToGrpcStatus(status));
    return reactor;
  }
  if (!admit_(context, reactor, "PushPull", wire.worker_id())) {
    metrics_->Rejected(absl::PermissionDeniedError("not admitted"));
    return reactor;
  }
  absl::StatusOr<PushRequest> push = TakePushFromWire(&wire);
  if (!push.ok()) {
    refusals_->WarnCall(context->peer(), "PushPull", push.status(),
                        "push of worker {} for step {} refused: {}",
                        wire.worker_id(), wire.step(),
                        std::string(push.status().message()));
    metrics_->Rejected(push.status());
    reactor->Finish(ToGrpcStatus(push.status()));
    return reactor;
  }
  // The worker's sign that this shard has its push: a worker that sends
  // its shards' pushes one after another (--push_order) starts the
  // next on it, while this one waits for the step's other pushes.
  reactor->StartSendInitialMetadata();
  handle_(*push, [this, reactor, response,
                  arrived](absl::StatusOr<PushAnswer> answer) {
    if (!answer.ok()) {
      metrics_->Rejected(answer.status());
      reactor->Finish(ToGrpcStatus(answer.status()));
      return;
    }
    const std::vector<grpc::Slice> slices = SlicesOf(*answer);
    size_t bytes = 0;
    for (const grpc::Slice& slice : slices) bytes += slice.size();
    metrics_->Answered(absl::Now() - arrived, bytes);
    grpc::ByteBuffer shared(slices.data(), slices.size());
    response->Swap(&shared);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

std::vector<grpc::Slice> PushPullCall::SlicesOf(const PushAnswer& answer) {
  absl::MutexLock lock(&mu_);
  // Held until the next answer: one step's pull of this shard.
  if (written_for_.lock() != answer) {
    // The slices borrow the reply's data and keep the reply alive.
    written_ = core::MessageSlices(
        PushReplyBytes(*answer).SplitAt(core::kBorrowBytes), answer);
    written_for_ = answer;
  }
  return written_;
}

}  // namespace tern::server
