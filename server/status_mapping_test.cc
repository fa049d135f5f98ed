#include "server/status_mapping.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "models/tokenizer/utf8.h"

namespace loom {
namespace {

// Each absl code maps to the gRPC code of the same name (checked by name, not by number,
// so a renumbering on either side would fail here).
TEST(StatusMappingTest, EveryCodeMapsToTheSameNamedGrpcCode) {
  const std::pair<absl::StatusCode, grpc::StatusCode> pairs[] = {
      {absl::StatusCode::kCancelled, grpc::StatusCode::CANCELLED},
      {absl::StatusCode::kUnknown, grpc::StatusCode::UNKNOWN},
      {absl::StatusCode::kInvalidArgument, grpc::StatusCode::INVALID_ARGUMENT},
      {absl::StatusCode::kDeadlineExceeded, grpc::StatusCode::DEADLINE_EXCEEDED},
      {absl::StatusCode::kNotFound, grpc::StatusCode::NOT_FOUND},
      {absl::StatusCode::kAlreadyExists, grpc::StatusCode::ALREADY_EXISTS},
      {absl::StatusCode::kPermissionDenied, grpc::StatusCode::PERMISSION_DENIED},
      {absl::StatusCode::kResourceExhausted, grpc::StatusCode::RESOURCE_EXHAUSTED},
      {absl::StatusCode::kFailedPrecondition, grpc::StatusCode::FAILED_PRECONDITION},
      {absl::StatusCode::kAborted, grpc::StatusCode::ABORTED},
      {absl::StatusCode::kOutOfRange, grpc::StatusCode::OUT_OF_RANGE},
      {absl::StatusCode::kUnimplemented, grpc::StatusCode::UNIMPLEMENTED},
      {absl::StatusCode::kInternal, grpc::StatusCode::INTERNAL},
      {absl::StatusCode::kUnavailable, grpc::StatusCode::UNAVAILABLE},
      {absl::StatusCode::kDataLoss, grpc::StatusCode::DATA_LOSS},
      {absl::StatusCode::kUnauthenticated, grpc::StatusCode::UNAUTHENTICATED},
  };
  for (const auto& [a, g] : pairs) {
    const absl::Status s(a, "field x = 3 is bad");
    const grpc::Status out = GrpcStatusForClient(s);
    EXPECT_EQ(out.error_code(), g) << absl::StatusCodeToString(a);
    EXPECT_EQ(out.error_message(), "field x = 3 is bad");
  }
}

TEST(StatusMappingTest, OkIsOk) {
  EXPECT_TRUE(GrpcStatusForClient(absl::OkStatus()).ok());
}

// A loader error echoing a 100 kB attacker-chosen adapter name: the client gets the code
// and a bounded, valid-UTF-8, control-free message that still starts with the reason.
TEST(StatusMappingTest, EchoedNamesAreBoundedAndSanitised) {
  const std::string name = std::string(100000, 'A') + "\xff\x01\n";
  const absl::Status s =
      absl::FailedPreconditionError(absl::StrCat("adapter 'x\x1b[31m", name, "' is malformed"));
  const grpc::Status out = GrpcStatusForClient(s);
  EXPECT_EQ(out.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_LE(out.error_message().size(), kMaxClientMessageBytes);
  EXPECT_EQ(out.error_message().rfind("adapter 'x\\x1b[31mAAA", 0), 0u) << out.error_message();
  EXPECT_EQ(out.error_message().substr(out.error_message().size() - 3), "...");
  EXPECT_TRUE(utf8::IsValid(out.error_message()));
  // Short messages keep every printable character, multi-byte ones included; bad bytes
  // and control characters become visible escapes.
  EXPECT_EQ(SanitizeClientMessage("caf\xc3\xa9 \xff\x07 ok"), "caf\xc3\xa9 \\xff\\x07 ok");
  // Cut at a character boundary, never inside one.
  std::string e_acute;
  for (int i = 0; i < 1000; ++i) e_acute += "\xc3\xa9";
  EXPECT_TRUE(utf8::IsValid(SanitizeClientMessage("x" + e_acute)));
}

TEST(StatusMappingTest, ParamAndRetryAfterPayloadsTravelWithTheStatus) {
  absl::Status s = WithParam(absl::InvalidArgumentError("temperature = 300 ..."), "temperature");
  EXPECT_EQ(ErrorParam(s), "temperature");
  EXPECT_EQ(ErrorParam(absl::InvalidArgumentError("x")), "");
  s = WithRetryAfter(absl::ResourceExhaustedError("slow down"), absl::Milliseconds(2500));
  ASSERT_TRUE(RetryAfter(s).has_value());
  EXPECT_EQ(*RetryAfter(s), absl::Milliseconds(2500));
  EXPECT_FALSE(RetryAfter(absl::ResourceExhaustedError("x")).has_value());
  EXPECT_TRUE(WithParam(absl::OkStatus(), "x").ok());
}

}  // namespace
}  // namespace loom
