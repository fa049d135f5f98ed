// A LoRA adapter in memory: per layer and projection an optional (A, B, rank, scale), all
// weights in ONE contiguous owned BF16 allocation, with the kernels' LoraPair views
// precomputed so the forward pass does no lookups.
//
// Shapes (one projection h_in -> h_out, see kernels/lora_ops.h):
//   A: [rank, h_in] BF16 row-major   (PEFT lora_A.weight)
//   B: [h_out, rank] BF16 row-major  (PEFT lora_B.weight)
//   y += scale * B (A x)
// Row order of B for q and k follows the BASE model's rope layout: when the base came from
// GGUF (RopeLayout::kAdjacentPairs) the loaders permute the B rows of a Hugging Face (PEFT)
// adapter to the GGUF order (models/weights/qk_permutation.h); GGUF-LoRA files are already
// in that order.
#ifndef LOOM_MODELS_LORA_LORA_ADAPTER_H_
#define LOOM_MODELS_LORA_LORA_ADAPTER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/lora_ops.h"
#include "models/model_config.h"
#include "models/weights/file_read_policy.h"

namespace loom {

// The seven Llama projections an adapter may target.
enum class LoraTarget { kQ, kK, kV, kO, kGate, kUp, kDown };
inline constexpr int kNumLoraTargets = 7;
inline constexpr LoraTarget kAllLoraTargets[kNumLoraTargets] = {
    LoraTarget::kQ,    LoraTarget::kK,  LoraTarget::kV,   LoraTarget::kO,
    LoraTarget::kGate, LoraTarget::kUp, LoraTarget::kDown};

// "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj".
const char* PeftModuleName(LoraTarget t);
// "self_attn" for q/k/v/o, "mlp" for gate/up/down (the PEFT module path component).
const char* PeftModuleParent(LoraTarget t);
// "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down".
const char* GgufTensorStem(LoraTarget t);
std::optional<LoraTarget> LoraTargetFromPeftName(const std::string& name);
std::optional<LoraTarget> LoraTargetFromGgufStem(const std::string& stem);

// Input and output widths of the base projection `t` (GQA: k/v output n_kv_heads*head_dim;
// q output n_heads*head_dim; o input n_heads*head_dim).
struct ProjectionShape {
  int h_in = 0;
  int h_out = 0;
};
ProjectionShape BaseProjectionShape(const LlamaConfig& base, LoraTarget t);

// Limits a loader enforces.
struct AdapterLimits {
  int max_rank = 256;  // ranks above this are refused (FailedPrecondition)
  // Which files the loader may open (every file is checked after open: roots, regular,
  // size) and the largest one it parses (ResourceExhausted above it).
  FileReadPolicy files;
};

// Adapter tensor names longer than this are refused before they are parsed (real PEFT
// and GGUF-LoRA names are under 80 bytes; ggml caps GGUF names at 64).
inline constexpr size_t kMaxAdapterTensorNameBytes = 256;

// The largest |scale| an adapter projection may have (alpha / r, alpha / sqrt(r) with
// rsLoRA). Trained adapters use scales from about 0.1 to 64; one far beyond, or one that is
// not a finite float, drives the activations it touches to inf and every logprob to -inf.
inline constexpr double kMaxLoraScale = 1024.0;

// OK when `scale` is finite as a float and |scale| <= kMaxLoraScale; else
// FailedPrecondition "<where>: <field> = <value> gives <what> a LoRA scale of <scale> ...".
absl::Status CheckLoraScale(double scale, const std::string& where, const std::string& field,
                            double field_value, const std::string& what);

enum class AdapterFormat { kPeft, kGgufLora, kInMemory };
const char* AdapterFormatName(AdapterFormat f);

// One (layer, target) projection of an adapter.
struct LoraProjectionInfo {
  int layer = 0;
  LoraTarget target = LoraTarget::kQ;
  int rank = 0;
  float scale = 1.0f;
  int h_in = 0;
  int h_out = 0;
};

class LoraAdapter {
 public:
  // Allocates zeroed storage for `projections` (each (layer, target) at most once,
  // layer < n_layers, rank >= 1, widths >= 1, |scale| <= kMaxLoraScale). InvalidArgument
  // otherwise.
  static absl::StatusOr<std::unique_ptr<LoraAdapter>> Create(
      std::string id, std::string source, AdapterFormat format, int n_layers,
      std::vector<LoraProjectionInfo> projections);

  LoraAdapter(const LoraAdapter&) = delete;
  LoraAdapter& operator=(const LoraAdapter&) = delete;

  // The kernels' view of (layer, t), or nullptr when the adapter does not touch it (or
  // layer is out of range). Pointers stay valid for the adapter's lifetime.
  const kernels::LoraPair* Pair(int layer, LoraTarget t) const {
    if (layer < 0 || layer >= n_layers_) return nullptr;
    return index_[static_cast<size_t>(layer) * kNumLoraTargets + static_cast<int>(t)];
  }

  const std::string& id() const { return id_; }
  void set_id(std::string id) { id_ = std::move(id); }
  const std::string& source() const { return source_; }
  AdapterFormat format() const { return format_; }
  int n_layers() const { return n_layers_; }
  // Weight bytes actually held (A and B of every projection, BF16).
  size_t bytes() const { return n_elems_ * sizeof(uint16_t); }
  int max_rank() const { return max_rank_; }
  // Targets present in at least one layer, in LoraTarget order.
  const std::vector<LoraTarget>& targets() const { return targets_; }
  const std::vector<LoraProjectionInfo>& projections() const { return infos_; }

  // Mutable weights of projection `i` (index into projections()), for loaders.
  uint16_t* mutable_a(size_t i) { return storage_.get() + a_off_[i]; }
  uint16_t* mutable_b(size_t i) { return storage_.get() + b_off_[i]; }
  const uint16_t* a(size_t i) const { return storage_.get() + a_off_[i]; }
  const uint16_t* b(size_t i) const { return storage_.get() + b_off_[i]; }

  // FNV-1a over the weights and projection descriptors: equal for equal adapters (used to
  // check that a reload from source gives the same weights).
  uint64_t Fingerprint() const;

 private:
  LoraAdapter() = default;

  std::string id_, source_;
  AdapterFormat format_ = AdapterFormat::kInMemory;
  int n_layers_ = 0;
  int max_rank_ = 0;
  size_t n_elems_ = 0;
  std::unique_ptr<uint16_t[]> storage_;
  std::vector<LoraProjectionInfo> infos_;
  std::vector<size_t> a_off_, b_off_;
  std::vector<kernels::LoraPair> pairs_;            // one per projection
  std::vector<const kernels::LoraPair*> index_;     // [n_layers * 7]
  std::vector<LoraTarget> targets_;
};

}  // namespace loom

#endif  // LOOM_MODELS_LORA_LORA_ADAPTER_H_
