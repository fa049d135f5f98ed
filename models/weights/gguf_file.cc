// GGUF container parsing. Every read goes through ByteCursor, which checks bounds; counts
// read from the file are checked against the bytes that remain before anything is
// allocated for them.
#include "models/weights/gguf_file.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "models/weights/untrusted_text.h"

namespace loom {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
constexpr int kMaxArrayDepth = 4;
constexpr int64_t kMaxDim = int64_t{1} << 40;
constexpr int64_t kMaxElems = int64_t{1} << 48;

class ByteCursor {
 public:
  ByteCursor(const uint8_t* data, size_t size, const std::string& path)
      : data_(data), size_(size), path_(path) {}
  size_t pos() const { return pos_; }
  const uint8_t* here() const { return data_ + pos_; }
  size_t remaining() const { return size_ - pos_; }

  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: invalid GGUF: %s (at byte %d)", path_, what, pos_));
  }
  absl::Status Need(uint64_t n, const std::string& what) const {
    if (n > remaining()) {
      return Error(absl::StrFormat("truncated %s: needs %d bytes, %d remain", what, n,
                                   remaining()));
    }
    return absl::OkStatus();
  }
  template <typename T>
  absl::Status Read(T* v, const std::string& what) {
    if (auto s = Need(sizeof(T), what); !s.ok()) return s;
    std::memcpy(v, data_ + pos_, sizeof(T));  // host is little-endian (x86-64, aarch64)
    pos_ += sizeof(T);
    return absl::OkStatus();
  }
  void Skip(size_t n) { pos_ += n; }  // REQUIRES: Need(n) succeeded
  absl::Status ReadString(std::string* s, const std::string& what) {
    uint64_t n = 0;
    if (auto st = Read(&n, what + " length"); !st.ok()) return st;
    if (n > remaining()) {
      return Error(absl::StrFormat("%s length %d runs past the end of the file (%d bytes "
                                   "remain)", what, n, remaining()));
    }
    s->assign(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return absl::OkStatus();
  }
  // A string's bytes, checked and skipped without copying.
  absl::Status SkipString(const std::string& what) {
    uint64_t n = 0;
    if (auto st = Read(&n, what + " length"); !st.ok()) return st;
    if (n > remaining()) {
      return Error(absl::StrFormat("%s length %d runs past the end of the file (%d bytes "
                                   "remain)", what, n, remaining()));
    }
    pos_ += n;
    return absl::OkStatus();
  }

 private:
  const uint8_t* data_;
  size_t size_;
  const std::string& path_;
  size_t pos_ = 0;
};

bool ValidType(int32_t t) { return t >= 0 && t <= 12; }

// Bytes of one scalar of type t (0 for string/array).
size_t ScalarSize(GgufType t) {
  switch (t) {
    case GgufType::kU8: case GgufType::kI8: case GgufType::kBool: return 1;
    case GgufType::kU16: case GgufType::kI16: return 2;
    case GgufType::kU32: case GgufType::kI32: case GgufType::kF32: return 4;
    case GgufType::kU64: case GgufType::kI64: case GgufType::kF64: return 8;
    default: return 0;
  }
}

// The fewest bytes one value of type t can occupy (used to bound counts).
size_t MinEncodedSize(GgufType t) {
  if (t == GgufType::kString) return 8;
  if (t == GgufType::kArray) return 12;
  return ScalarSize(t);
}

template <typename T>
absl::Status ReadScalarInto(ByteCursor& c, const std::string& what, GgufValue* v) {
  T x;
  if (auto s = c.Read(&x, what); !s.ok()) return s;
  if constexpr (std::is_floating_point_v<T>) {
    v->f = x;
  } else {
    v->i = static_cast<int64_t>(x);
  }
  return absl::OkStatus();
}

absl::Status ParseValue(ByteCursor& c, GgufType type, int depth, const std::string& what,
                        GgufValue* v);

// Reads an array's header and checks (without keeping anything) every element; `v` becomes
// a view of the encoded elements.
absl::Status ParseArrayView(ByteCursor& c, int depth, const std::string& what, GgufValue* v) {
  if (depth >= kMaxArrayDepth) return c.Error(what + ": arrays nested too deeply");
  int32_t et;
  uint64_t n;
  if (auto s = c.Read(&et, what + " element type"); !s.ok()) return s;
  if (!ValidType(et)) {
    return c.Error(absl::StrFormat("%s: unknown array element type %d", what, et));
  }
  if (auto s = c.Read(&n, what + " count"); !s.ok()) return s;
  v->elem_type = static_cast<GgufType>(et);
  const size_t min = MinEncodedSize(v->elem_type);
  if (n > c.remaining() / min) {
    return c.Error(absl::StrFormat("%s: array count %d is larger than the %d remaining "
                                   "bytes can hold", what, n, c.remaining()));
  }
  const uint8_t* begin = c.here();
  const size_t scalar = ScalarSize(v->elem_type);
  if (scalar != 0 && v->elem_type != GgufType::kBool) {
    // Fixed-size numbers: nothing to check per element.
    if (auto s = c.Need(n * scalar, what + " elements"); !s.ok()) return s;
    c.Skip(n * scalar);
  } else {
    GgufValue element;  // reused: scalars and views only, never materialised arrays
    for (uint64_t k = 0; k < n; ++k) {
      if (v->elem_type == GgufType::kString) {
        if (auto s = c.SkipString(what); !s.ok()) return s;
        continue;
      }
      if (auto s = ParseValue(c, v->elem_type, depth + 1, what, &element); !s.ok()) return s;
    }
  }
  v->array_size = n;
  v->array_bytes = std::string_view(reinterpret_cast<const char*>(begin),
                                    static_cast<size_t>(c.here() - begin));
  return absl::OkStatus();
}

absl::Status ParseValue(ByteCursor& c, GgufType type, int depth, const std::string& what,
                        GgufValue* v) {
  v->type = type;
  switch (type) {
    case GgufType::kU8: return ReadScalarInto<uint8_t>(c, what, v);
    case GgufType::kI8: return ReadScalarInto<int8_t>(c, what, v);
    case GgufType::kU16: return ReadScalarInto<uint16_t>(c, what, v);
    case GgufType::kI16: return ReadScalarInto<int16_t>(c, what, v);
    case GgufType::kU32: return ReadScalarInto<uint32_t>(c, what, v);
    case GgufType::kI32: return ReadScalarInto<int32_t>(c, what, v);
    case GgufType::kU64: return ReadScalarInto<uint64_t>(c, what, v);
    case GgufType::kI64: return ReadScalarInto<int64_t>(c, what, v);
    case GgufType::kF32: return ReadScalarInto<float>(c, what, v);
    case GgufType::kF64: return ReadScalarInto<double>(c, what, v);
    case GgufType::kBool: {
      uint8_t b;
      if (auto s = c.Read(&b, what); !s.ok()) return s;
      if (b > 1) return c.Error(absl::StrFormat("%s: bool value %d is not 0 or 1", what, b));
      v->b = b != 0;
      v->i = b;
      return absl::OkStatus();
    }
    case GgufType::kString: return c.ReadString(&v->s, what);
    case GgufType::kArray: return ParseArrayView(c, depth, what, v);
  }
  return c.Error(absl::StrFormat("%s: unknown value type %d", what, static_cast<int>(type)));
}

const char* GgmlTypeName(int32_t id) {
  static const char* const kNames[] = {
      "F32", "F16", "Q4_0", "Q4_1", "Q4_2(removed)", "Q4_3(removed)", "Q5_0", "Q5_1",
      "Q8_0", "Q8_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS",
      "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64",
      "F64", "IQ1_M", "BF16", "Q4_0_4_4(removed)", "Q4_0_4_8(removed)", "Q4_0_8_8(removed)",
      "TQ1_0", "TQ2_0"};
  if (id >= 0 && id < static_cast<int32_t>(sizeof(kNames) / sizeof(kNames[0]))) {
    return kNames[id];
  }
  return "unknown";
}

bool DTypeFromGgml(int32_t id, DType* out) {
  switch (id) {
    case kGgmlF32: *out = DType::kF32; return true;
    case kGgmlF16: *out = DType::kF16; return true;
    case kGgmlBF16: *out = DType::kBF16; return true;
    case kGgmlQ8_0: *out = DType::kQ8_0; return true;
    case kGgmlQ4_0: *out = DType::kQ4_0; return true;
    case kGgmlQ4_1: *out = DType::kQ4_1; return true;
    default: return false;
  }
}

// Reads one tensor info and checks everything that does not need the data section.
absl::Status ParseTensorInfo(ByteCursor& c, const std::string& path, GgufTensorInfo* t) {
  if (auto s = c.ReadString(&t->name, "tensor name"); !s.ok()) return s;
  const std::string name = QuoteUntrusted(t->name);  // as messages echo it
  uint32_t n_dims;
  if (auto s = c.Read(&n_dims, "tensor n_dims of " + name); !s.ok()) return s;
  if (n_dims == 0 || n_dims > 4) {
    return c.Error(absl::StrFormat("tensor %s has n_dims %d (must be 1..4)", name, n_dims));
  }
  t->ne.resize(n_dims);
  int64_t elems = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    if (auto s = c.Read(&t->ne[d], "tensor dims of " + name); !s.ok()) return s;
    if (t->ne[d] <= 0 || t->ne[d] > kMaxDim) {
      return c.Error(absl::StrFormat("tensor %s has dimension ne[%d] = %d", name, d,
                                     t->ne[d]));
    }
    if (elems > kMaxElems / t->ne[d]) {
      return c.Error(absl::StrFormat("tensor %s: element count overflows", name));
    }
    elems *= t->ne[d];
  }
  t->shape.assign(t->ne.rbegin(), t->ne.rend());
  if (auto s = c.Read(&t->ggml_type, "tensor type of " + name); !s.ok()) return s;
  if (auto s = c.Read(&t->offset, "tensor offset of " + name); !s.ok()) return s;
  if (!DTypeFromGgml(t->ggml_type, &t->dtype)) {
    return absl::UnimplementedError(absl::StrFormat(
        "%s: tensor %s has ggml type %d (%s); supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1",
        path, name, t->ggml_type, GgmlTypeName(t->ggml_type)));
  }
  const std::optional<size_t> row = DTypeRowBytes(t->dtype, t->ne[0]);
  if (!row) {
    return c.Error(absl::StrFormat("tensor %s: row length %d is not a multiple of the %s "
                                   "block size", name, t->ne[0], DTypeName(t->dtype)));
  }
  size_t nbytes;
  if (__builtin_mul_overflow(*row, static_cast<size_t>(elems / t->ne[0]), &nbytes)) {
    return c.Error(absl::StrFormat("tensor %s: byte size overflows", name));
  }
  t->nbytes = nbytes;
  return absl::OkStatus();
}

}  // namespace

