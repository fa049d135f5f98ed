// Tokenizer data as stored in a model file (GGUF tokenizer.ggml.* or tokenizer.json),
// before any tokenizer object is built from it.
#ifndef LOOM_MODELS_TOKENIZER_VOCABULARY_H_
#define LOOM_MODELS_TOKENIZER_VOCABULARY_H_

#include <cstdint>
#include <string>
#include <vector>

namespace loom {

// GGUF token types (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  kUndefined = 0, kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4,
  kUnused = 5, kByte = 6,
};

struct Vocabulary {
  // "gpt2" (byte-level BPE) or "llama" (SentencePiece).
  std::string model;
  // Pre-tokenizer name for byte-level BPE ("smollm", "gpt2", "llama3", ...).
  std::string pre;
  // tokens[id]: the token's text in the model's encoding (GPT-2 byte-to-unicode for "gpt2").
  std::vector<std::string> tokens;
  std::vector<TokenType> token_types;  // same length as tokens (kNormal if unknown)
  std::vector<float> scores;           // SentencePiece scores; may be empty
  // BPE merges in rank order, each "left right" (one space between the two parts).
  std::vector<std::string> merges;
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  bool add_bos = false;
  bool add_eos = false;
  std::string chat_template;  // Jinja source, informational; Loom renders ChatML itself
  // Serialized SentencePiece ModelProto, when the source is a tokenizer.model file.
  std::string sentencepiece_model;
};

}  // namespace loom

#endif  // LOOM_MODELS_TOKENIZER_VOCABULARY_H_
