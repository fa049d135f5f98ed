// Reads a Llama-architecture GGUF file into a ModelSource: config from llama.* keys,
// vocabulary from tokenizer.ggml.*, tensors under their GGUF names (shapes row-major, data
// memory-mapped in the stored type).
#ifndef LOOM_MODELS_WEIGHTS_GGUF_READER_H_
#define LOOM_MODELS_WEIGHTS_GGUF_READER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "models/model_config.h"
#include "models/tokenizer/vocabulary.h"
#include "models/weights/gguf_file.h"
#include "models/weights/model_source.h"

namespace loom {

// general.architecture must be "llama". head_dim = llama.attention.key_length, else
// llama.rope.dimension_count, else hidden / n_heads. tied_embeddings is filled by
// ReadGgufModel (it depends on the tensors). rope_layout = kAdjacentPairs. Not validated.
absl::StatusOr<LlamaConfig> LlamaConfigFromGguf(const GgufFile& f);

// tokenizer.ggml.{model, pre, tokens, token_type, scores, merges, bos/eos/unknown/padding
// _token_id, add_bos_token, add_eos_token} and tokenizer.chat_template. Token ids must be
// inside the token list; per-token arrays must match its length.
absl::StatusOr<Vocabulary> VocabularyFromGguf(const GgufFile& f);

// The whole model; every problem is a Status naming the file.
absl::StatusOr<std::unique_ptr<ModelSource>> ReadGgufModel(const std::string& path);

}  // namespace loom

#endif  // LOOM_MODELS_WEIGHTS_GGUF_READER_H_
