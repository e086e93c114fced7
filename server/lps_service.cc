#include "server/lps_service.h"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "server/wire.h"

namespace tern::server {

LpsService::LpsService(LocalPs* lps, Logger logger, net::PeerPolicy peers,
                       uint64_t first_worker, ShardMetrics* metrics)
    : lps_(lps),
      logger_(std::move(logger)),
      refusals_(logger_),
      peers_(std::move(peers)),
      first_worker_(first_worker),
      own_metrics_(metrics != nullptr
                       ? nullptr
                       : std::make_unique<ShardMetrics>(
                             own_registry_, ShardMetrics::LpsLabels(0))),
      metrics_(metrics != nullptr ? metrics : own_metrics_.get()),
      push_pull_([this](auto... call) { return Admit(call...); },
                 PushPullCall::HandleOf(lps_), &refusals_, metrics_) {}

bool LpsService::Admit(grpc::CallbackServerContext* context,
                   grpc::ServerUnaryReactor* reactor, const char* method,
                   uint32_t worker) const {
  const uint64_t identity = first_worker_ + worker;
  // No certificate names an id beyond 32 bits: such a caller is no worker.
  const absl::Status status =
      identity > std::numeric_limits<uint32_t>::max()
          ? absl::PermissionDeniedError(absl::StrCat(
                "worker ", worker, " of this data center has no identity"))
          : net::CheckCaller(*context, peers_, net::PeerRole::kWorker,
                             static_cast<uint32_t>(identity));
  if (status.ok()) return true;
  refusals_.WarnCall(context->peer(), method, status,
                     "{} as worker {} refused: {}", method, worker,
                     std::string(status.message()));
  reactor->Finish(ToGrpcStatus(status));
  return false;
}

grpc::ServerUnaryReactor* LpsService::Join(grpc::CallbackServerContext* context,
                                           const tern::v1::JoinRequest* request,
                                           tern::v1::JoinResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!Admit(context, reactor, "Join", request->worker_id())) {
    return reactor;
  }
  absl::StatusOr<JoinRequest> join = JoinFromWire(*request);
  if (!join.ok()) {
    refusals_.WarnCall(context->peer(), "Join", join.status(),
                       "join of worker {} refused: {}", request->worker_id(),
                       std::string(join.status().message()));
    reactor->Finish(ToGrpcStatus(join.status()));
    return reactor;
  }
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
  if (!Admit(context, reactor, "ShareScalers", request->worker_id())) {
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
  if (!Admit(context, reactor, "CheckParams", request->worker_id())) {
    return reactor;
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace tern::server
