#include "models/weights/tiny_llama_gguf.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace loom {
namespace {

uint32_t Hash(const std::string& s, uint32_t seed) {
  uint32_t h = 2166136261u ^ seed;
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return h;
}

struct Lcg {
  uint32_t s;
  uint32_t Next() { return s = s * 1664525u + 1013904223u; }
  float Uniform() { return (Next() >> 8) * (2.0f / 16777216.0f) - 1.0f; }  // [-1, 1)
};

}  // namespace

LlamaConfig TinyLlamaConfig(const TinyLlamaOptions& o) {
  LlamaConfig c;
  c.name = "tiny";
  c.vocab_size = o.vocab;
  c.hidden = o.hidden;
  c.intermediate = o.intermediate;
  c.n_layers = o.n_layers;
  c.n_heads = o.n_heads;
  c.n_kv_heads = o.n_kv_heads;
  c.head_dim = o.head_dim;
  c.rms_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  c.max_context = 256;
  c.tied_embeddings = o.tied;
  c.rope_layout = RopeLayout::kAdjacentPairs;
  return c;
}

std::string TinyTensorBytes(const std::string& name, DType dtype,
                            const std::vector<int64_t>& shape, uint32_t seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  Lcg rng{Hash(name, seed)};
  std::string out;
  switch (dtype) {
    case DType::kF32:
      for (int64_t k = 0; k < n; ++k) {
        const float f = rng.Uniform();
        out.append(reinterpret_cast<const char*>(&f), 4);
      }
      return out;
    case DType::kF16:
    case DType::kBF16:
      for (int64_t k = 0; k < n; ++k) {
        const float f = rng.Uniform();
        const uint16_t h = dtype == DType::kF16 ? Fp32ToFp16(f) : Fp32ToBf16(f);
        out.append(reinterpret_cast<const char*>(&h), 2);
      }
      return out;
    default: {  // quantized: scale(s) then random quants
      const int block_bytes = DTypeBlockBytes(dtype);
      const int64_t blocks = n / kQuantBlock;
      for (int64_t b = 0; b < blocks; ++b) {
        std::string blk(block_bytes, '\0');
        const uint16_t d = Fp32ToFp16(0.01f + 0.01f * (rng.Next() % 8));
        std::memcpy(&blk[0], &d, 2);
        int start = 2;
        if (dtype == DType::kQ4_1) {
          const uint16_t m = Fp32ToFp16(-0.05f * (rng.Next() % 4));
          std::memcpy(&blk[2], &m, 2);
          start = 4;
        }
        for (int k = start; k < block_bytes; ++k) blk[k] = static_cast<char>(rng.Next() >> 24);
        out += blk;
      }
      return out;
    }
  }
}

GgufWriter BuildTinyLlamaGguf(const TinyLlamaOptions& o) {
  GgufWriter w(o.version);
  auto key = [&](const std::string& k) { return o.omit.count(k) == 0; };
  if (key("general.architecture")) w.AddString("general.architecture", "llama");
  if (key("general.name")) w.AddString("general.name", "tiny");
  if (key("llama.context_length")) w.AddU32("llama.context_length", 256);
  if (key("llama.embedding_length")) w.AddU32("llama.embedding_length", o.hidden);
  if (key("llama.feed_forward_length")) w.AddU32("llama.feed_forward_length", o.intermediate);
  if (key("llama.block_count")) w.AddU32("llama.block_count", o.n_layers);
  if (key("llama.attention.head_count")) w.AddU32("llama.attention.head_count", o.n_heads);
  if (key("llama.attention.head_count_kv")) {
    w.AddU32("llama.attention.head_count_kv", o.n_kv_heads);
  }
  if (key("llama.attention.layer_norm_rms_epsilon")) {
    w.AddF32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  }
  if (key("llama.rope.freq_base")) w.AddF32("llama.rope.freq_base", 10000.0f);
  if (key("llama.rope.dimension_count")) w.AddU32("llama.rope.dimension_count", o.head_dim);
  if (key("llama.vocab_size")) w.AddU32("llama.vocab_size", o.vocab);
  if (key("tokenizer.ggml.model")) w.AddString("tokenizer.ggml.model", "gpt2");
  if (key("tokenizer.ggml.pre")) w.AddString("tokenizer.ggml.pre", "smollm");
  std::vector<std::string> tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  std::vector<int32_t> types = {3, 3, 3};
  for (int k = 3; k < o.vocab; ++k) {
    tokens.push_back(absl::StrCat("t", k));
    types.push_back(1);
  }
  if (key("tokenizer.ggml.tokens")) w.AddStringArray("tokenizer.ggml.tokens", tokens);
  if (key("tokenizer.ggml.token_type")) w.AddI32Array("tokenizer.ggml.token_type", types);
  if (key("tokenizer.ggml.merges")) w.AddStringArray("tokenizer.ggml.merges", {"t 3", "t 4"});
  if (key("tokenizer.ggml.bos_token_id")) w.AddU32("tokenizer.ggml.bos_token_id", 1);
  if (key("tokenizer.ggml.eos_token_id")) w.AddU32("tokenizer.ggml.eos_token_id", 2);
  if (key("tokenizer.ggml.add_bos_token")) w.AddBool("tokenizer.ggml.add_bos_token", false);
  if (key("tokenizer.chat_template")) w.AddString("tokenizer.chat_template", "tmpl");

  LlamaConfig c = TinyLlamaConfig(o);
  c.tied_embeddings = o.tied;
  const std::vector<int64_t> v_h = {o.vocab, o.hidden};
  const int64_t q = int64_t{o.n_heads} * o.head_dim, kv = int64_t{o.n_kv_heads} * o.head_dim;
  std::vector<std::pair<std::string, std::vector<int64_t>>> list = {
      {"token_embd.weight", v_h}, {"output_norm.weight", {o.hidden}}};
  if (!o.tied) list.push_back({"output.weight", v_h});
  for (int l = 0; l < o.n_layers; ++l) {
    const std::string b = absl::StrCat("blk.", l, ".");
    list.push_back({b + "attn_norm.weight", {o.hidden}});
    list.push_back({b + "attn_q.weight", {q, o.hidden}});
    list.push_back({b + "attn_k.weight", {kv, o.hidden}});
    list.push_back({b + "attn_v.weight", {kv, o.hidden}});
    list.push_back({b + "attn_output.weight", {o.hidden, q}});
    list.push_back({b + "ffn_norm.weight", {o.hidden}});
    list.push_back({b + "ffn_gate.weight", {o.intermediate, o.hidden}});
    list.push_back({b + "ffn_up.weight", {o.intermediate, o.hidden}});
    list.push_back({b + "ffn_down.weight", {o.hidden, o.intermediate}});
  }
  for (auto& [name, shape] : list) {
    if (o.omit.count(name)) continue;
    if (auto it = o.reshape.find(name); it != o.reshape.end()) shape = it->second;
    const DType dt = shape.size() == 1 ? DType::kF32 : o.matrix_dtype;
    // Cannot fail: bytes are generated for exactly this shape.
    (void)w.AddTensor(name, dt, shape, TinyTensorBytes(name, dt, shape, o.seed));
  }
  return w;
}

}  // namespace loom
