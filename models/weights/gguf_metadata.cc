// Typed metadata getters of GgufFile.
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "models/weights/gguf_file.h"

namespace loom {
namespace {

absl::Status WrongType(const std::string& path, const std::string& key, const char* want,
                       const GgufValue& v) {
  return absl::InvalidArgumentError(absl::StrFormat("%s: metadata '%s' should be %s, is %s",
                                                    path, key, want, GgufTypeName(v.type)));
}

bool IsUnsigned64Above(const GgufValue& v) { return v.type == GgufType::kU64 && v.i < 0; }

}  // namespace

const GgufValue* GgufFile::Find(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

absl::StatusOr<const GgufValue*> GgufFile::Lookup(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) {
    return absl::NotFoundError(absl::StrFormat("%s: missing metadata key '%s'", path(), key));
  }
  return v;
}

absl::StatusOr<std::string> GgufFile::GetString(const std::string& key) const {
  auto v = Lookup(key);
  if (!v.ok()) return v.status();
  if ((*v)->type != GgufType::kString) return WrongType(path(), key, "a string", **v);
  return (*v)->s;
}

absl::StatusOr<int64_t> GgufFile::GetInt(const std::string& key) const {
  auto v = Lookup(key);
  if (!v.ok()) return v.status();
  if (!(*v)->is_integer()) return WrongType(path(), key, "an integer", **v);
  if (IsUnsigned64Above(**v)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: metadata '%s' = %d does not fit in int64", path(), key,
                        static_cast<uint64_t>((*v)->i)));
  }
  return (*v)->i;
}

absl::StatusOr<int32_t> GgufFile::GetInt32(const std::string& key) const {
  auto v = GetInt(key);
  if (!v.ok()) return v.status();
  if (*v < std::numeric_limits<int32_t>::min() || *v > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: metadata '%s' = %d does not fit in int32", path(), key, *v));
  }
  return static_cast<int32_t>(*v);
}

absl::StatusOr<double> GgufFile::GetFloat(const std::string& key) const {
  auto v = Lookup(key);
  if (!v.ok()) return v.status();
  if ((*v)->is_float()) return (*v)->f;
  if ((*v)->is_integer() && !IsUnsigned64Above(**v)) return static_cast<double>((*v)->i);
  return WrongType(path(), key, "a number", **v);
}

absl::StatusOr<bool> GgufFile::GetBool(const std::string& key) const {
  auto v = Lookup(key);
  if (!v.ok()) return v.status();
  if ((*v)->type != GgufType::kBool) return WrongType(path(), key, "a bool", **v);
  return (*v)->b;
}

absl::StatusOr<std::vector<std::string>> GgufFile::GetStringArray(const std::string& key) const {
  auto v = Lookup(key);
  if (!v.ok()) return v.status();
  if ((*v)->type != GgufType::kArray || (*v)->elem_type != GgufType::kString) {
    return WrongType(path(), key, "an array of strings", **v);
  }
  auto items = DecodeGgufArray(**v);
  if (!items.ok()) return items.status();
  std::vector<std::string> out;
  out.reserve(items->size());
  for (GgufValue& it : *items) out.push_back(std::move(it.s));
  return out;
}

absl::StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(const std::string& key) const {
  auto v = Lookup(key);
  if (!v.ok()) return v.status();
  GgufValue probe;
  probe.type = (*v)->elem_type;
  if ((*v)->type != GgufType::kArray || !probe.is_integer()) {
    return WrongType(path(), key, "an array of integers", **v);
  }
  auto items = DecodeGgufArray(**v);
  if (!items.ok()) return items.status();
  std::vector<int64_t> out;
  out.reserve(items->size());
  for (const GgufValue& it : *items) {
    if (IsUnsigned64Above(it)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: metadata '%s' has an element above int64", path(), key));
    }
    out.push_back(it.i);
  }
  return out;
}

absl::StatusOr<std::vector<float>> GgufFile::GetFloatArray(const std::string& key) const {
  auto v = Lookup(key);
  if (!v.ok()) return v.status();
  GgufValue probe;
  probe.type = (*v)->elem_type;
  if ((*v)->type != GgufType::kArray || !(probe.is_float() || probe.is_integer())) {
    return WrongType(path(), key, "an array of numbers", **v);
  }
  auto items = DecodeGgufArray(**v);
  if (!items.ok()) return items.status();
  std::vector<float> out;
  out.reserve(items->size());
  for (const GgufValue& it : *items) {
    out.push_back(it.is_float() ? static_cast<float>(it.f) : static_cast<float>(it.i));
  }
  return out;
}

}  // namespace loom
