#include "common/grpc_status.h"

#include "gtest/gtest.h"

namespace tern {
namespace {

TEST(GrpcStatusTest, RoundTripsEveryCodeAndMessage) {
  for (int code = 1; code <= 16; ++code) {
    const absl::Status status(static_cast<absl::StatusCode>(code), "chunk 7");
    const grpc::Status wire = ToGrpcStatus(status);
    EXPECT_EQ(static_cast<int>(wire.error_code()), code);
    EXPECT_EQ(wire.error_message(), "chunk 7");
    EXPECT_EQ(FromGrpcStatus(wire), status);
  }
}

TEST(GrpcStatusTest, OkStaysOk) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
}

TEST(GrpcStatusTest, UnknownWireCodeBecomesUnknown) {
  const grpc::Status odd(static_cast<grpc::StatusCode>(99), "odd peer");
  const absl::Status status = FromGrpcStatus(odd);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnknown);
  EXPECT_EQ(status.message(), "odd peer");
}

}  // namespace
}  // namespace tern
