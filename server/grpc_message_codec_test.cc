// The raw gRPC edge's parser: well-formed requests parse as protobuf would; a string
// field holding invalid UTF-8 (which protobuf's proto3 parser refuses without saying why)
// is named by its path.
#include "server/grpc_message_codec.h"

#include "gtest/gtest.h"
#include "proto/loom/v1/inference.pb.h"

namespace loom {
namespace {

// `m` serialized with the bytes of string field values taken as they are: protobuf's
// own serializer keeps invalid UTF-8 (it only logs), which is what a hostile client sends.
std::string Wire(const google::protobuf::Message& m) {
  std::string out;
  EXPECT_TRUE(m.SerializePartialToString(&out));
  return out;
}

TEST(GrpcMessageCodecTest, WellFormedRequestsParse) {
  v1::GenerateRequest req;
  req.set_adapter_id("tenant-a");
  req.set_text("caf\xc3\xa9");
  req.set_max_tokens(12);
  req.add_stop("\n");
  v1::GenerateRequest out;
  ASSERT_TRUE(ParseRequestBytes(Wire(req), &out).ok());
  EXPECT_EQ(out.SerializeAsString(), req.SerializeAsString());
  // Round trip through a ByteBuffer, as the raw service sees it.
  v1::GenerateRequest again;
  ASSERT_TRUE(ParseRequest(SerializeResponse(req), &again).ok());
  EXPECT_EQ(again.text(), "caf\xc3\xa9");
}

TEST(GrpcMessageCodecTest, InvalidUtf8IsNamedByItsFieldPath) {
  v1::GenerateRequest text;
  text.set_text("bad \xff byte");
  v1::GenerateRequest out;
  absl::Status s = ParseRequestBytes(Wire(text), &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "field 'text' is not valid UTF-8");

  v1::GenerateRequest chat;
  chat.mutable_chat()->add_messages()->set_content("fine");
  v1::ChatMessage* m = chat.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content("\xc3(");
  s = ParseRequestBytes(Wire(chat), &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "field 'chat.messages[1].content' is not valid UTF-8");

  v1::GenerateRequest stop;
  stop.set_text("ok");
  stop.add_stop("a");
  stop.add_stop("\xed\xa0\x80");  // a UTF-16 surrogate: not UTF-8
  s = ParseRequestBytes(Wire(stop), &out);
  EXPECT_EQ(s.message(), "field 'stop[1]' is not valid UTF-8");

  v1::TokenizeRequest tok;
  tok.set_text("\x80");
  v1::TokenizeRequest tok_out;
  EXPECT_EQ(ParseRequestBytes(Wire(tok), &tok_out).message(), "field 'text' is not valid UTF-8");
}

TEST(GrpcMessageCodecTest, GarbageIsRefusedWithTheMessageType) {
  v1::GenerateRequest out;
  absl::Status s = ParseRequestBytes(std::string("\xff\xff\xff\xff\x0f", 5), &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "request is not a valid loom.v1.GenerateRequest");
}

}  // namespace
}  // namespace loom
