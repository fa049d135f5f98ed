#include "models/lora/adapter_permutation.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "models/lora/adapter_rotation.h"

namespace loom {
namespace {

const int32_t* InputOrder(const LayerChannelOrder& o, LoraTarget t) {
  switch (t) {
    case LoraTarget::kQ:
    case LoraTarget::kK:
    case LoraTarget::kV: return o.attn_norm;
    case LoraTarget::kO: return o.attn_out;
    case LoraTarget::kGate:
    case LoraTarget::kUp: return o.ffn_norm;
    case LoraTarget::kDown: return o.silu_mul;
  }
  return nullptr;
}

const int32_t* OutputOrder(const LayerChannelOrder& o, LoraTarget t) {
  if (o.gate_up_rows_unpermuted) return nullptr;
  return t == LoraTarget::kGate || t == LoraTarget::kUp ? o.silu_mul : nullptr;
}

}  // namespace

std::vector<LayerChannelOrder> ChannelOrders(const QuantizedWeights& w) {
  std::vector<LayerChannelOrder> out(w.layers.size());
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const QuantizedLayerWeights& L = w.layers[l];
    out[l] = {L.attn_norm_perm, L.attn_out_perm, L.ffn_norm_perm, L.silu_mul_perm,
              w.rotation != nullptr && w.rotation->silu_mul() != nullptr};
  }
  return out;
}

absl::StatusOr<std::unique_ptr<LoraAdapter>> PermuteLoraAdapter(
    const LoraAdapter& adapter, const std::vector<LayerChannelOrder>& orders) {
  const std::vector<LoraProjectionInfo>& infos = adapter.projections();
  for (const LoraProjectionInfo& p : infos) {
    if (p.layer < 0 || p.layer >= static_cast<int>(orders.size())) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "adapter %s: layer %d has no channel order (the model has %d layers)", adapter.id(),
          p.layer, orders.size()));
    }
  }
  absl::StatusOr<std::unique_ptr<LoraAdapter>> out = LoraAdapter::Create(
      adapter.id(), adapter.source(), adapter.format(), adapter.n_layers(), infos);
  if (!out.ok()) return out.status();
  for (size_t i = 0; i < infos.size(); ++i) {
    const LoraProjectionInfo& p = infos[i];
    const LayerChannelOrder& o = orders[p.layer];
    const uint16_t* a = adapter.a(i);
    uint16_t* a2 = (*out)->mutable_a(i);
    const int32_t* in = InputOrder(o, p.target);
    for (int r = 0; r < p.rank; ++r) {
      const uint16_t* row = a + static_cast<size_t>(r) * p.h_in;
      uint16_t* row2 = a2 + static_cast<size_t>(r) * p.h_in;
      if (in == nullptr) {
        std::copy_n(row, p.h_in, row2);
      } else {
        for (int j = 0; j < p.h_in; ++j) row2[j] = row[in[j]];
      }
    }
    const uint16_t* b = adapter.b(i);
    uint16_t* b2 = (*out)->mutable_b(i);
    const int32_t* outo = OutputOrder(o, p.target);
    for (int j = 0; j < p.h_out; ++j) {
      const int src = outo == nullptr ? j : outo[j];
      std::copy_n(b + static_cast<size_t>(src) * p.rank, p.rank,
                  b2 + static_cast<size_t>(j) * p.rank);
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<LoraAdapter>> BindAdapterToQuantized(
    std::unique_ptr<LoraAdapter> adapter, const QuantizedWeights* quantized) {
  if (adapter == nullptr) return absl::InvalidArgumentError("BindAdapterToQuantized: null");
  if (quantized == nullptr) return adapter;
  if (quantized->rotation != nullptr) {
    absl::StatusOr<std::unique_ptr<LoraAdapter>> rotated =
        RotateLoraAdapter(*adapter, *quantized->rotation);
    if (!rotated.ok()) return rotated.status();
    adapter = *std::move(rotated);
  }
  return PermuteLoraAdapter(*adapter, ChannelOrders(*quantized));
}

}  // namespace loom