const char* GgufTypeName(GgufType t) {
  static const char* const kNames[] = {"u8",  "i8",     "u16",   "i16", "u32", "i32", "f32",
                                       "bool", "string", "array", "u64", "i64", "f64"};
  const int i = static_cast<int>(t);
  return (i >= 0 && i <= 12) ? kNames[i] : "unknown";
}

int32_t GgmlTypeId(DType t) {
  switch (t) {
    case DType::kF32: return kGgmlF32;
    case DType::kF16: return kGgmlF16;
    case DType::kBF16: return kGgmlBF16;
    case DType::kQ8_0: return kGgmlQ8_0;
    case DType::kQ4_0: return kGgmlQ4_0;
    case DType::kQ4_1: return kGgmlQ4_1;
  }
  return -1;
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::kU8: case GgufType::kI8: case GgufType::kU16: case GgufType::kI16:
    case GgufType::kU32: case GgufType::kI32: case GgufType::kU64: case GgufType::kI64:
      return true;
    default:
      return false;
  }
}

absl::StatusOr<std::vector<GgufValue>> DecodeGgufArray(const GgufValue& array) {
  if (array.type != GgufType::kArray) {
    return absl::InvalidArgumentError(
        absl::StrFormat("a %s value is not an array", GgufTypeName(array.type)));
  }
  if (!array.items.empty()) return array.items;
  static const std::string kWhere = "array";
  ByteCursor c(reinterpret_cast<const uint8_t*>(array.array_bytes.data()),
               array.array_bytes.size(), kWhere);
  std::vector<GgufValue> out(array.array_size);
  for (GgufValue& v : out) {
    if (auto s = ParseValue(c, array.elem_type, 1, "element", &v); !s.ok()) return s;
  }
  return out;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path,
                                                         const FileReadPolicy& policy) {
  auto file = MappedFile::Open(path, policy);
  if (!file.ok()) return file.status();
  return Parse(*std::move(file));
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Parse(std::unique_ptr<MappedFile> file) {
  std::unique_ptr<GgufFile> g(new GgufFile(std::move(file)));
  if (auto s = g->ParseAll(); !s.ok()) return s;
  return g;
}

absl::Status GgufFile::ParseAll() {
  const std::string& p = file_->path();
  ByteCursor c(file_->data(), file_->size(), p);
  uint32_t magic;
  if (auto s = c.Read(&magic, "header magic"); !s.ok()) return s;
  if (magic != kGgufMagic) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: not a GGUF file (magic 0x%08x, expected 0x%08x \"GGUF\")", p,
                        magic, kGgufMagic));
  }
  if (auto s = c.Read(&version_, "header version"); !s.ok()) return s;
  if (version_ != 2 && version_ != 3) {
    return absl::UnimplementedError(absl::StrFormat(
        "%s: unsupported GGUF version %d (supported: 2, 3)", p, version_));
  }
  uint64_t n_tensors, n_kv;
  if (auto s = c.Read(&n_tensors, "header tensor count"); !s.ok()) return s;
  if (auto s = c.Read(&n_kv, "header metadata count"); !s.ok()) return s;
  if (n_kv > c.remaining() / 13) {
    return c.Error(absl::StrFormat("metadata count %d is larger than the file can hold", n_kv));
  }
  if (n_kv > kMaxGgufMetadataKeys) {
    return c.Error(absl::StrFormat("metadata count %d is above the limit of %d keys", n_kv,
                                   kMaxGgufMetadataKeys));
  }
  if (n_tensors > c.remaining() / 32) {
    return c.Error(absl::StrFormat("tensor count %d is larger than the file can hold",
                                   n_tensors));
  }
  if (n_tensors > kMaxGgufTensors) {
    return c.Error(absl::StrFormat("tensor count %d is above the limit of %d tensors",
                                   n_tensors, kMaxGgufTensors));
  }
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key;
    if (auto s = c.ReadString(&key, "metadata key"); !s.ok()) return s;
    const std::string quoted = QuoteUntrusted(key);
    int32_t type;
    if (auto s = c.Read(&type, "value type of " + quoted); !s.ok()) return s;
    if (!ValidType(type)) {
      return c.Error(absl::StrFormat("key %s has unknown value type %d", quoted, type));
    }
    GgufValue v;
    if (auto s = ParseValue(c, static_cast<GgufType>(type), 0, "value of " + quoted, &v);
        !s.ok()) {
      return s;
    }
    if (!kv_.emplace(std::move(key), std::move(v)).second) {
      return c.Error(absl::StrFormat("duplicate metadata key %s", quoted));
    }
  }
  if (const GgufValue* a = Find("general.alignment")) {
    if (!a->is_integer() || a->i <= 0 || a->i > (1 << 30) || (a->i & (a->i - 1)) != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: general.alignment must be a positive power of two, got %d", p, a->i));
    }
    alignment_ = static_cast<uint64_t>(a->i);
  }
  tensors_.resize(n_tensors);
  std::map<std::string_view, size_t> seen;  // views of tensors_[k].name (never resized)
  for (uint64_t k = 0; k < n_tensors; ++k) {
    if (auto s = ParseTensorInfo(c, p, &tensors_[k]); !s.ok()) return s;
    if (!seen.emplace(tensors_[k].name, k).second) {
      return c.Error(absl::StrFormat("duplicate tensor name %s",
                                     QuoteUntrusted(tensors_[k].name)));
    }
  }
  data_offset_ = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  const uint64_t size = file_->size();
  std::vector<const GgufTensorInfo*> by_offset;
  for (const GgufTensorInfo& t : tensors_) {
    if (t.offset % alignment_ != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensor %s offset %d is not a multiple of the alignment %d", p,
          QuoteUntrusted(t.name), t.offset, alignment_));
    }
    if (data_offset_ > size || t.offset > size - data_offset_ ||
        t.nbytes > size - data_offset_ - t.offset) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensor %s (offset %d, %d bytes) runs past the end of the file (%d bytes, "
          "data section at %d)", p, QuoteUntrusted(t.name), t.offset, t.nbytes, size,
          data_offset_));
    }
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t k = 1; k < by_offset.size(); ++k) {
    if (by_offset[k - 1]->offset + by_offset[k - 1]->nbytes > by_offset[k]->offset) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensors %s and %s overlap", p, QuoteUntrusted(by_offset[k - 1]->name),
          QuoteUntrusted(by_offset[k]->name)));
    }
  }
  return absl::OkStatus();
}

}  // namespace loom
