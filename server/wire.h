// Converts the shard's protobuf messages (tern.v1) to the plain types of
// server/messages.h and back. A request is checked here only for what the
// plain types cannot hold: enum numbers outside the known range and dtypes
// other than float32 are INVALID_ARGUMENT, naming the chunk or tensor. The
// aggregator checks everything else.
#ifndef TERN_SERVER_WIRE_H_
#define TERN_SERVER_WIRE_H_

#include "absl/status/statusor.h"
#include "kernels/payload.h"
#include "server/messages.h"
#include "tern/v1/parameter_server.pb.h"
#include "tern/v1/payload.pb.h"

namespace tern::server {

// The payload's bytes are copied: the request stays intact.
absl::StatusOr<kernels::Payload> PayloadFromWire(const tern::v1::Payload& wire);
void PayloadToWire(const kernels::Payload& payload, tern::v1::Payload* out);

absl::StatusOr<JoinRequest> JoinFromWire(const tern::v1::JoinRequest& wire);
ScalerRequest ScalersFromWire(const tern::v1::ShareScalersRequest& wire);
absl::StatusOr<PushRequest> PushFromWire(const tern::v1::PushPullRequest& wire);

void JoinToWire(const JoinReply& reply, tern::v1::JoinResponse* out);
void ScalersToWire(const ScalerReply& reply,
                   tern::v1::ShareScalersResponse* out);
void PushToWire(const PushReply& reply, tern::v1::PushPullResponse* out);

}  // namespace tern::server

#endif  // TERN_SERVER_WIRE_H_
