#include "models/weights/gguf_reader.h"

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "models/weights/llama_tensors.h"

namespace loom {
namespace {

// Reads an optional integer key into *out (int32 range); missing keeps the default.
absl::Status OptionalInt(const GgufFile& f, const std::string& key, int* out) {
  if (!f.Has(key)) return absl::OkStatus();
  auto v = f.GetInt32(key);
  if (!v.ok()) return v.status();
  *out = *v;
  return absl::OkStatus();
}

absl::Status RequiredInt(const GgufFile& f, const std::string& key, int* out) {
  auto v = f.GetInt32(key);
  if (!v.ok()) return v.status();
  *out = *v;
  return absl::OkStatus();
}

absl::Status OptionalFloat(const GgufFile& f, const std::string& key, float* out) {
  if (!f.Has(key)) return absl::OkStatus();
  auto v = f.GetFloat(key);
  if (!v.ok()) return v.status();
  *out = static_cast<float>(*v);
  return absl::OkStatus();
}

absl::Status OptionalTokenId(const GgufFile& f, const std::string& key, size_t n_tokens,
                             int32_t* out) {
  if (!f.Has(key)) return absl::OkStatus();
  auto v = f.GetInt(key);
  if (!v.ok()) return v.status();
  if (*v < 0 || *v >= static_cast<int64_t>(n_tokens)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %s = %d is outside the vocabulary (%d tokens)", f.path(), key, *v, n_tokens));
  }
  *out = static_cast<int32_t>(*v);
  return absl::OkStatus();
}

absl::Status OptionalBool(const GgufFile& f, const std::string& key, bool* out) {
  if (!f.Has(key)) return absl::OkStatus();
  auto v = f.GetBool(key);
  if (!v.ok()) return v.status();
  *out = *v;
  return absl::OkStatus();
}

#define LOOM_RETURN_IF_ERROR(expr) \
  do {                             \
    absl::Status _s = (expr);      \
    if (!_s.ok()) return _s;       \
  } while (0)

}  // namespace

absl::StatusOr<LlamaConfig> LlamaConfigFromGguf(const GgufFile& f) {
  auto arch = f.GetString("general.architecture");
  if (!arch.ok()) return arch.status();
  if (*arch != "llama") {
    return absl::UnimplementedError(absl::StrFormat(
        "%s: architecture '%s' is not supported (only 'llama')", f.path(), *arch));
  }
  LlamaConfig c;
  if (f.Has("general.name")) {
    auto n = f.GetString("general.name");
    if (!n.ok()) return n.status();
    c.name = *n;
  }
  LOOM_RETURN_IF_ERROR(RequiredInt(f, "llama.embedding_length", &c.hidden));
  LOOM_RETURN_IF_ERROR(RequiredInt(f, "llama.feed_forward_length", &c.intermediate));
  LOOM_RETURN_IF_ERROR(RequiredInt(f, "llama.block_count", &c.n_layers));
  LOOM_RETURN_IF_ERROR(RequiredInt(f, "llama.attention.head_count", &c.n_heads));
  c.n_kv_heads = c.n_heads;
  LOOM_RETURN_IF_ERROR(OptionalInt(f, "llama.attention.head_count_kv", &c.n_kv_heads));
  LOOM_RETURN_IF_ERROR(OptionalInt(f, "llama.context_length", &c.max_context));
  auto eps = f.GetFloat("llama.attention.layer_norm_rms_epsilon");
  if (!eps.ok()) return eps.status();
  c.rms_eps = static_cast<float>(*eps);
  LOOM_RETURN_IF_ERROR(OptionalFloat(f, "llama.rope.freq_base", &c.rope_theta));
  c.head_dim = c.n_heads > 0 ? c.hidden / c.n_heads : 0;
  LOOM_RETURN_IF_ERROR(OptionalInt(f, "llama.rope.dimension_count", &c.head_dim));
  LOOM_RETURN_IF_ERROR(OptionalInt(f, "llama.attention.key_length", &c.head_dim));
  if (f.Has("llama.vocab_size")) {
    LOOM_RETURN_IF_ERROR(RequiredInt(f, "llama.vocab_size", &c.vocab_size));
  } else if (const GgufValue* t = f.Find("tokenizer.ggml.tokens");
             t != nullptr && t->type == GgufType::kArray) {
    c.vocab_size = static_cast<int>(std::min<size_t>(t->items.size(), 1 << 30));
  }
  c.rope_layout = RopeLayout::kAdjacentPairs;
  return c;
}

absl::StatusOr<Vocabulary> VocabularyFromGguf(const GgufFile& f) {
  Vocabulary v;
  auto model = f.GetString("tokenizer.ggml.model");
  if (!model.ok()) return model.status();
  v.model = *model;
  if (f.Has("tokenizer.ggml.pre")) {
    auto pre = f.GetString("tokenizer.ggml.pre");
    if (!pre.ok()) return pre.status();
    v.pre = *pre;
  }
  auto tokens = f.GetStringArray("tokenizer.ggml.tokens");
  if (!tokens.ok()) return tokens.status();
  v.tokens = *std::move(tokens);
  const size_t n = v.tokens.size();
  if (n == 0) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: empty token list", f.path()));
  }
  auto size_mismatch = [&](const char* key, size_t got) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %s has %d entries but there are %d tokens", f.path(), key, got, n));
  };
  v.token_types.assign(n, TokenType::kNormal);
  if (f.Has("tokenizer.ggml.token_type")) {
    auto types = f.GetIntArray("tokenizer.ggml.token_type");
    if (!types.ok()) return types.status();
    if (types->size() != n) return size_mismatch("tokenizer.ggml.token_type", types->size());
    for (size_t k = 0; k < n; ++k) {
      const int64_t t = (*types)[k];
      if (t < 0 || t > static_cast<int64_t>(TokenType::kByte)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: token %d has unknown token type %d", f.path(), k, t));
      }
      v.token_types[k] = static_cast<TokenType>(t);
    }
  }
  if (f.Has("tokenizer.ggml.scores")) {
    auto scores = f.GetFloatArray("tokenizer.ggml.scores");
    if (!scores.ok()) return scores.status();
    if (scores->size() != n) return size_mismatch("tokenizer.ggml.scores", scores->size());
    v.scores = *std::move(scores);
  }
  if (f.Has("tokenizer.ggml.merges")) {
    auto merges = f.GetStringArray("tokenizer.ggml.merges");
    if (!merges.ok()) return merges.status();
    v.merges = *std::move(merges);
  }
  LOOM_RETURN_IF_ERROR(OptionalTokenId(f, "tokenizer.ggml.bos_token_id", n, &v.bos_id));
  LOOM_RETURN_IF_ERROR(OptionalTokenId(f, "tokenizer.ggml.eos_token_id", n, &v.eos_id));
  LOOM_RETURN_IF_ERROR(OptionalTokenId(f, "tokenizer.ggml.unknown_token_id", n, &v.unk_id));
  LOOM_RETURN_IF_ERROR(OptionalTokenId(f, "tokenizer.ggml.padding_token_id", n, &v.pad_id));
  // llama.cpp's defaults: SentencePiece models add BOS, byte-level BPE ones do not.
  v.add_bos = v.model == "llama";
  LOOM_RETURN_IF_ERROR(OptionalBool(f, "tokenizer.ggml.add_bos_token", &v.add_bos));
  LOOM_RETURN_IF_ERROR(OptionalBool(f, "tokenizer.ggml.add_eos_token", &v.add_eos));
  if (f.Has("tokenizer.chat_template")) {
    auto t = f.GetString("tokenizer.chat_template");
    if (!t.ok()) return t.status();
    v.chat_template = *t;
  }
  return v;
}

