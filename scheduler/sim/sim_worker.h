// One simulated worker: continuous batching over a running set, Punica style. Each step
// runs every running sequence: one decode token for those past prefill, and prefill
// chunks (oldest first) for the rest within max_batch_tokens. A sequence whose prefill
// completes in a step emits its first token at the end of that step. KV pages: a request
// reserves PagesNeeded() on admission (the router checked them); decode growth allocates
// a page at a time, and when none is left the NEWEST sequence is evicted (its pages freed,
// handed back to the caller for re-adding with recomputation).
//
// Time is the caller's; this class only computes step shapes and durations.
#ifndef LOOM_SCHEDULER_SIM_SIM_WORKER_H_
#define LOOM_SCHEDULER_SIM_SIM_WORKER_H_

#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

#include "scheduler/router/worker_view.h"
#include "scheduler/sim/step_latency_model.h"

namespace loom {

struct SimSequence {
  uint64_t request = 0;        // request id
  int adapter = 0;
  int prefill_target = 0;      // prompt + tokens generated before this admission
  int generated_at_admission = 0;
  int prefilled = 0;
  int generated = 0;           // total generated (survives migration)
  int output_target = 0;
  int32_t pages = 0;
  uint64_t admission_seq = 0;
  // The in-flight step's share: set at StartStep, consumed at FinishStep.
  bool in_step = false;
  int step_prefill = 0;
  bool step_decode = false;
};

class SimWorker {
 public:
  // `view` is this worker's slot in the router's view array; it must outlive the worker.
  SimWorker(int id, const WorkerHardware* hardware, const PlacementOptions* placement,
            WorkerView* view);

  int id() const { return id_; }
  bool stepping() const { return stepping_; }
  bool empty() const { return seqs_.empty(); }
  const std::vector<SimSequence>& sequences() const { return seqs_; }
  int32_t kv_pages_free() const { return kv_free_; }

  // Adds a sequence (re-add form: context = prompt + generated). Reserves its pages and
  // makes its adapter resident. Returns the adapter evicted from the cache, or -1.
  int Admit(uint64_t request, int adapter, int prompt_tokens, int generated, int output_target);

  // Removes a sequence (migration); returns it. REQUIRES: present.
  SimSequence Remove(uint64_t request);

  // Starts a step: evicts newest sequences until decode growth fits (appended to
  // `evicted`), assigns this step's work, returns the step duration in ms.
  // REQUIRES: !stepping() && !empty().
  double StartStep(std::vector<SimSequence>* evicted);

  // Ends the step: advances the sequences that took part; finished ones are removed and
  // appended to `finished`. Returns output tokens produced.
  int FinishStep(std::vector<SimSequence>* finished, std::vector<uint64_t>* first_token);

  // The router's view of this worker (resident adapters maintained incrementally).
  WorkerView& view() { return *view_; }
  void SyncView(int64_t idle_since_us);

  int64_t adapter_loads() const { return adapter_loads_; }
  int64_t steps() const { return steps_; }

 private:
  int32_t PagesFor(int tokens) const;
  int TouchAdapter(int adapter);  // returns evicted adapter or -1

  const int id_;
  const WorkerHardware* hardware_;
  const PlacementOptions* placement_;
  std::vector<SimSequence> seqs_;  // admission order (newest last)
  int32_t kv_free_;
  bool stepping_ = false;
  uint64_t next_admission_ = 0;
  int pending_loads_ = 0;
  std::list<int> lru_;  // most recent first
  std::unordered_map<int, std::list<int>::iterator> cache_;
  WorkerView* view_;
  int64_t adapter_loads_ = 0;
  int64_t steps_ = 0;
};

}  // namespace loom

#endif  // LOOM_SCHEDULER_SIM_SIM_WORKER_H_
