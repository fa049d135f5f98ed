#include "models/weights/hf_exporter.h"

#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_format.h"
#include "absl/strings/match.h"
#include "models/weights/hf_config.h"
#include "models/weights/hf_tensor_names.h"
#include "models/weights/hf_tokenizer.h"
#include "models/weights/llama_tensors.h"
#include "models/weights/qk_permutation.h"
#include "models/weights/safetensors_writer.h"

namespace loom {
namespace {

const char* SafetensorsDType(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    default: return "BF16";
  }
}

const char* TorchDType(DType t) {
  switch (t) {
    case DType::kF32: return "float32";
    case DType::kF16: return "float16";
    default: return "bfloat16";
  }
}

// Dequantizes `w` row by row (rows un-permuted when `permute_head_dim` > 0) into `dtype`.
SafetensorsEntry Convert(const WeightTensor& w, const std::string& hf_name, DType dtype,
                         int64_t permute_head_dim) {
  const int64_t rows = w.rows(), cols = w.cols();
  const size_t esize = dtype == DType::kF32 ? 4 : 2;
  SafetensorsEntry e{hf_name, SafetensorsDType(dtype), w.shape, std::string()};
  e.bytes.resize(static_cast<size_t>(rows * cols) * esize);
  std::vector<float> row(cols);
  std::vector<uint16_t> half(cols);
  for (int64_t r = 0; r < rows; ++r) {
    DequantizeRow(w.dtype, w.data + r * w.row_bytes(), row.data(), cols);
    const int64_t dst_row = permute_head_dim > 0 ? HfRowOfGgufRow(r, permute_head_dim) : r;
    char* dst = &e.bytes[static_cast<size_t>(dst_row * cols) * esize];
    if (dtype == DType::kF32) {
      std::memcpy(dst, row.data(), cols * 4);
      continue;
    }
    for (int64_t c = 0; c < cols; ++c) {
      half[c] = dtype == DType::kF16 ? Fp32ToFp16(row[c]) : Fp32ToBf16(row[c]);
    }
    std::memcpy(dst, half.data(), cols * 2);
  }
  return e;
}

absl::Status WriteJson(const std::string& path, const nlohmann::ordered_json& j) {
  return WriteStringToFile(
      path, j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n");
}

}  // namespace

absl::Status ExportHfDirectory(const ModelSource& src, const std::string& out_dir, DType dtype,
                               int n_shards) {
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "HF export: dtype %s is not one of F32, F16, BF16", DTypeName(dtype)));
  }
  if (n_shards < 1) {
    return absl::InvalidArgumentError(absl::StrFormat("HF export: n_shards %d < 1", n_shards));
  }
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrFormat("HF export: cannot create %s: %s", out_dir, ec.message()));
  }
  const LlamaConfig& c = src.config();
  if (auto s = CheckLlamaTensors(src.path(), c, src.tensors()); !s.ok()) return s;
  const bool permute = c.rope_layout == RopeLayout::kAdjacentPairs;

  // Tensors in model order with their output sizes, then contiguous shards by size.
  std::vector<const WeightTensor*> list;
  uint64_t total = 0;
  const size_t esize = dtype == DType::kF32 ? 4 : 2;
  for (const ExpectedTensor& e : LlamaTensorList(c)) {
    auto it = src.tensors().find(e.name);
    if (it == src.tensors().end()) continue;
    list.push_back(&it->second);
    total += static_cast<uint64_t>(it->second.rows() * it->second.cols()) * esize;
  }
  std::vector<std::vector<const WeightTensor*>> shards;
  uint64_t before = 0;
  int last = -1;
  for (const WeightTensor* w : list) {
    const int k = static_cast<int>(before * n_shards / total);
    if (k != last) shards.emplace_back();
    last = k;
    shards.back().push_back(w);
    before += static_cast<uint64_t>(w->rows() * w->cols()) * esize;
  }
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  for (size_t k = 0; k < shards.size(); ++k) {
    const std::string file =
        shards.size() == 1 ? "model.safetensors"
                           : absl::StrFormat("model-%05d-of-%05d.safetensors", k + 1,
                                             shards.size());
    std::vector<SafetensorsEntry> entries;
    for (const WeightTensor* w : shards[k]) {
      const std::string hf = *GgufToHfName(w->name);  // every listed name has an HF name
      const bool qk = absl::EndsWith(w->name, ".attn_q.weight") ||
                      absl::EndsWith(w->name, ".attn_k.weight");
      entries.push_back(Convert(*w, hf, dtype, permute && qk ? c.head_dim : 0));
      weight_map[hf] = file;
    }
    if (auto s = WriteSafetensors(out_dir + "/" + file, entries, {{"format", "pt"}}); !s.ok()) {
      return s;
    }
  }
  if (shards.size() > 1) {
    nlohmann::ordered_json index;
    index["metadata"] = {{"total_size", total}};
    index["weight_map"] = weight_map;
    if (auto s = WriteJson(out_dir + "/model.safetensors.index.json", index); !s.ok()) return s;
  }

  const Vocabulary& v = src.vocabulary();
  if (auto s = WriteJson(out_dir + "/config.json",
                         HfJsonFromLlamaConfig(c, TorchDType(dtype), v.bos_id, v.eos_id));
      !s.ok()) {
    return s;
  }
  nlohmann::ordered_json gen = nlohmann::ordered_json::object();
  if (v.bos_id >= 0) gen["bos_token_id"] = v.bos_id;
  if (v.eos_id >= 0) gen["eos_token_id"] = v.eos_id;
  if (auto s = WriteJson(out_dir + "/generation_config.json", gen); !s.ok()) return s;
  if (!v.sentencepiece_model.empty()) {
    if (auto s = WriteStringToFile(out_dir + "/tokenizer.model", v.sentencepiece_model); !s.ok()) {
      return s;
    }
  } else {
    auto tok = TokenizerJsonFromVocabulary(v);
    if (!tok.ok()) return tok.status();
    if (auto s = WriteJson(out_dir + "/tokenizer.json", *tok); !s.ok()) return s;
  }
  return WriteJson(out_dir + "/tokenizer_config.json",
                   TokenizerConfigFromVocabulary(v, c.max_context));
}

}  // namespace loom
