// How long one worker step takes, and what a simulated worker holds.
//
//   step_ms = base_ms + decode_ms_per_token * decode_tokens
//           + prefill_ms_per_token * prefill_tokens
//           + ms_per_distinct_adapter * distinct_adapters + adapter_load_ms * loads
//           + ms_per_kv_token * kv_tokens
//
// `decode_tokens` = sequences decoding one token this step; `prefill_tokens` = prompt (or
// recompute) tokens prefilled this step; `distinct_adapters` = LoRA segments in the batch;
// `loads` = adapters copied into the worker's adapter cache for this step; `kv_tokens` =
// KV entries attention reads this step, summed over the step's sequences (each one's
// context length after the step).
//
// On a GPU a decode step is bound by reading the weights once (base_ms), so it barely
// grows with the batch: the per-token terms are small and the batch's growth is mostly
// the KV read, which depends on context length rather than on the batch size as such.
#ifndef LOOM_SCHEDULER_SIM_STEP_LATENCY_MODEL_H_
#define LOOM_SCHEDULER_SIM_STEP_LATENCY_MODEL_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace loom {

struct StepShape {
  int decode_tokens = 0;
  int prefill_tokens = 0;
  int distinct_adapters = 0;
  int adapter_loads = 0;
  int64_t kv_tokens = 0;
};

struct StepLatencyModel {
  double base_ms = 0;
  double decode_ms_per_token = 0;
  double prefill_ms_per_token = 0;
  double ms_per_distinct_adapter = 0;
  double adapter_load_ms = 0;
  double ms_per_kv_token = 0;

  double StepMs(const StepShape& s) const {
    return base_ms + decode_ms_per_token * s.decode_tokens +
           prefill_ms_per_token * s.prefill_tokens +
           ms_per_distinct_adapter * s.distinct_adapters + adapter_load_ms * s.adapter_loads +
           ms_per_kv_token * static_cast<double>(s.kv_tokens);
  }
};

// One simulated worker: its step model and capacities.
struct WorkerHardware {
  std::string name;               // e.g. "gpu: A100-80GB, Llama-2-7B (Punica figures)"
  StepLatencyModel latency;
  int32_t kv_pages = 0;           // KV pool, in pages of kv_page_size tokens
  int kv_page_size = 16;
  int max_batch_tokens = 4096;    // prefill + decode tokens per step (chunked prefill)
  int adapter_cache_slots = 100;  // adapters resident at once (LRU)
};

// "gpu": Punica's published A100 / Llama-2-7B figures (see step_latency_model.cc for the
// derivation of every coefficient). "cpu": SmolLM2-135M Q4_1 on this 2-core machine,
// from the llama.cpp measurements in KERNELS.md (DEFAULTS until the engine's own step
// times are measured; pass them with HardwareFromJson). InvalidArgument otherwise.
absl::StatusOr<WorkerHardware> HardwarePreset(std::string_view mode);

// One measured engine step.
struct MeasuredStep {
  int decode_tokens = 0;
  int prefill_tokens = 0;
  int distinct_adapters = 0;
  double step_ms = 0;
  int64_t kv_tokens = 0;
};

// Least-squares fit of base, decode, prefill, distinct-adapter and KV-token coefficients to
// measured steps. A column that never varies cannot be told apart from the intercept: its
// coefficient is taken from `prior` and the rest is fitted. adapter_load_ms comes from
// `prior`. InvalidArgument with fewer rows than fitted coefficients or a singular system.
absl::StatusOr<StepLatencyModel> FitStepLatency(absl::Span<const MeasuredStep> steps,
                                                const StepLatencyModel& prior);

// Overrides fields of `base` from a JSON object: any of "name", "base_ms",
// "decode_ms_per_token", "prefill_ms_per_token", "ms_per_distinct_adapter",
// "adapter_load_ms", "ms_per_kv_token", "kv_pages", "kv_page_size", "max_batch_tokens",
// "adapter_cache_slots", and "measured_steps": [{"decode_tokens", "prefill_tokens",
// "distinct_adapters", "kv_tokens", "step_ms"}, ...] which is fitted with FitStepLatency (after the
// explicit coefficients are applied as the prior). InvalidArgument on malformed JSON,
// wrong types or non-positive capacities.
absl::StatusOr<WorkerHardware> HardwareFromJson(std::string_view json, WorkerHardware base);

}  // namespace loom

#endif  // LOOM_SCHEDULER_SIM_STEP_LATENCY_MODEL_H_
