#include "clients/cpp/grpc_status.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace loom {
namespace {

// The pairing is written out by name (not by casting numbers), so a wrong table in the
// implementation cannot agree with itself.
const std::vector<std::pair<grpc::StatusCode, absl::StatusCode>>& Pairs() {
  static const auto* pairs = new std::vector<std::pair<grpc::StatusCode, absl::StatusCode>>{
      {grpc::StatusCode::CANCELLED, absl::StatusCode::kCancelled},
      {grpc::StatusCode::UNKNOWN, absl::StatusCode::kUnknown},
      {grpc::StatusCode::INVALID_ARGUMENT, absl::StatusCode::kInvalidArgument},
      {grpc::StatusCode::DEADLINE_EXCEEDED, absl::StatusCode::kDeadlineExceeded},
      {grpc::StatusCode::NOT_FOUND, absl::StatusCode::kNotFound},
      {grpc::StatusCode::ALREADY_EXISTS, absl::StatusCode::kAlreadyExists},
      {grpc::StatusCode::PERMISSION_DENIED, absl::StatusCode::kPermissionDenied},
      {grpc::StatusCode::RESOURCE_EXHAUSTED, absl::StatusCode::kResourceExhausted},
      {grpc::StatusCode::FAILED_PRECONDITION, absl::StatusCode::kFailedPrecondition},
      {grpc::StatusCode::ABORTED, absl::StatusCode::kAborted},
      {grpc::StatusCode::OUT_OF_RANGE, absl::StatusCode::kOutOfRange},
      {grpc::StatusCode::UNIMPLEMENTED, absl::StatusCode::kUnimplemented},
      {grpc::StatusCode::INTERNAL, absl::StatusCode::kInternal},
      {grpc::StatusCode::UNAVAILABLE, absl::StatusCode::kUnavailable},
      {grpc::StatusCode::DATA_LOSS, absl::StatusCode::kDataLoss},
      {grpc::StatusCode::UNAUTHENTICATED, absl::StatusCode::kUnauthenticated},
  };
  return *pairs;
}

TEST(GrpcStatus, EveryCodeMapsBothWaysWithMessage) {
  for (const auto& [g, a] : Pairs()) {
    absl::Status s = FromGrpcStatus(grpc::Status(g, "field x: bad"));
    EXPECT_EQ(s.code(), a) << static_cast<int>(g);
    EXPECT_EQ(s.message(), "field x: bad");
    grpc::Status back = ToGrpcStatus(absl::Status(a, "msg \xc3\xa9"));
    EXPECT_EQ(back.error_code(), g) << absl::StatusCodeToString(a);
    EXPECT_EQ(back.error_message(), "msg \xc3\xa9");
  }
}

TEST(GrpcStatus, OkAndOutOfRangeCodes) {
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  absl::Status odd = FromGrpcStatus(grpc::Status(static_cast<grpc::StatusCode>(99), "x"));
  EXPECT_EQ(odd.code(), absl::StatusCode::kUnknown);
  EXPECT_EQ(odd.message(), "x");
  grpc::Status odd2 = ToGrpcStatus(absl::Status(static_cast<absl::StatusCode>(42), "y"));
  EXPECT_EQ(odd2.error_code(), grpc::StatusCode::UNKNOWN);
}

}  // namespace
}  // namespace loom
