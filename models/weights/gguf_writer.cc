#include "models/weights/gguf_writer.h"

#include <cstring>
#include <fstream>

#include "absl/strings/str_format.h"

namespace loom {
namespace {

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

void PutString(std::string* out, const std::string& s) {
  Put<uint64_t>(out, s.size());
  out->append(s);
}

void PutValue(std::string* out, const GgufValue& v) {
  switch (v.type) {
    case GgufType::kU8: Put<uint8_t>(out, v.i); break;
    case GgufType::kI8: Put<int8_t>(out, v.i); break;
    case GgufType::kU16: Put<uint16_t>(out, v.i); break;
    case GgufType::kI16: Put<int16_t>(out, v.i); break;
    case GgufType::kU32: Put<uint32_t>(out, v.i); break;
    case GgufType::kI32: Put<int32_t>(out, v.i); break;
    case GgufType::kU64: Put<uint64_t>(out, v.i); break;
    case GgufType::kI64: Put<int64_t>(out, v.i); break;
    case GgufType::kF32: Put<float>(out, static_cast<float>(v.f)); break;
    case GgufType::kF64: Put<double>(out, v.f); break;
    case GgufType::kBool: Put<uint8_t>(out, v.b ? 1 : 0); break;
    case GgufType::kString: PutString(out, v.s); break;
    case GgufType::kArray:
      Put<int32_t>(out, static_cast<int32_t>(v.elem_type));
      Put<uint64_t>(out, v.size());
      if (v.items.empty()) {
        out->append(v.array_bytes);  // an array read from a file, as its encoded elements
      } else {
        for (const GgufValue& it : v.items) PutValue(out, it);
      }
      break;
  }
}

GgufValue Scalar(GgufType t, int64_t i) {
  GgufValue v;
  v.type = t;
  v.i = i;
  return v;
}

}  // namespace

void GgufWriter::AddValue(const std::string& key, GgufValue value) {
  kv_.emplace_back(key, std::move(value));
}
void GgufWriter::AddString(const std::string& key, const std::string& s) {
  GgufValue v;
  v.type = GgufType::kString;
  v.s = s;
  AddValue(key, std::move(v));
}
void GgufWriter::AddU32(const std::string& key, uint32_t x) {
  AddValue(key, Scalar(GgufType::kU32, x));
}
void GgufWriter::AddI32(const std::string& key, int32_t x) {
  AddValue(key, Scalar(GgufType::kI32, x));
}
void GgufWriter::AddU64(const std::string& key, uint64_t x) {
  AddValue(key, Scalar(GgufType::kU64, static_cast<int64_t>(x)));
}
void GgufWriter::AddF32(const std::string& key, float x) {
  GgufValue v;
  v.type = GgufType::kF32;
  v.f = x;
  AddValue(key, std::move(v));
}
void GgufWriter::AddBool(const std::string& key, bool x) {
  GgufValue v;
  v.type = GgufType::kBool;
  v.b = x;
  v.i = x;
  AddValue(key, std::move(v));
}
void GgufWriter::AddStringArray(const std::string& key, const std::vector<std::string>& xs) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.elem_type = GgufType::kString;
  for (const std::string& s : xs) {
    GgufValue e;
    e.type = GgufType::kString;
    e.s = s;
    v.items.push_back(std::move(e));
  }
  AddValue(key, std::move(v));
}
void GgufWriter::AddI32Array(const std::string& key, const std::vector<int32_t>& xs) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.elem_type = GgufType::kI32;
  for (int32_t x : xs) v.items.push_back(Scalar(GgufType::kI32, x));
  AddValue(key, std::move(v));
}
void GgufWriter::AddF32Array(const std::string& key, const std::vector<float>& xs) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.elem_type = GgufType::kF32;
  for (float x : xs) {
    GgufValue e;
    e.type = GgufType::kF32;
    e.f = x;
    v.items.push_back(e);
  }
  AddValue(key, std::move(v));
}
void GgufWriter::SetAlignment(uint32_t alignment) {
  alignment_ = alignment;
  AddU32("general.alignment", alignment);
}

absl::Status GgufWriter::AddTensor(const std::string& name, DType dtype,
                                   const std::vector<int64_t>& shape, std::string bytes) {
  if (shape.empty() || shape.size() > 4) {
    return absl::InvalidArgumentError(
        absl::StrFormat("tensor '%s': rank %d is not 1..4", name, shape.size()));
  }
  int64_t rows = 1;
  for (size_t k = 0; k + 1 < shape.size(); ++k) rows *= shape[k];
  const std::optional<size_t> row = DTypeRowBytes(dtype, shape.back());
  if (!row || *row * rows != bytes.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor '%s': %d bytes do not match its %s shape", name, bytes.size(),
        DTypeName(dtype)));
  }
  tensors_.push_back({name, GgmlTypeId(dtype), shape, std::move(bytes)});
  return absl::OkStatus();
}

absl::Status GgufWriter::AddF32Tensor(const std::string& name,
                                      const std::vector<int64_t>& shape,
                                      const std::vector<float>& values) {
  std::string bytes(values.size() * sizeof(float), '\0');
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return AddTensor(name, DType::kF32, shape, std::move(bytes));
}

std::string GgufWriter::Serialize() const {
  std::string out;
  Put<uint32_t>(&out, 0x46554747);
  Put<uint32_t>(&out, version_);
  Put<uint64_t>(&out, tensors_.size());
  Put<uint64_t>(&out, kv_.size());
  for (const auto& [key, value] : kv_) {
    PutString(&out, key);
    Put<int32_t>(&out, static_cast<int32_t>(value.type));
    PutValue(&out, value);
  }
  auto align = [&](uint64_t x) { return (x + alignment_ - 1) / alignment_ * alignment_; };
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    PutString(&out, t.name);
    Put<uint32_t>(&out, t.shape.size());
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) Put<int64_t>(&out, *it);
    Put<int32_t>(&out, t.ggml_type);
    Put<uint64_t>(&out, offset);
    offset = align(offset + t.bytes.size());
  }
  out.resize(align(out.size()), '\0');
  for (const Tensor& t : tensors_) {
    out.append(t.bytes);
    out.resize(align(out.size()), '\0');
  }
  return out;
}

absl::Status GgufWriter::WriteFile(const std::string& path) const {
  const std::string bytes = Serialize();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return absl::PermissionDeniedError("cannot create " + path);
  f.write(bytes.data(), bytes.size());
  f.close();
  if (!f) return absl::DataLossError("cannot write " + path);
  return absl::OkStatus();
}

}  // namespace loom
