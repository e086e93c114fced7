#include "common/grpc_status.h"

#include <cstring>

#include "gtest/gtest.h"

namespace tern {
namespace {

// What gRPC's receive path builds when a peer sends `grpc-status: <code>`:
// the wire's integer stored as the status's code, whatever its range.
// (Constructing it through grpc::Status's constructor would itself be the
// undefined enum load this conversion avoids.)
grpc::Status FromWire(int code, const std::string& message) {
  grpc::Status status(grpc::StatusCode::UNKNOWN, message);
  std::memcpy(static_cast<void*>(&status), &code, sizeof(code));
  return status;
}

TEST(GrpcStatusTest, RoundTripsEveryCodeAndMessage) {
  for (int code = 1; code <= 16; ++code) {
    const absl::Status status(static_cast<absl::StatusCode>(code), "chunk 7");
    const grpc::Status wire = ToGrpcStatus(status);
    EXPECT_EQ(static_cast<int>(wire.error_code()), code);
    EXPECT_EQ(RawGrpcCode(wire), code);
    EXPECT_EQ(wire.error_message(), "chunk 7");
    EXPECT_EQ(FromGrpcStatus(wire), status);
  }
}

TEST(GrpcStatusTest, OkStaysOk) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
  EXPECT_EQ(RawGrpcCode(grpc::Status::OK), 0);
}

// RawGrpcCode reads the code's bytes; it must agree with error_code() for
// every code the enum has, or grpc::Status's layout has changed under us.
TEST(GrpcStatusTest, RawCodeIsTheEnumsValueForEveryCode) {
  for (int code = 0; code <= 16; ++code) {
    const grpc::Status status(static_cast<grpc::StatusCode>(code), "x");
    EXPECT_EQ(RawGrpcCode(status), code);
    EXPECT_EQ(RawGrpcCode(FromWire(code, "x")), code);
  }
}

class OutOfRangeWireCodeTest : public ::testing::TestWithParam<int> {};

TEST_P(OutOfRangeWireCodeTest, BecomesUnknownKeepingTheMessage) {
  const grpc::Status odd = FromWire(GetParam(), "odd peer");
  EXPECT_EQ(RawGrpcCode(odd), GetParam());
  const absl::Status status = FromGrpcStatus(odd);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnknown);
  EXPECT_EQ(status.message(), "odd peer");
}

INSTANTIATE_TEST_SUITE_P(Codes, OutOfRangeWireCodeTest,
                         ::testing::Values(-1, 17, 31, 32, 99, 1 << 20,
                                           -(1 << 30)));

TEST(GrpcStatusTest, AnOutOfRangeAbslCodeIsSentAsUnknown) {
  const absl::Status odd(static_cast<absl::StatusCode>(99), "odd code");
  const grpc::Status wire = ToGrpcStatus(odd);
  EXPECT_EQ(RawGrpcCode(wire), static_cast<int>(grpc::StatusCode::UNKNOWN));
  EXPECT_EQ(wire.error_message(), "odd code");
}

}  // namespace
}  // namespace tern
