// Adapters for a quantized base model (models/llama/quantized_weights.h): the quantized
// linears read their inputs in a permuted channel order, and the LoRA path reads the same
// permuted (unquantized) activation. So an adapter is bound to such a model through a
// permuted copy:
//   lora_A [rank, h_in]: column j of the copy = column perm[j] of the original, with the
//     projection's input order (q/k/v: attn_norm, o: attn_out, gate/up: ffn_norm,
//     down: silu_mul);
//   lora_B [h_out, rank] of gate and up: row j of the copy = row perm[j] of the original
//     (silu_mul order: the quantized gate/up outputs are stored in down's input order).
// Every other B (q/k/v/o/down outputs) keeps the original order. The copy's deltas are the
// original's, reordered: exact (a copy of BF16 values), no change of precision.
#ifndef LOOM_MODELS_LORA_ADAPTER_PERMUTATION_H_
#define LOOM_MODELS_LORA_ADAPTER_PERMUTATION_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "models/llama/quantized_weights.h"
#include "models/lora/lora_adapter.h"

namespace loom {

// One layer's activation orders (permuted channel j = original channel perm[j]); nullptr =
// identity. Lengths: attn_norm and ffn_norm hidden, attn_out n_heads*head_dim, silu_mul
// intermediate (= the h_in of the projections that read them; gate/up h_out for silu_mul).
struct LayerChannelOrder {
  const int32_t* attn_norm = nullptr;
  const int32_t* attn_out = nullptr;
  const int32_t* ffn_norm = nullptr;
  const int32_t* silu_mul = nullptr;
  // A rotated model with an online M_d: gate/up rows stay in the base order (silu_mul
  // orders down's input only), so gate/up lora_B rows are not permuted.
  bool gate_up_rows_unpermuted = false;
};

// The permuted copy (same id, source, format, projections). `orders` has one entry per
// layer of the base model; InvalidArgument when the adapter has a layer >= orders.size().
// The orders' lengths are the adapter's projection widths (the caller guarantees them: they
// come from a QuantizedWeights validated against the same base config as the adapter).
absl::StatusOr<std::unique_ptr<LoraAdapter>> PermuteLoraAdapter(
    const LoraAdapter& adapter, const std::vector<LayerChannelOrder>& orders);

// The hook for whatever binds adapters to a model (the engine's AdapterStore loader, the
// eval tools): `adapter` itself when `quantized` is nullptr (an unquantized model, see
// LlamaModel::quantized()), else its permuted copy for those channel orders; for rotated
// weights (quantized->rotation) the permuted copy of its rotated copy
// (models/lora/adapter_rotation.h).
absl::StatusOr<std::unique_ptr<LoraAdapter>> BindAdapterToQuantized(
    std::unique_ptr<LoraAdapter> adapter, const QuantizedWeights* quantized);

// The orders of a quantized model's layers (views into `w`, which must outlive them).
std::vector<LayerChannelOrder> ChannelOrders(const QuantizedWeights& w);

}  // namespace loom

#endif  // LOOM_MODELS_LORA_ADAPTER_PERMUTATION_H_
