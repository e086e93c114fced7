#include "server/ps_service.h"

#include <optional>
#include <utility>

#include "common/grpc_status.h"
#include "server/wire.h"

namespace tern::server {
namespace {

// The completion of one call: fills the response with `fill` when the
// aggregator's answer is OK, then finishes the call. The reactor and the
// response stay valid until Finish (gRPC's callback API), which is the
// last thing this does.
template <typename Answer, typename Response, typename Fill>
Callback<Answer> Finisher(grpc::ServerUnaryReactor* reactor, Response* response,
                          Fill fill) {
  return [reactor, response, fill](absl::StatusOr<Answer> answer) {
    if (!answer.ok()) {
      reactor->Finish(ToGrpcStatus(answer.status()));
      return;
    }
    fill(*answer, response);
    reactor->Finish(grpc::Status::OK);
  };
}

}  // namespace

PsService::PsService(Aggregator* aggregator, Logger logger,
                     net::PeerPolicy peers, ShardMetrics* metrics)
    : aggregator_(aggregator),
      admission_(std::move(logger), std::move(peers)),
      own_metrics_(metrics != nullptr
                       ? nullptr
                       : std::make_unique<ShardMetrics>(
                             own_registry_, ShardMetrics::ShardLabels(0))),
      metrics_(metrics != nullptr ? metrics : own_metrics_.get()),
      push_pull_(
          [this](auto... call) { return admission_.Admit(call...); },
          PushPullCall::HandleOf(aggregator_), admission_.refusals(),
          metrics_) {}

grpc::ServerUnaryReactor* PsService::Join(grpc::CallbackServerContext* context,
                                          const tern::v1::JoinRequest* request,
                                          tern::v1::JoinResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!admission_.Admit(context, reactor, "Join", request->worker_id())) {
    return reactor;
  }
  std::optional<JoinRequest> join =
      admission_.ReadJoin(context, reactor, *request);
  if (!join) return reactor;
  aggregator_->Join(
      *join, Finisher<JoinReply>(
                 reactor, response,
                 [](const JoinReply& reply, tern::v1::JoinResponse* out) {
                   JoinToWire(reply, out);
                 }));
  return reactor;
}

grpc::ServerUnaryReactor* PsService::ShareScalers(
    grpc::CallbackServerContext* context,
    const tern::v1::ShareScalersRequest* request,
    tern::v1::ShareScalersResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!admission_.Admit(context, reactor, "ShareScalers", request->worker_id())) {
    return reactor;
  }
  metrics_->Received(request->ByteSizeLong());
  aggregator_->ShareScalers(
      ScalersFromWire(*request),
      Finisher<ScalerAnswer>(
          reactor, response,
          [metrics = metrics_](const ScalerAnswer& answer,
                               tern::v1::ShareScalersResponse* out) {
            ScalersToWire(*answer, out);
            metrics->Sent(out->ByteSizeLong());
          }));
  return reactor;
}

grpc::ServerUnaryReactor* PsService::PushPull(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return push_pull_.Serve(context, request, response);
}

void PsService::SetPushPullAllocator(
    grpc::MessageAllocator<grpc::ByteBuffer, grpc::ByteBuffer>* allocator) {
  // Method 2 of tern.v1.ParameterServer, the index the generated
  // WithRawCallbackMethod_PushPull registers its handler under.
  static_cast<grpc::internal::CallbackUnaryHandler<grpc::ByteBuffer,
                                                   grpc::ByteBuffer>*>(
      GetHandler(2))
      ->SetMessageAllocator(allocator);
}

grpc::ServerUnaryReactor* PsService::CheckParams(
    grpc::CallbackServerContext* context,
    const tern::v1::CheckParamsRequest* request,
    tern::v1::CheckParamsResponse* /*response*/) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!admission_.Admit(context, reactor, "CheckParams", request->worker_id())) {
    return reactor;
  }
  reactor->Finish(ToGrpcStatus(aggregator_->CheckParams(
      request->worker_id(), request->step(), request->param_checksum())));
  return reactor;
}

grpc::ServerUnaryReactor* PsService::Waiting(
    grpc::CallbackServerContext* context,
    const tern::v1::WaitingRequest* request,
    tern::v1::WaitingResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!admission_.Admit(context, reactor, "Waiting", request->worker_id())) {
    return reactor;
  }
  const Aggregator::Waiting waiting = aggregator_->WaitingFor();
  response->set_step(waiting.step);
  response->set_waiting_for(waiting.waiting_for);
  response->set_waited_s(absl::ToDoubleSeconds(waiting.waited));
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace tern::server
