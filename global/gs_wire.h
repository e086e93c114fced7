// The conversions between global/messages.h and their tern.v1 twins
// (proto/tern/v1/global_server.proto), for the service (global/gs_service.h)
// and the state file (global/gs_state.h), which stores the same messages.
#ifndef TERN_GLOBAL_GS_WIRE_H_
#define TERN_GLOBAL_GS_WIRE_H_

#include "absl/status/statusor.h"
#include "global/messages.h"
#include "tern/v1/global_server.pb.h"

namespace tern::global {

// INVALID_ARGUMENT (naming the data center) for a codec or layout this
// build does not know.
absl::StatusOr<RegisterRequest> RegisterFromWire(
    const tern::v1::RegisterRequest& wire);
void RegisterToWire(const RegisterRequest& request,
                    tern::v1::RegisterRequest* out);

// INVALID_ARGUMENT naming the round and chunk for a payload that is not
// well formed.
absl::StatusOr<SyncRequest> SyncFromWire(
    const tern::v1::SyncRoundRequest& wire);

void AnswerToWire(const RoundAnswer& answer, tern::v1::SyncRoundResponse* out);
// INVALID_ARGUMENT naming the round and chunk for a payload that is not
// well formed.
absl::StatusOr<RoundAnswer> AnswerFromWire(
    const tern::v1::SyncRoundResponse& wire);

}  // namespace tern::global

#endif  // TERN_GLOBAL_GS_WIRE_H_
