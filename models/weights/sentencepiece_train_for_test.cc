#include "models/weights/sentencepiece_train_for_test.h"

#include <sentencepiece_trainer.h>

namespace loom {

std::string TrainSentencePieceForTest(const std::string& input_path, int vocab_size,
                                      std::string* error) {
  std::string model;
  const std::string args = "--input=" + input_path + " --vocab_size=" +
                           std::to_string(vocab_size) +
                           " --model_type=bpe --byte_fallback=true --minloglevel=2"
                           " --character_coverage=1.0";
  const auto st = sentencepiece::SentencePieceTrainer::Train(args, nullptr, &model);
  if (!st.ok()) {
    *error = st.ToString();
    return "";
  }
  return model;
}

}  // namespace loom
