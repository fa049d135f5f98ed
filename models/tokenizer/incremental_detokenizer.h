// Streaming token ids -> text. Each Push returns only complete, well-formed UTF-8: the
// bytes of a character split across tokens are held until the character completes, and
// ill-formed sequences are replaced by U+FFFD instead of being emitted broken.
// Not thread-safe (one per generation stream); the Tokenizer must outlive it.
#ifndef LOOM_MODELS_TOKENIZER_INCREMENTAL_DETOKENIZER_H_
#define LOOM_MODELS_TOKENIZER_INCREMENTAL_DETOKENIZER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "models/tokenizer/tokenizer.h"

namespace loom {

class IncrementalDetokenizer {
 public:
  struct Options {
    // Control tokens (e.g. <|im_end|>) produce "" unless this is set.
    bool render_control = false;
    // Drop the dummy-prefix space of the first token for SentencePiece models (what
    // Tokenizer::Decode does), so the streamed text equals Decode of all ids.
    bool strip_dummy_prefix = true;
  };

  explicit IncrementalDetokenizer(const Tokenizer& tokenizer)
      : IncrementalDetokenizer(tokenizer, Options()) {}
  IncrementalDetokenizer(const Tokenizer& tokenizer, Options options)
      : tokenizer_(tokenizer), options_(options) {}

  // Appends token `id` and returns the text that became complete (possibly "").
  // InvalidArgument for an id outside the vocabulary (state unchanged).
  absl::StatusOr<std::string> Push(int32_t id);

  // Ends the stream: returns the held bytes of an unfinished character as U+FFFD (or ""),
  // and resets the detokenizer for a new stream.
  std::string Flush();

  // Number of bytes held back waiting for the rest of a character.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer& tokenizer_;
  Options options_;
  std::string pending_;
  bool at_start_ = true;
};

}  // namespace loom

#endif  // LOOM_MODELS_TOKENIZER_INCREMENTAL_DETOKENIZER_H_
