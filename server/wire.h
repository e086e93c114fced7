// Converts the shard's protobuf messages (tern.v1) to the plain types of
// server/messages.h and back. A request is checked here only for what the
// plain types cannot hold: enum numbers outside the known range and dtypes
// other than float32 are INVALID_ARGUMENT, naming the chunk or tensor. The
// aggregator checks everything else.
#ifndef TERN_SERVER_WIRE_H_
#define TERN_SERVER_WIRE_H_

#include "absl/status/statusor.h"
#include "core/wire.h"
#include "kernels/payload.h"
#include "server/messages.h"
#include "tern/v1/parameter_server.pb.h"
#include "tern/v1/payload.pb.h"

namespace tern::server {

// The most QSGD levels a run may use: a level then fits the 8-bit fields of
// LAYOUT_QSGD_LEVELS (ceil(log2(2s+1)) bits, s <= 127).
inline constexpr uint32_t kMaxQsgdLevels = 127;

// RunConfig.codec_params. A zero (absent) field means the default of
// kernels/codec_options.h, so an older worker that sends none still joins;
// a value out of its range is INVALID_ARGUMENT naming the field and the
// value: tau finite and > 0; proportion and drop_ratio in (0, 1);
// drop_scope 0 (global) or 1 (per tensor); qsgd_levels in [1, 127];
// sample_size and qsgd_bucket >= 1.
absl::StatusOr<CodecParams> CodecParamsFromWire(
    const tern::v1::CodecParams& wire);
// Writes every field, defaults included.
void CodecParamsToWire(const CodecParams& params, tern::v1::CodecParams* out);

// Payloads convert in core/wire.h, the same for every role; the shard's
// and the LPS's code (gs_link, the tests) name them as their own.
using core::PayloadFromWire;
using core::PayloadToWire;

absl::StatusOr<JoinRequest> JoinFromWire(const tern::v1::JoinRequest& wire);
ScalerRequest ScalersFromWire(const tern::v1::ShareScalersRequest& wire);
absl::StatusOr<PushRequest> PushFromWire(const tern::v1::PushPullRequest& wire);
// PushFromWire that takes the chunks out of `*wire` instead of copying
// them: the payload bytes move into the result, and `*wire` is left with
// no chunks (their objects freed), on error too. worker_id, step and
// fp32_weights stay for the caller's log lines. For the services, whose
// request gRPC keeps until the call is answered: a push that waits at a
// barrier, or a duplicate of one, then holds no payload there (issue 14).
absl::StatusOr<PushRequest> TakePushFromWire(tern::v1::PushPullRequest* wire);

void JoinToWire(const JoinReply& reply, tern::v1::JoinResponse* out);
void ScalersToWire(const ScalerReply& reply,
                   tern::v1::ShareScalersResponse* out);
void PushToWire(const PushReply& reply, tern::v1::PushPullResponse* out);

// The other direction, for a shard's state on disk (server/shard_state.h):
// JoinFromWire(JoinToWire(request)) is `request`, and so on.
void JoinToWire(const JoinRequest& request, tern::v1::JoinRequest* out);
ScalerReply ScalerReplyFromWire(const tern::v1::ShareScalersResponse& wire);
absl::StatusOr<PushReply> PushReplyFromWire(
    const tern::v1::PushPullResponse& wire);

}  // namespace tern::server

#endif  // TERN_SERVER_WIRE_H_
