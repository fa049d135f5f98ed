// Where the time of Forward steps goes, by operation: an optional, caller-owned
// accumulator that LlamaModel::Forward fills when ForwardWorkspace::profile is set (the
// benchmarks' --profile). Each timed region is wall time on the Forward thread, so a
// region that runs on the thread pool counts its whole parallel span. Not thread-safe:
// one profile per Forward thread.
#ifndef LOOM_MODELS_LLAMA_STEP_PROFILE_H_
#define LOOM_MODELS_LLAMA_STEP_PROFILE_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <string>

namespace loom {

enum class StepOp : int {
  kEmbed,      // token embedding rows
  kNorm,       // RMSNorm (+ reorder + quantize in the quantized mode), activation packing
  kQkv,        // q, k, v linears
  kRope,       // rotary embedding of q and k
  kKvAppend,   // K/V rows into the paged cache (quantized rows included)
  kAttention,  // paged attention
  kOQuant,     // quantized mode: reorder + quantize of the attention output; rotated
               // models: with its online Hadamard (fused in the quantized mode)
  kO,          // o linear
  kGateUp,     // gate and up linears
  kSiluMul,    // SiLU * mul (+ quantize in the quantized mode; + the online Hadamard in
               // rotated models)
  kDown,       // down linear
  kLora,       // every adapter's shrink + expand
  kResidual,   // residual adds
  kHead,       // final norm, packing and the output head
  kRotate,     // rotated models: the residual rotation of embedded rows and head rows
  kSample,     // the caller's token choice from the logits (timed by the caller)
  kCount,
};

const char* StepOpName(StepOp op);

struct StepProfile {
  std::array<int64_t, static_cast<int>(StepOp::kCount)> ns{};
  int64_t steps = 0;  // Forward calls that were profiled

  void Add(StepOp op, int64_t n) { ns[static_cast<int>(op)] += n; }
  int64_t total_ns() const;
  void Clear() { *this = StepProfile(); }
  // One line per operation: ms per step and share of the total ("op  ms/step  %").
  std::string Table() const;
};

// Adds the scope's wall time to `profile` (when not null) under `op`.
class StepTimer {
 public:
  StepTimer(StepProfile* profile, StepOp op)
      : profile_(profile), op_(op),
        t0_(profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point()) {}
  ~StepTimer() {
    if (profile_ == nullptr) return;
    profile_->Add(op_, std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::steady_clock::now() - t0_)
                           .count());
  }
  StepTimer(const StepTimer&) = delete;
  StepTimer& operator=(const StepTimer&) = delete;

 private:
  StepProfile* profile_;
  StepOp op_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace loom

#endif  // LOOM_MODELS_LLAMA_STEP_PROFILE_H_
