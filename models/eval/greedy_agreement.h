// Greedy agreement between a model under test (e.g. quantized) and a reference (e.g. the
// FP32 path), with and without a LoRA adapter, on prompts cut from a text:
//   * top-1 agreement on the text: at every position of every prompt, the argmax of the
//     two models' next-token logits;
//   * the adapter's direction: over the positions where the adapter changes the
//     reference's argmax, how often the model under test WITH the adapter predicts the
//     reference-with-adapter token (and, as the floor, how often it does without it);
//   * free-running greedy generation of `gen` tokens from each prompt: tokens equal to the
//     reference's continuation before the first difference, and positionwise matches.
#ifndef LOOM_MODELS_EVAL_GREEDY_AGREEMENT_H_
#define LOOM_MODELS_EVAL_GREEDY_AGREEMENT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "models/llama/adapter_weights.h"
#include "models/llama/llama_model.h"

namespace loom {

// Argmax of every position's logits and a greedy continuation, for each prompt.
struct GreedyRun {
  std::vector<std::vector<int32_t>> argmax;     // [prompts][prompt_len]
  std::vector<std::vector<int32_t>> generated;  // [prompts][gen]
};

// Runs every prompt as one sequence in a single batch (prefill with all logits, then `gen`
// decode steps). adapter: nullptr = base.
absl::StatusOr<GreedyRun> RunGreedy(const LlamaModel& model,
                                    const std::vector<std::vector<int32_t>>& prompts, int gen,
                                    const AdapterWeights* adapter);

struct AgreementStats {
  int64_t positions = 0;
  double top1 = 0;                // fraction of positions with equal argmax
  double gen_prefix = 0;          // mean tokens equal before the first difference
  double gen_match = 0;           // fraction of generated tokens equal positionwise
};

// Compares `test` against `ref` (same prompts and gen).
AgreementStats Compare(const GreedyRun& test, const GreedyRun& ref);

struct AdapterDirection {
  int64_t moved = 0;          // positions where ref+adapter's argmax != ref's
  double followed = 0;        // of those, fraction where test+adapter == ref+adapter
  double followed_base = 0;   // of those, fraction where test (no adapter) == ref+adapter
};

AdapterDirection CompareAdapter(const GreedyRun& ref, const GreedyRun& ref_adapter,
                                const GreedyRun& test, const GreedyRun& test_adapter);

}  // namespace loom

#endif  // LOOM_MODELS_EVAL_GREEDY_AGREEMENT_H_
