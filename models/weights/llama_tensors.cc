#include "models/weights/llama_tensors.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace loom {

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

std::vector<ExpectedTensor> LlamaTensorList(const LlamaConfig& c) {
  const int64_t h = c.hidden, v = c.vocab_size, ff = c.intermediate;
  const int64_t q = int64_t{c.n_heads} * c.head_dim, kv = int64_t{c.n_kv_heads} * c.head_dim;
  std::vector<ExpectedTensor> out = {
      {"token_embd.weight", {v, h}, true},
      {"output_norm.weight", {h}, true},
      {"output.weight", {v, h}, !c.tied_embeddings},
  };
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string b = absl::StrCat("blk.", l, ".");
    out.push_back({b + "attn_norm.weight", {h}, true});
    out.push_back({b + "attn_q.weight", {q, h}, true});
    out.push_back({b + "attn_k.weight", {kv, h}, true});
    out.push_back({b + "attn_v.weight", {kv, h}, true});
    out.push_back({b + "attn_output.weight", {h, q}, true});
    out.push_back({b + "ffn_norm.weight", {h}, true});
    out.push_back({b + "ffn_gate.weight", {ff, h}, true});
    out.push_back({b + "ffn_up.weight", {ff, h}, true});
    out.push_back({b + "ffn_down.weight", {h, ff}, true});
  }
  return out;
}

absl::Status CheckLlamaTensors(const std::string& path, const LlamaConfig& c,
                               const std::map<std::string, WeightTensor>& tensors) {
  for (const ExpectedTensor& e : LlamaTensorList(c)) {
    auto it = tensors.find(e.name);
    if (it == tensors.end()) {
      if (!e.required) continue;
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: missing required tensor '%s' (expected shape %s)", path, e.name,
                          ShapeString(e.shape)));
    }
    if (it->second.shape != e.shape) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensor '%s' has shape %s, but the config implies %s", path, e.name,
          ShapeString(it->second.shape), ShapeString(e.shape)));
    }
  }
  return absl::OkStatus();
}

}  // namespace loom
