#include "models/tokenizer/test_vocab.h"

#include "models/tokenizer/byte_level_bpe.h"

namespace loom::testing {

std::string ByteLevelEncode(const std::string& raw) {
  std::string out;
  for (char c : raw) out += ByteToUnicode(static_cast<uint8_t>(c));
  return out;
}

Vocabulary ByteLevelVocab(const std::vector<std::string>& control_tokens,
                          const std::vector<std::pair<std::string, std::string>>& merges,
                          const std::string& pre) {
  Vocabulary v;
  v.model = "gpt2";
  v.pre = pre;
  for (const std::string& c : control_tokens) {
    v.tokens.push_back(c);
    v.token_types.push_back(TokenType::kControl);
  }
  if (!control_tokens.empty()) v.bos_id = 0;
  if (control_tokens.size() > 1) v.eos_id = 1;
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(ByteToUnicode(static_cast<uint8_t>(b)));
    v.token_types.push_back(TokenType::kNormal);
  }
  for (const auto& [l, r] : merges) {
    v.merges.push_back(ByteLevelEncode(l) + " " + ByteLevelEncode(r));
    v.tokens.push_back(ByteLevelEncode(l + r));
    v.token_types.push_back(TokenType::kNormal);
  }
  return v;
}

}  // namespace loom::testing
