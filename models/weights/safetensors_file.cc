#include "models/weights/safetensors_file.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "models/weights/json_file.h"
#include "models/weights/untrusted_text.h"
#include "nlohmann/json.hpp"

namespace loom {
namespace {

constexpr int64_t kMaxElems = int64_t{1} << 48;
// {name: {"shape": [...], ...}, "__metadata__": {...}} nests 3 deep.
constexpr int kMaxHeaderDepth = 4;

}  // namespace

size_t SafetensorsDTypeSize(const std::string& d) {
  if (d == "BOOL" || d == "U8" || d == "I8" || d == "F8_E4M3" || d == "F8_E5M2") return 1;
  if (d == "U16" || d == "I16" || d == "F16" || d == "BF16") return 2;
  if (d == "U32" || d == "I32" || d == "F32") return 4;
  if (d == "U64" || d == "I64" || d == "F64") return 8;
  return 0;
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(
    const std::string& path, const SafetensorsReadOptions& options) {
  auto f = MappedFile::Open(path, options.files);
  if (!f.ok()) return f.status();
  std::unique_ptr<SafetensorsFile> s(new SafetensorsFile(*std::move(f)));
  if (absl::Status st = s->Parse(options.max_header_bytes); !st.ok()) return st;
  return s;
}

absl::Status SafetensorsFile::Parse(uint64_t max_header_bytes) {
  const std::string& p = file_->path();
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: invalid safetensors: %s", p, what));
  };
  const size_t size = file_->size();
  if (size < 8) return bad(absl::StrFormat("file of %d bytes has no header length", size));
  uint64_t n;
  std::memcpy(&n, file_->data(), 8);
  if (n > size - 8) {
    return bad(absl::StrFormat("header length %d runs past the end of the file (%d bytes)", n,
                               size));
  }
  if (n > max_header_bytes) {
    return bad(absl::StrFormat("header length %d is over the %d byte limit", n,
                               max_header_bytes));
  }
  const char* h = reinterpret_cast<const char*>(file_->data() + 8);
  if (JsonNestingDepth(absl::string_view(h, n)) > kMaxHeaderDepth) {
    return bad(absl::StrFormat("header nests deeper than %d", kMaxHeaderDepth));
  }
  const nlohmann::json j = nlohmann::json::parse(h, h + n, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return bad("header is not valid JSON");
  if (!j.is_object()) return bad("header is not a JSON object");
  const uint8_t* data = file_->data() + 8 + n;
  const uint64_t data_size = size - 8 - n;
  std::vector<std::pair<uint64_t, const SafetensorsTensor*>> spans;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& e = it.value();
    if (name == "__metadata__") {
      if (!e.is_object()) return bad("__metadata__ is not an object");
      for (auto m = e.begin(); m != e.end(); ++m) {
        if (!m.value().is_string()) {
          return bad("__metadata__ value " + QuoteUntrusted(m.key()) + " is not a string");
        }
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    auto bad_t = [&](const std::string& what) {
      return bad("tensor " + QuoteUntrusted(name) + ": " + what);
    };
    if (!e.is_object()) return bad_t("entry is not an object");
    auto dt = e.find("dtype");
    auto sh = e.find("shape");
    auto off = e.find("data_offsets");
    if (dt == e.end() || !dt->is_string()) return bad_t("missing dtype");
    if (sh == e.end() || !sh->is_array()) return bad_t("missing shape");
    if (off == e.end() || !off->is_array() || off->size() != 2 ||
        !(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned()) {
      return bad_t("data_offsets must be two non-negative integers");
    }
    SafetensorsTensor t;
    t.name = name;
    t.dtype_name = dt->get<std::string>();
    const size_t esize = SafetensorsDTypeSize(t.dtype_name);
    if (esize == 0) {
      return absl::UnimplementedError(absl::StrFormat("%s: tensor %s has unknown dtype %s", p,
                                                      QuoteUntrusted(name),
                                                      QuoteUntrusted(t.dtype_name)));
    }
    if (t.dtype_name == "F32") t.dtype = DType::kF32;
    if (t.dtype_name == "F16") t.dtype = DType::kF16;
    if (t.dtype_name == "BF16") t.dtype = DType::kBF16;
    int64_t elems = 1;
    for (const nlohmann::json& d : *sh) {
      if (!d.is_number_unsigned()) return bad_t("shape entries must be non-negative integers");
      const uint64_t v = d.get<uint64_t>();
      if (v > static_cast<uint64_t>(kMaxElems) || (v > 0 && elems > kMaxElems / static_cast<int64_t>(v))) {
        return bad_t("element count overflows");
      }
      elems *= static_cast<int64_t>(v);
      t.shape.push_back(static_cast<int64_t>(v));
    }
    const uint64_t begin = (*off)[0].get<uint64_t>(), end = (*off)[1].get<uint64_t>();
    if (begin > end || end > data_size) {
      return bad_t(absl::StrFormat("data_offsets [%d, %d] are outside the %d data bytes", begin,
                                   end, data_size));
    }
    if (end - begin != static_cast<uint64_t>(elems) * esize) {
      return bad_t(absl::StrFormat("data_offsets span %d bytes but shape x %s needs %d",
                                   end - begin, t.dtype_name, elems * esize));
    }
    t.data = data + begin;
    t.nbytes = end - begin;
    auto [pos, inserted] = tensors_.emplace(name, std::move(t));
    if (!inserted) return bad_t("duplicate name");
    if (pos->second.nbytes > 0) spans.emplace_back(begin, &pos->second);
  }
  std::sort(spans.begin(), spans.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t k = 1; k < spans.size(); ++k) {
    if (spans[k - 1].first + spans[k - 1].second->nbytes > spans[k].first) {
      return bad(absl::StrFormat("tensors %s and %s overlap",
                                 QuoteUntrusted(spans[k - 1].second->name),
                                 QuoteUntrusted(spans[k].second->name)));
    }
  }
  return absl::OkStatus();
}

}  // namespace loom
