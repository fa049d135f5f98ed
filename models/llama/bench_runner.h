// The throughput measurement shared by llama_benchmark and quant_benchmark: for B sequences
// of P prompt tokens,
//   prefill: the B*P prompt tokens, sequences laid out one after another, cut into steps of
//            at most token_budget tokens (one Forward per step; a sequence may span
//            steps); logits only for each sequence's last prompt token.
//   decode:  then decode_steps steps of one token per sequence (one Forward each); the
//            next token is the argmax of the sequence's logits.
#ifndef LOOM_MODELS_LLAMA_BENCH_RUNNER_H_
#define LOOM_MODELS_LLAMA_BENCH_RUNNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/kv_cache/paged_kv_cache.h"
#include "models/llama/llama_model.h"
#include "models/llama/step_profile.h"

namespace loom::bench {

// One configuration BxP.
struct Config {
  int batch = 0;
  int prompt_len = 0;
};

// "1x512,8x128" -> configs; InvalidArgument on a bad item or an empty list.
absl::StatusOr<std::vector<Config>> ParseConfigs(const std::string& text);

// KV pages that the largest configuration needs.
int32_t PagesFor(const std::vector<Config>& configs, int decode_steps, int page_size);

// B random prompts of P tokens in [3, min(49003, vocab)).
std::vector<std::vector<int32_t>> RandomPrompts(const Config& c, int vocab, uint32_t seed);

struct RunTimes {
  double prefill_s = 0;
  double decode_s = 0;
};

class Runner {
 public:
  // `model` and `kv` must outlive the runner.
  Runner(const LlamaModel* model, PagedKvCache* kv, int token_budget, int decode_steps)
      : model_(model), kv_(kv), budget_(token_budget), steps_(decode_steps) {}

  // Prefills `prompts` (one sequence each) and decodes; releases the sequences after.
  // The greedy tokens of the decode are left in last_tokens() ([B][decode_steps]).
  absl::StatusOr<RunTimes> Run(const std::vector<std::vector<int32_t>>& prompts);
  const std::vector<std::vector<int32_t>>& last_tokens() const { return generated_; }
  // When set, the decode steps of later runs (not prefill) add their per-operation wall
  // time to `profile` (models/llama/step_profile.h). Null (the default) times nothing.
  void set_decode_profile(StepProfile* profile) { decode_profile_ = profile; }

 private:
  absl::Status Step(const std::vector<SequenceChunk>& chunks, const std::vector<int>& owner,
                    std::vector<int32_t>* next);
  absl::Status Prefill(const std::vector<std::vector<int32_t>>& prompts,
                       const std::vector<int32_t>& seqs, std::vector<int32_t>* next,
                       double* seconds);
  absl::Status Decode(const std::vector<std::vector<int32_t>>& prompts,
                      const std::vector<int32_t>& seqs, std::vector<int32_t>* next,
                      double* seconds);

  const LlamaModel* model_;
  PagedKvCache* kv_;
  const int budget_;
  const int steps_;
  ForwardWorkspace ws_;
  std::vector<float> logits_;
  std::vector<std::vector<int32_t>> generated_;
  StepProfile* decode_profile_ = nullptr;
};

}  // namespace loom::bench

#endif  // LOOM_MODELS_LLAMA_BENCH_RUNNER_H_
