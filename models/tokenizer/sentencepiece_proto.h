// Builds a serialized SentencePiece ModelProto from a GGUF-style "llama" vocabulary
// (tokens, scores, token types), for files that carry no tokenizer.model. The model is a
// BPE model scored by piece score (what llama.cpp's SPM tokenizer implements), with an
// identity normalizer that only prepends "▁" and maps " " to "▁" (llama.cpp's
// add_space_prefix behaviour; no whitespace collapsing, no NFKC).
#ifndef LOOM_MODELS_TOKENIZER_SENTENCEPIECE_PROTO_H_
#define LOOM_MODELS_TOKENIZER_SENTENCEPIECE_PROTO_H_

#include <string>

#include "absl/status/statusor.h"
#include "models/tokenizer/vocabulary.h"

namespace loom {

// InvalidArgument when scores/types do not match the token count or no token is of type
// kUnknown (SentencePiece requires exactly one).
absl::StatusOr<std::string> SentencePieceProtoFromVocabulary(const Vocabulary& vocab);

}  // namespace loom

#endif  // LOOM_MODELS_TOKENIZER_SENTENCEPIECE_PROTO_H_
