#include "models/lora/lora_adapter.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace loom {

const char* PeftModuleName(LoraTarget t) {
  switch (t) {
    case LoraTarget::kQ: return "q_proj";
    case LoraTarget::kK: return "k_proj";
    case LoraTarget::kV: return "v_proj";
    case LoraTarget::kO: return "o_proj";
    case LoraTarget::kGate: return "gate_proj";
    case LoraTarget::kUp: return "up_proj";
    case LoraTarget::kDown: return "down_proj";
  }
  return "?";
}

const char* PeftModuleParent(LoraTarget t) {
  switch (t) {
    case LoraTarget::kQ:
    case LoraTarget::kK:
    case LoraTarget::kV:
    case LoraTarget::kO: return "self_attn";
    default: return "mlp";
  }
}

const char* GgufTensorStem(LoraTarget t) {
  switch (t) {
    case LoraTarget::kQ: return "attn_q";
    case LoraTarget::kK: return "attn_k";
    case LoraTarget::kV: return "attn_v";
    case LoraTarget::kO: return "attn_output";
    case LoraTarget::kGate: return "ffn_gate";
    case LoraTarget::kUp: return "ffn_up";
    case LoraTarget::kDown: return "ffn_down";
  }
  return "?";
}

std::optional<LoraTarget> LoraTargetFromPeftName(const std::string& name) {
  for (LoraTarget t : kAllLoraTargets) {
    if (name == PeftModuleName(t)) return t;
  }
  return std::nullopt;
}

std::optional<LoraTarget> LoraTargetFromGgufStem(const std::string& stem) {
  for (LoraTarget t : kAllLoraTargets) {
    if (stem == GgufTensorStem(t)) return t;
  }
  return std::nullopt;
}

ProjectionShape BaseProjectionShape(const LlamaConfig& c, LoraTarget t) {
  const int q = c.n_heads * c.head_dim, kv = c.n_kv_heads * c.head_dim;
  switch (t) {
    case LoraTarget::kQ: return {c.hidden, q};
    case LoraTarget::kK: return {c.hidden, kv};
    case LoraTarget::kV: return {c.hidden, kv};
    case LoraTarget::kO: return {q, c.hidden};
    case LoraTarget::kGate: return {c.hidden, c.intermediate};
    case LoraTarget::kUp: return {c.hidden, c.intermediate};
    case LoraTarget::kDown: return {c.intermediate, c.hidden};
  }
  return {};
}

absl::Status CheckLoraScale(double scale, const std::string& where, const std::string& field,
                            double field_value, const std::string& what) {
  const bool fits_float =
      std::isfinite(scale) && std::fabs(scale) <= std::numeric_limits<float>::max();
  if (fits_float && std::fabs(scale) <= kMaxLoraScale) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "%s: %s = %g gives %s a LoRA scale of %g; scales must be finite and within +-%g",
      where, field, field_value, what, scale, kMaxLoraScale));
}

const char* AdapterFormatName(AdapterFormat f) {
  switch (f) {
    case AdapterFormat::kPeft: return "peft";
    case AdapterFormat::kGgufLora: return "gguf-lora";
    case AdapterFormat::kInMemory: return "in-memory";
  }
  return "?";
}

absl::StatusOr<std::unique_ptr<LoraAdapter>> LoraAdapter::Create(
    std::string id, std::string source, AdapterFormat format, int n_layers,
    std::vector<LoraProjectionInfo> projections) {
  constexpr int64_t kMaxDim = int64_t{1} << 24;
  if (n_layers < 0 || n_layers > 4096) {
    return absl::InvalidArgumentError(absl::StrFormat("adapter: bad layer count %d", n_layers));
  }
  std::unique_ptr<LoraAdapter> ad(new LoraAdapter());
  ad->id_ = std::move(id);
  ad->source_ = std::move(source);
  ad->format_ = format;
  ad->n_layers_ = n_layers;
  // Deterministic order: by layer, then target.
  std::sort(projections.begin(), projections.end(),
            [](const LoraProjectionInfo& x, const LoraProjectionInfo& y) {
              return x.layer != y.layer ? x.layer < y.layer : x.target < y.target;
            });
  std::vector<bool> seen(static_cast<size_t>(n_layers) * kNumLoraTargets, false);
  size_t total = 0;
  for (const LoraProjectionInfo& p : projections) {
    if (p.layer < 0 || p.layer >= n_layers) {
      return absl::InvalidArgumentError(
          absl::StrFormat("adapter: layer %d out of range [0, %d)", p.layer, n_layers));
    }
    if (p.rank < 1 || p.rank > kMaxDim || p.h_in < 1 || p.h_in > kMaxDim || p.h_out < 1 ||
        p.h_out > kMaxDim) {
      return absl::InvalidArgumentError(
          absl::StrFormat("adapter: layer %d %s: bad rank %d or widths %d -> %d", p.layer,
                          PeftModuleName(p.target), p.rank, p.h_in, p.h_out));
    }
    if (!std::isfinite(p.scale) || std::fabs(p.scale) > kMaxLoraScale) {
      return absl::InvalidArgumentError(
          absl::StrFormat("adapter: layer %d %s: scale %g is not finite or beyond +-%g",
                          p.layer, PeftModuleName(p.target), p.scale, kMaxLoraScale));
    }
    const size_t slot = static_cast<size_t>(p.layer) * kNumLoraTargets +
                        static_cast<int>(p.target);
    if (seen[slot]) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "adapter: layer %d %s given twice", p.layer, PeftModuleName(p.target)));
    }
    seen[slot] = true;
    ad->a_off_.push_back(total);
    total += static_cast<size_t>(p.rank) * p.h_in;
    ad->b_off_.push_back(total);
    total += static_cast<size_t>(p.h_out) * p.rank;
    ad->max_rank_ = std::max(ad->max_rank_, p.rank);
  }
  ad->n_elems_ = total;
  ad->storage_.reset(new (std::nothrow) uint16_t[std::max<size_t>(total, 1)]());
  if (ad->storage_ == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("adapter: cannot allocate %d bytes", total * 2));
  }
  ad->infos_ = std::move(projections);
  ad->pairs_.resize(ad->infos_.size());
  ad->index_.assign(static_cast<size_t>(n_layers) * kNumLoraTargets, nullptr);
  bool has[kNumLoraTargets] = {};
  for (size_t i = 0; i < ad->infos_.size(); ++i) {
    const LoraProjectionInfo& p = ad->infos_[i];
    kernels::LoraPair& pair = ad->pairs_[i];
    pair.a = ad->storage_.get() + ad->a_off_[i];
    pair.b = ad->storage_.get() + ad->b_off_[i];
    pair.rank = p.rank;
    pair.scale = p.scale;
    ad->index_[static_cast<size_t>(p.layer) * kNumLoraTargets + static_cast<int>(p.target)] =
        &pair;
    has[static_cast<int>(p.target)] = true;
  }
  for (LoraTarget t : kAllLoraTargets) {
    if (has[static_cast<int>(t)]) ad->targets_.push_back(t);
  }
  return ad;
}

uint64_t LoraAdapter::Fingerprint() const {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) {
      h ^= b[i];
      h *= 1099511628211ull;
    }
  };
  for (const LoraProjectionInfo& p : infos_) {
    const int32_t v[5] = {p.layer, static_cast<int32_t>(p.target), p.rank, p.h_in, p.h_out};
    mix(v, sizeof(v));
    mix(&p.scale, sizeof(p.scale));
  }
  mix(storage_.get(), n_elems_ * sizeof(uint16_t));
  return h;
}

}  // namespace loom
