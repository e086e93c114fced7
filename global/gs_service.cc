#include "global/gs_service.h"

#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "core/wire.h"
#include "global/messages.h"
#include "kernels/payload.h"

namespace tern::global {
namespace {

absl::Status Prefixed(const absl::Status& status, absl::string_view prefix) {
  return absl::Status(status.code(),
                      absl::StrCat(prefix, ": ", status.message()));
}

absl::StatusOr<RegisterRequest> RegisterFromWire(
    const tern::v1::RegisterRequest& wire) {
  RegisterRequest request;
  request.datacenter = wire.datacenter();
  request.num_datacenters = wire.num_datacenters();
  request.param_spec_hash = wire.param_spec_hash();
  request.param_checksum = wire.param_checksum();
  request.chunk_elements.assign(wire.chunk_elements().begin(),
                                wire.chunk_elements().end());
  const std::string prefix =
      absl::StrCat("registration of data center ", wire.datacenter());
  absl::StatusOr<kernels::CodecId> codec =
      core::CodecFromWire(wire.update_codec());
  if (!codec.ok()) return Prefixed(codec.status(), prefix);
  request.update_codec = *codec;
  absl::StatusOr<kernels::Layout> layout =
      core::LayoutFromWire(wire.update_layout());
  if (!layout.ok()) return Prefixed(layout.status(), prefix);
  request.update_layout = *layout;
  request.fp32_chunk_keys.assign(wire.fp32_chunk_keys().begin(),
                                 wire.fp32_chunk_keys().end());
  return request;
}

absl::StatusOr<SyncRequest> SyncFromWire(
    const tern::v1::SyncRoundRequest& wire) {
  SyncRequest request;
  request.datacenter = wire.datacenter();
  request.round = wire.round();
  request.updates.reserve(wire.updates_size());
  for (const tern::v1::ChunkPayload& chunk : wire.updates()) {
    absl::StatusOr<kernels::Payload> payload =
        core::PayloadFromWire(chunk.payload());
    if (!payload.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("round ", wire.round(), ": chunk ", chunk.chunk_key(),
                       " of data center ", wire.datacenter(), ": ",
                       payload.status().message()));
    }
    request.updates.push_back(
        ChunkPayload{chunk.chunk_key(), *std::move(payload)});
  }
  return request;
}

void AnswerToWire(const RoundAnswer& answer, tern::v1::SyncRoundResponse* out) {
  out->set_round(answer.round);
  for (const ChunkPayload& chunk : answer.average) {
    tern::v1::ChunkPayload* wire = out->add_average();
    wire->set_chunk_key(chunk.chunk_key);
    core::PayloadToWire(chunk.payload, wire->mutable_payload());
  }
  out->mutable_lagging()->Assign(answer.lagging.begin(), answer.lagging.end());
  for (const Contribution& contribution : answer.contributions) {
    tern::v1::RoundContribution* wire = out->add_contributions();
    wire->set_datacenter(contribution.datacenter);
    wire->set_round(contribution.round);
  }
}

}  // namespace

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
