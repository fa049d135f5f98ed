// Engine::Sequence: one request's state inside the engine (engine.cc, engine_intake.cc).
// Private to the engine target. Owned by the engine thread once it left the inbox.
#ifndef LOOM_SCHEDULER_ENGINE_ENGINE_SEQUENCE_H_
#define LOOM_SCHEDULER_ENGINE_ENGINE_SEQUENCE_H_

#include <memory>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "models/lora/adapter_store.h"
#include "models/sampling/sampler.h"
#include "scheduler/engine/engine.h"
#include "scheduler/engine/lora_adapter_weights.h"

namespace loom {

struct Engine::Sequence {
  uint64_t id = 0;
  WorkerRequest req;
  WorkerCallback callback;
  AdapterLease lease;
  std::unique_ptr<LoraAdapterWeights> adapter;  // view over lease; null = base model
  int32_t kv_seq = -1;
  int32_t in_cache = 0;           // tokens with K/V in the cache
  std::vector<int32_t> history;   // context + generated tokens already fed or to prefill
  std::optional<int32_t> pending; // sampled and streamed, not yet fed
  std::optional<Sampler> sampler;
  absl::Time arrival;
  absl::Time last_token_time;
  int completion_tokens = 0;
  bool done = false;
};

}  // namespace loom

#endif  // LOOM_SCHEDULER_ENGINE_ENGINE_SEQUENCE_H_
