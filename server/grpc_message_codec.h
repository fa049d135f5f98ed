// The byte side of the gRPC edge: loom.v1.Inference's calls are registered raw
// (grpc::ByteBuffer) so that parsing is the server's own, and a request that protobuf
// refuses gets INVALID_ARGUMENT with a message naming what is wrong, rather than the
// gRPC library's bare failure. proto3 string fields must hold valid UTF-8; one that does
// not is named with its path ("chat.messages[1].content").
#ifndef LOOM_SERVER_GRPC_MESSAGE_CODEC_H_
#define LOOM_SERVER_GRPC_MESSAGE_CODEC_H_

#include <string>

#include "absl/status/status.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"

namespace loom {

// Parses `bytes` into `out`. InvalidArgument: "field 'PATH' is not valid UTF-8" for the
// first such string field (depth-first, in wire order), else "request is not a valid
// <message type>".
absl::Status ParseRequestBytes(const std::string& bytes, google::protobuf::Message* out);

// The same for a gRPC request buffer.
absl::Status ParseRequest(const grpc::ByteBuffer& buffer, google::protobuf::Message* out);

// `message` serialized into a ByteBuffer (for raw-registered responses).
grpc::ByteBuffer SerializeResponse(const google::protobuf::Message& message);

}  // namespace loom

#endif  // LOOM_SERVER_GRPC_MESSAGE_CODEC_H_
