// GPT-2 style byte-level BPE (Vocabulary::model == "gpt2"), id-exact with llama.cpp:
// pre-tokenize (PreTokenizer), map each byte of a piece to its GPT-2 "byte-to-unicode"
// character, merge adjacent symbols by merge rank (lowest rank first, leftmost first on
// ties) with a priority queue, then map each final symbol to its id (a symbol that is not in
// the vocabulary falls back as llama.cpp does: see single_char_token_).
#ifndef LOOM_MODELS_TOKENIZER_BYTE_LEVEL_BPE_H_
#define LOOM_MODELS_TOKENIZER_BYTE_LEVEL_BPE_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "models/tokenizer/pre_tokenizer.h"
#include "models/tokenizer/tokenizer.h"

namespace loom {

// GPT-2's reversible byte <-> printable-character mapping.
// ByteToUnicode(b): the UTF-8 text of the character standing for byte b.
const std::string& ByteToUnicode(uint8_t b);
// Decodes GPT-2 byte-level text back to raw bytes. Characters outside the mapping are
// copied as their UTF-8 bytes (llama.cpp does the same for added tokens' text).
std::string ByteLevelDecode(std::string_view text);

class ByteLevelBpe : public Tokenizer {
 public:
  // InvalidArgument when the vocabulary is inconsistent (token_types length, a merge
  // without a space); Unimplemented for an unsupported pre-tokenizer.
  static absl::StatusOr<std::unique_ptr<ByteLevelBpe>> Create(const Vocabulary& vocab);

 protected:
  absl::Status EncodeFragment(std::string_view text,
                              std::vector<int32_t>* out) const override;
  bool SplitUserDefinedInUserText() const override { return true; }

 private:
  explicit ByteLevelBpe(const Vocabulary& vocab) : Tokenizer(vocab) {}

  // BPE of one pre-token piece (raw bytes), appending ids.
  void EncodeWord(std::string_view word, std::vector<int32_t>* out) const;

  struct Merge {
    int32_t rank;
    int32_t result;  // symbol id of the concatenation
  };
  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  std::unique_ptr<PreTokenizer> pre_;
  // Symbols are interned strings (byte-level text): every token and every merge part or
  // result. symbol_token_[s] is the token id for symbol s, or -1 when it is not a token.
  std::vector<std::string> symbols_;
  std::vector<int32_t> symbol_token_;
  std::array<int32_t, 256> byte_symbol_{};  // symbol of each single byte
  // Token whose text is the single byte c, or -1: llama.cpp's fallback for a final
  // symbol that is not a token looks up each byte of the symbol's (byte-level) text this
  // way and drops bytes without a token. (SmolLM2's vocabulary lacks some byte tokens,
  // e.g. for 0x1D, so such bytes vanish in llama.cpp too.)
  std::array<int32_t, 256> single_char_token_{};
  absl::flat_hash_map<uint64_t, Merge> merges_;

  // Word -> ids cache (bounded; cleared when full).
  static constexpr size_t kCacheLimit = 1 << 16;
  mutable absl::Mutex cache_mu_;
  mutable absl::flat_hash_map<std::string, std::vector<int32_t>> cache_
      ABSL_GUARDED_BY(cache_mu_);
};

}  // namespace loom

#endif  // LOOM_MODELS_TOKENIZER_BYTE_LEVEL_BPE_H_
