// Synthetic byte-level BPE vocabularies for unit tests.
#ifndef LOOM_MODELS_TOKENIZER_TEST_VOCAB_H_
#define LOOM_MODELS_TOKENIZER_TEST_VOCAB_H_

#include <string>
#include <utility>
#include <vector>

#include "models/tokenizer/vocabulary.h"

namespace loom::testing {

// A "gpt2" vocabulary: ids 0..k-1 are the given control tokens (bos = the first, eos = the
// second when present), then the 256 single-byte tokens in byte order, then one token per
// merge (in merge order). `merges` are pairs of RAW byte strings (they are converted to
// the GPT-2 byte-level encoding here); each merge's result must be new.
Vocabulary ByteLevelVocab(const std::vector<std::string>& control_tokens,
                          const std::vector<std::pair<std::string, std::string>>& merges,
                          const std::string& pre = "gpt2");

// Raw bytes -> GPT-2 byte-level text.
std::string ByteLevelEncode(const std::string& raw);

}  // namespace loom::testing

#endif  // LOOM_MODELS_TOKENIZER_TEST_VOCAB_H_
