#include "global/gs_service.h"

#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "global/gs_wire.h"
#include "global/messages.h"
#include "kernels/payload.h"

namespace tern::global {
GsService::GsService(RoundAggregator* aggregator, Logger logger,
                     net::PeerPolicy peers)
    : aggregator_(aggregator),
      logger_(std::move(logger)),
      refusals_(logger_),
      peers_(std::move(peers)) {}

bool GsService::Admit(grpc::CallbackServerContext* context,
                      grpc::ServerUnaryReactor* reactor, const char* method,
                      uint32_t datacenter) const {
  const absl::Status status =
      net::CheckCaller(*context, peers_, net::PeerRole::kLps, datacenter);
  if (status.ok()) return true;
  refusals_.WarnCall(context->peer(), method, status,
                     "{} as data center {} refused: {}", method, datacenter,
                     std::string(status.message()));
  reactor->Finish(ToGrpcStatus(status));
  return false;
}

grpc::ServerUnaryReactor* GsService::Register(
    grpc::CallbackServerContext* context,
    const tern::v1::RegisterRequest* request,
    tern::v1::RegisterResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!Admit(context, reactor, "Register", request->datacenter())) {
    return reactor;
  }
  absl::StatusOr<RegisterRequest> plain = RegisterFromWire(*request);
  absl::StatusOr<RegisterReply> reply =
      plain.ok() ? aggregator_->Register(*plain) : plain.status();
  if (!reply.ok()) {
    if (!plain.ok()) {
      refusals_.WarnCall(context->peer(), "Register", plain.status(), "{}",
                         std::string(plain.status().message()));
    }
    reactor->Finish(ToGrpcStatus(reply.status()));
    return reactor;
  }
  response->set_next_round(reply->next_round);
  response->set_t_global_s(reply->t_global_s);
  response->set_hold_timeout_s(reply->hold_timeout_s);
  response->set_max_lag(reply->max_lag);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* GsService::SyncRound(
    grpc::CallbackServerContext* context,
    const tern::v1::SyncRoundRequest* request,
    tern::v1::SyncRoundResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!Admit(context, reactor, "SyncRound", request->datacenter())) {
    return reactor;
  }
  absl::StatusOr<SyncRequest> plain = SyncFromWire(*request);
  if (!plain.ok()) {
    refusals_.WarnCall(context->peer(), "SyncRound", plain.status(),
                       "round {} of data center {} refused: {}",
                       request->round(), request->datacenter(),
                       std::string(plain.status().message()));
    reactor->Finish(ToGrpcStatus(plain.status()));
    return reactor;
  }
  // The reactor and the response stay valid until Finish (gRPC's callback
  // API), which is the last thing the callback does.
  aggregator_->SyncRound(
      *plain, [reactor, response](absl::StatusOr<RoundAnswerPtr> answer) {
        if (!answer.ok()) {
          reactor->Finish(ToGrpcStatus(answer.status()));
          return;
        }
        AnswerToWire(**answer, response);
        reactor->Finish(grpc::Status::OK);
      });
  return reactor;
}

}  // namespace tern::global
