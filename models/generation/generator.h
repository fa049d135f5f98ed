// Runs a set of generation requests to completion on one LlamaModel with continuous
// batching: every step is ONE forward call holding the decode token of each running
// sequence plus prefill chunks of waiting prompts, under a per-step token budget.
// Used by `loom generate` and the benchmarks; the serving engine (scheduler/) adds queues,
// cancellation and preemption on top of the same model API.
#ifndef LOOM_MODELS_GENERATION_GENERATOR_H_
#define LOOM_MODELS_GENERATION_GENERATOR_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "models/kv_cache/paged_kv_cache.h"
#include "models/llama/llama_model.h"
#include "models/sampling/sampling_options.h"
#include "models/sampling/stop_checker.h"
#include "models/tokenizer/tokenizer.h"

namespace loom {

struct GenerationRequest {
  std::vector<int32_t> prompt;  // token ids, already templated
  SamplingOptions sampling;
  std::vector<std::string> stop_strings;
  int max_tokens = 256;
  bool stop_at_end_of_generation = true;  // eos / <|im_end|> end the request
  // LoRA adapter of this request (nullptr: base model); must outlive Run().
  const AdapterWeights* adapter = nullptr;
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // generated ids (the stop token included, if any)
  std::string text;             // released text (stop strings removed)
  FinishReason finish_reason = FinishReason::kNone;
  int prompt_tokens = 0;
};

struct GenerationTiming {
  double prefill_seconds = 0;  // steps that carried prompt tokens
  double decode_seconds = 0;   // steps that carried only decode tokens
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
};

struct GeneratorOptions {
  int max_step_tokens = 512;  // prefill chunk budget per step (decode tokens count too)
  KvCacheOptions kv;
};

class Generator {
 public:
  // `model` and `tokenizer` must outlive the generator.
  static absl::StatusOr<std::unique_ptr<Generator>> Create(const LlamaModel* model,
                                                           const Tokenizer* tokenizer,
                                                           const GeneratorOptions& options);

  // Called with (request index, text) whenever text of that request becomes final.
  using TextCallback = std::function<void(int, std::string_view)>;

  // Runs all requests to completion. InvalidArgument (before any work) when a request is
  // malformed: empty prompt, prompt + max_tokens beyond the model's context (the message
  // names both numbers), bad sampling options or stop strings. ResourceExhausted when a
  // single request cannot fit the KV cache at all.
  absl::StatusOr<std::vector<GenerationResult>> Run(const std::vector<GenerationRequest>& requests,
                                                    const TextCallback& on_text,
                                                    GenerationTiming* timing = nullptr);

 private:
  Generator(const LlamaModel* model, const Tokenizer* tokenizer, GeneratorOptions options,
            std::unique_ptr<PagedKvCache> kv)
      : model_(model), tokenizer_(tokenizer), options_(options), kv_(std::move(kv)) {}

  const LlamaModel* model_;
  const Tokenizer* tokenizer_;
  GeneratorOptions options_;
  std::unique_ptr<PagedKvCache> kv_;
  ForwardWorkspace ws_;
  std::vector<float> logits_;
};

}  // namespace loom

#endif  // LOOM_MODELS_GENERATION_GENERATOR_H_
