// Hugging Face tokenizer files <-> Vocabulary.
#ifndef LOOM_MODELS_WEIGHTS_HF_TOKENIZER_H_
#define LOOM_MODELS_WEIGHTS_HF_TOKENIZER_H_

#include <string>

#include "absl/status/statusor.h"
#include "models/tokenizer/vocabulary.h"
#include "nlohmann/json.hpp"

namespace loom {

// tokenizer.json with model.type "BPE": tokens by id from model.vocab and added_tokens
// (special -> kControl, else kUserDefined; ids not covered are "[PAD<id>]" kUnused),
// merges in either the "a b" or the ["a", "b"] form, pre = "smollm" for the SmolLM2
// pre-tokenizer Sequence[Digits(individual), ByteLevel], else "gpt2". model = "gpt2".
absl::StatusOr<Vocabulary> VocabularyFromTokenizerJson(const nlohmann::json& j,
                                                       const std::string& path);

// A serialized SentencePiece ModelProto (tokenizer.model): model = "llama", tokens, scores,
// types and special ids from the proto, add_bos = true, sentencepiece_model = `bytes`.
absl::StatusOr<Vocabulary> VocabularyFromSentencePiece(const std::string& bytes,
                                                       const std::string& path);

// tokenizer_config.json: bos/eos/unk/pad_token (a string or {"content": ...}, looked up in
// the tokens), add_bos_token, add_eos_token, chat_template (a string, or a list of
// {name, template} from which "default" is taken).
absl::Status ApplyTokenizerConfig(const nlohmann::json& j, const std::string& path,
                                  Vocabulary* v);

// generation_config.json or config.json: bos_token_id / eos_token_id (an int, or a list
// whose first entry is used) for ids not already set.
absl::Status ApplySpecialIds(const nlohmann::json& j, const std::string& path, Vocabulary* v);

// Pads tokens (and types, scores) with "[PAD<id>]" kUnused up to `vocab_size`;
// InvalidArgument if there are more tokens than that.
absl::Status PadVocabulary(int vocab_size, const std::string& path, Vocabulary* v);

// Export side. tokenizer.json for a byte-level BPE vocabulary (model "gpt2");
// Unimplemented for other models.
absl::StatusOr<nlohmann::ordered_json> TokenizerJsonFromVocabulary(const Vocabulary& v);
// tokenizer_config.json: special tokens by content, add_bos/add_eos, chat_template.
nlohmann::ordered_json TokenizerConfigFromVocabulary(const Vocabulary& v, int max_context);

}  // namespace loom

#endif  // LOOM_MODELS_WEIGHTS_HF_TOKENIZER_H_
