#include "models/weights/hf_tensor_names.h"

#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace loom {
namespace {

struct Pair {
  const char* hf;    // suffix after "model.layers.N." (layer) or the whole name
  const char* gguf;  // suffix after "blk.N." (layer) or the whole name
};
constexpr Pair kGlobal[] = {{"model.embed_tokens.weight", "token_embd.weight"},
                            {"model.norm.weight", "output_norm.weight"},
                            {"lm_head.weight", "output.weight"}};
constexpr Pair kLayer[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};

// Splits "<prefix>N.<rest>" into N and rest; false if the shape does not match.
bool SplitLayer(const std::string& name, const std::string& prefix, int* layer,
                std::string* rest) {
  if (!absl::StartsWith(name, prefix)) return false;
  const size_t dot = name.find('.', prefix.size());
  if (dot == std::string::npos) return false;
  const std::string num = name.substr(prefix.size(), dot - prefix.size());
  if (num.empty() || num.size() > 6 || num.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  if (!absl::SimpleAtoi(num, layer)) return false;
  *rest = name.substr(dot + 1);
  return true;
}

std::optional<std::string> Map(const std::string& name, bool to_gguf) {
  for (const Pair& p : kGlobal) {
    if (name == (to_gguf ? p.hf : p.gguf)) return std::string(to_gguf ? p.gguf : p.hf);
  }
  int layer;
  std::string rest;
  if (!SplitLayer(name, to_gguf ? "model.layers." : "blk.", &layer, &rest)) return std::nullopt;
  for (const Pair& p : kLayer) {
    if (rest == (to_gguf ? p.hf : p.gguf)) {
      return to_gguf ? absl::StrCat("blk.", layer, ".", p.gguf)
                     : absl::StrCat("model.layers.", layer, ".", p.hf);
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> HfToGgufName(const std::string& hf) { return Map(hf, true); }
std::optional<std::string> GgufToHfName(const std::string& gguf) { return Map(gguf, false); }

}  // namespace loom
