// The one place where absl::Status and grpc::Status meet. Services return
// ToGrpcStatus(...) of what the plain classes say; clients turn what the
// wire says back into absl::Status with FromGrpcStatus.
#ifndef TERN_COMMON_GRPC_STATUS_H_
#define TERN_COMMON_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace tern {

// The two enums share their numeric values (both follow google.rpc.Code).
// A code outside google.rpc.Code becomes UNKNOWN in either direction.
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// The integer a grpc::Status holds as its code. A peer may send any integer
// as `grpc-status`, and gRPC's C++ layer stores it in a grpc::StatusCode
// unchecked (grpcpp/impl/call_op_set.h); that enum's values stop at 16, so
// reading a stored 99 back through error_code() or ok() is undefined
// behaviour. This reads the stored integer without going through the enum.
// Call it (or FromGrpcStatus) on every status that came from the network.
int RawGrpcCode(const grpc::Status& status);

}  // namespace tern

#endif  // TERN_COMMON_GRPC_STATUS_H_
