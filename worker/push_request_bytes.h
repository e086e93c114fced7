// A worker's push as the bytes gRPC sends: the tern.v1.PushPullRequest's
// chunk data moves out of the message into slices that point at it
// (core/chunked_message_bytes.h, core/message_slices.h), instead of gRPC's
// serialization copying every byte of it into buffers of its own. The
// bytes equal the message's serialization (push_request_bytes_test); the
// shard reads them as any PushPullRequest. Every chunk's payload is
// written, as the protocols set it (an unset one would be written empty,
// which a shard reads the same).
#ifndef TERN_WORKER_PUSH_REQUEST_BYTES_H_
#define TERN_WORKER_PUSH_REQUEST_BYTES_H_

#include "grpcpp/grpcpp.h"
#include "tern/v1/parameter_server.pb.h"

namespace tern::worker {

// The buffer holds the request's data until gRPC has let go of it; a
// retry of the call sends the same buffer again.
grpc::ByteBuffer PushRequestBuffer(tern::v1::PushPullRequest request);

}  // namespace tern::worker

#endif  // TERN_WORKER_PUSH_REQUEST_BYTES_H_
