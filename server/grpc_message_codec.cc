#include "server/grpc_message_codec.h"

#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/unknown_field_set.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "models/tokenizer/utf8.h"

namespace loom {
namespace {

namespace pb = google::protobuf;

// Message nesting in loom.v1 is at most 3 deep; deeper input is not ours to walk.
constexpr int kMaxDepth = 8;

// The path of the first string field holding invalid UTF-8 in `bytes`, read as a
// `type` message, or nullopt. Fields unknown to `type` are skipped.
std::optional<std::string> FindInvalidUtf8(const std::string& bytes, const pb::Descriptor* type,
                                           const std::string& prefix, int depth) {
  if (depth > kMaxDepth) return std::nullopt;
  pb::UnknownFieldSet fields;
  if (!fields.ParseFromString(bytes)) return std::nullopt;
  absl::flat_hash_map<int, int> occurrences;  // per field number, for [i] indices
  for (int i = 0; i < fields.field_count(); ++i) {
    const pb::UnknownField& f = fields.field(i);
    const pb::FieldDescriptor* fd = type->FindFieldByNumber(f.number());
    if (fd == nullptr || f.type() != pb::UnknownField::TYPE_LENGTH_DELIMITED) continue;
    std::string path = prefix.empty() ? fd->name() : absl::StrCat(prefix, ".", fd->name());
    const int index = occurrences[f.number()]++;
    if (fd->is_repeated()) absl::StrAppend(&path, "[", index, "]");
    if (fd->type() == pb::FieldDescriptor::TYPE_STRING) {
      if (!utf8::IsValid(f.length_delimited())) return path;
    } else if (fd->type() == pb::FieldDescriptor::TYPE_MESSAGE) {
      std::optional<std::string> inner =
          FindInvalidUtf8(f.length_delimited(), fd->message_type(), path, depth + 1);
      if (inner) return inner;
    }
  }
  return std::nullopt;
}

}  // namespace

absl::Status ParseRequestBytes(const std::string& bytes, pb::Message* out) {
  if (out->ParseFromString(bytes)) return absl::OkStatus();
  std::optional<std::string> bad = FindInvalidUtf8(bytes, out->GetDescriptor(), "", 0);
  if (bad) {
    return absl::InvalidArgumentError(absl::StrCat("field '", *bad, "' is not valid UTF-8"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("request is not a valid ", out->GetDescriptor()->full_name()));
}

absl::Status ParseRequest(const grpc::ByteBuffer& buffer, pb::Message* out) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) {
    return absl::InvalidArgumentError("request bytes could not be read");
  }
  std::string bytes;
  bytes.reserve(buffer.Length());
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return ParseRequestBytes(bytes, out);
}

grpc::ByteBuffer SerializeResponse(const pb::Message& message) {
  grpc::ByteBuffer buffer;
  bool own = false;
  // Serialization of a message we built cannot fail short of running out of memory.
  (void)grpc::SerializationTraits<pb::Message>::Serialize(message, &buffer, &own);
  return buffer;
}

}  // namespace loom