absl::StatusOr<std::unique_ptr<ModelSource>> ReadGgufModel(const std::string& path) {
  auto file = GgufFile::Open(path);
  if (!file.ok()) return file.status();
  const GgufFile& f = **file;
  auto config = LlamaConfigFromGguf(f);
  if (!config.ok()) return config.status();
  auto vocab = VocabularyFromGguf(f);
  if (!vocab.ok()) return vocab.status();

  auto src = std::make_unique<ModelSource>();
  src->path_ = path;
  for (const GgufTensorInfo& t : f.tensor_infos()) {
    WeightTensor w;
    w.name = t.name;
    w.dtype = t.dtype;
    w.shape = t.shape;
    w.data = f.TensorData(t);
    w.nbytes = t.nbytes;
    src->tensors_.emplace(t.name, std::move(w));
  }
  config->tied_embeddings = src->tensors_.count("output.weight") == 0;
  if (config->vocab_size != static_cast<int>(vocab->tokens.size())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: llama.vocab_size %d does not match the %d tokens of tokenizer.ggml.tokens", path,
        config->vocab_size, vocab->tokens.size()));
  }
  if (absl::Status s = config->Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: %s", path, s.message()));
  }
  LOOM_RETURN_IF_ERROR(CheckLlamaTensors(path, *config, src->tensors_));
  src->config_ = *std::move(config);
  src->vocab_ = *std::move(vocab);
  src->files_.push_back((*file)->ReleaseFile());
  return src;
}

}  // namespace loom
