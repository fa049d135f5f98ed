// Test data: a tiny, valid Llama GGUF built in memory with deterministic weights, plus
// knobs to omit keys/tensors or change shapes for hostile-input tests.
#ifndef LOOM_MODELS_WEIGHTS_TINY_LLAMA_GGUF_H_
#define LOOM_MODELS_WEIGHTS_TINY_LLAMA_GGUF_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "models/model_config.h"
#include "models/weights/gguf_writer.h"

namespace loom {

struct TinyLlamaOptions {
  uint32_t version = 3;
  int vocab = 40, hidden = 64, intermediate = 96, n_layers = 2, n_heads = 4, n_kv_heads = 2;
  int head_dim = 16;
  bool tied = true;
  DType matrix_dtype = DType::kF32;  // projections; embeddings use the same type
  uint32_t seed = 1;
  std::set<std::string> omit;                           // metadata keys or tensor names
  std::map<std::string, std::vector<int64_t>> reshape;  // tensor -> row-major shape
};

// The config a reader should produce for `o` (rope_layout kAdjacentPairs).
LlamaConfig TinyLlamaConfig(const TinyLlamaOptions& o);

// Deterministic bytes of a tensor of `dtype` and row-major `shape` (seeded by name+seed).
// Quantized blocks get small positive scales so every value is finite.
std::string TinyTensorBytes(const std::string& name, DType dtype,
                            const std::vector<int64_t>& shape, uint32_t seed);

// Tokens: 0 "<|endoftext|>", 1 "<|im_start|>", 2 "<|im_end|>" (control), then "t3", ...
// merges: "t 3", "t 4"; bos 1, eos 2, add_bos false, chat template "tmpl".
GgufWriter BuildTinyLlamaGguf(const TinyLlamaOptions& o);

}  // namespace loom

#endif  // LOOM_MODELS_WEIGHTS_TINY_LLAMA_GGUF_H_
