// Test helper: trains a tiny SentencePiece model in memory (Abseil-free, like
// sentencepiece_pieces.h).
#ifndef LOOM_MODELS_WEIGHTS_SENTENCEPIECE_TRAIN_FOR_TEST_H_
#define LOOM_MODELS_WEIGHTS_SENTENCEPIECE_TRAIN_FOR_TEST_H_

#include <string>

namespace loom {

// Trains a BPE model with byte fallback and `vocab_size` pieces on the text in
// `input_path`; returns the serialized ModelProto, or "" with *error set.
std::string TrainSentencePieceForTest(const std::string& input_path, int vocab_size,
                                      std::string* error);

}  // namespace loom

#endif  // LOOM_MODELS_WEIGHTS_SENTENCEPIECE_TRAIN_FOR_TEST_H_
