#include "server/lps_service.h"

#include <cstdint>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "server/wire.h"

namespace tern::server {

LpsService::LpsService(LocalPs* lps, Logger logger, net::PeerPolicy peers,
                       uint64_t first_worker, ShardMetrics* metrics)
    : lps_(lps),
      admission_(std::move(logger), std::move(peers), first_worker),
      own_metrics_(metrics != nullptr
                       ? nullptr
                       : std::make_unique<ShardMetrics>(
                             own_registry_, ShardMetrics::LpsLabels(0))),
      metrics_(metrics != nullptr ? metrics : own_metrics_.get()),
      push_pull_(
          [this](auto... call) { return admission_.Admit(call...); },
          PushPullCall::HandleOf(lps_), admission_.refusals(), metrics_) {}

grpc::ServerUnaryReactor* LpsService::Join(grpc::CallbackServerContext* context,
                                           const tern::v1::JoinRequest* request,
                                           tern::v1::JoinResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!admission_.Admit(context, reactor, "Join", request->worker_id())) {
    return reactor;
  }
  std::optional<JoinRequest> join =
      admission_.ReadJoin(context, reactor, *request);
  if (!join) return reactor;
  lps_->Join(*join, [reactor, response](absl::StatusOr<JoinReply> reply) {
    if (!reply.ok()) {
      reactor->Finish(ToGrpcStatus(reply.status()));
      return;
    }
    JoinToWire(*reply, response);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* LpsService::ShareScalers(
    grpc::CallbackServerContext* context,
    const tern::v1::ShareScalersRequest* request,
    tern::v1::ShareScalersResponse* /*response*/) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!admission_.Admit(context, reactor, "ShareScalers", request->worker_id())) {
    return reactor;
  }
  reactor->Finish(ToGrpcStatus(absl::FailedPreconditionError(absl::StrCat(
      "ShareScalers of worker ", request->worker_id(),
      ": this shard is a WeightGrad local parameter server, where workers "
      "ternarize with their own scalers (run the worker with the shard's "
      "--mode)"))));
  return reactor;
}

grpc::ServerUnaryReactor* LpsService::PushPull(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return push_pull_.Serve(context, request, response);
}

grpc::ServerUnaryReactor* LpsService::CheckParams(
    grpc::CallbackServerContext* context,
    const tern::v1::CheckParamsRequest* request,
    tern::v1::CheckParamsResponse* /*response*/) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!admission_.Admit(context, reactor, "CheckParams", request->worker_id())) {
    return reactor;
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace tern::server
