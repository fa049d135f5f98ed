// Per-request sampling parameters (OpenAI / llama.cpp vocabulary).
#ifndef LOOM_MODELS_SAMPLING_SAMPLING_OPTIONS_H_
#define LOOM_MODELS_SAMPLING_SAMPLING_OPTIONS_H_

#include <cstdint>

#include "absl/status/status.h"

namespace loom {

// Defaults turn every transform off except greedy decoding (temperature 0).
// See sampler.h for the order in which the fields are applied.
struct SamplingOptions {
  float temperature = 0.0f;  // 0 = greedy (argmax, ties -> lowest id); range [0, 100]
  int top_k = 0;             // keep the k most likely tokens; 0 = off
  float top_p = 1.0f;        // nucleus: smallest set with cumulative prob >= top_p; (0, 1]
  float min_p = 0.0f;        // drop tokens with p < min_p * p_max; [0, 1], 0 = off

  // Penalties over the last `penalty_last_n` tokens of prompt + generated text.
  // repetition (llama.cpp / HF): logit > 0 ? logit / r : logit * r, once per distinct token.
  // frequency / presence (OpenAI): logit -= count * frequency + (count > 0) * presence.
  float repetition_penalty = 1.0f;  // > 0, 1 = off
  float frequency_penalty = 0.0f;   // finite, 0 = off
  float presence_penalty = 0.0f;    // finite, 0 = off
  int penalty_last_n = 64;          // window length; -1 = whole history, 0 = no penalties

  uint64_t seed = 0;      // used only when has_seed
  bool has_seed = false;  // false: seeded from std::random_device
  // Draws of the generator to discard after seeding: a request resumed elsewhere after k
  // sampled tokens sets k and continues the same random sequence (sampler.h: every
  // Sample() with temperature > 0 consumes exactly one draw). 0 = start afresh.
  uint64_t skip_draws = 0;

  // OK, or InvalidArgument naming the first bad field and its value.
  absl::Status Validate() const;
};

}  // namespace loom

#endif  // LOOM_MODELS_SAMPLING_SAMPLING_OPTIONS_H_
