#include "common/grpc_status.h"

#include <cstring>
#include <string>
#include <type_traits>

namespace tern {
namespace {

constexpr int kLastCode = static_cast<int>(absl::StatusCode::kUnauthenticated);
static_assert(kLastCode == grpc::StatusCode::UNAUTHENTICATED);

bool IsErrorCode(int code) { return code > 0 && code <= kLastCode; }

}  // namespace

int RawGrpcCode(const grpc::Status& status) {
  // grpc::Status (gRPC 1.51, grpcpp/impl/codegen/status.h) declares its
  // StatusCode first; a standard-layout object starts with its first member,
  // so the code's bytes are the status's first bytes. grpc_status_test
  // checks this for every code.
  using Underlying = std::underlying_type_t<grpc::StatusCode>;
  static_assert(std::is_standard_layout_v<grpc::Status>);
  static_assert(sizeof(Underlying) == sizeof(int));
  int code;
  std::memcpy(&code, &status, sizeof(code));
  return code;
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const int code = static_cast<int>(status.code());
  return grpc::Status(IsErrorCode(code) ? static_cast<grpc::StatusCode>(code)
                                        : grpc::StatusCode::UNKNOWN,
                      std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  const int code = RawGrpcCode(status);
  if (code == 0) return absl::OkStatus();
  // A code outside google.rpc.Code (a misbehaving peer) is UNKNOWN.
  return absl::Status(IsErrorCode(code) ? static_cast<absl::StatusCode>(code)
                                        : absl::StatusCode::kUnknown,
                      status.error_message());
}

}  // namespace tern
