// The one place where absl::Status and grpc::Status meet. Services return
// ToGrpcStatus(...) of what the plain classes say; clients turn what the
// wire says back into absl::Status with FromGrpcStatus.
#ifndef TERN_COMMON_GRPC_STATUS_H_
#define TERN_COMMON_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace tern {

// The two enums share their numeric values (both follow google.rpc.Code).
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace tern

#endif  // TERN_COMMON_GRPC_STATUS_H_
