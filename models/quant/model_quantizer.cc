#include "models/quant/model_quantizer.h"

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/quant/weight_packing.h"
#include "models/quant/channel_permutation.h"
#include "models/quant/clip_search.h"
#include "models/quant/gptq.h"
#include "models/quant/linear_quantizer.h"

namespace loom::quant {
namespace {

// Adds every kErrorRowStride-th row's d^T H d and w^T H w to error's entry for p.
void AccumulateOutputError(const std::vector<float>& w, const kernels::quant::AtomWeight& q,
                           const std::vector<double>& h, int p, OutputErrorStats* error) {
  const int k = q.spec.k;
  const std::vector<float> deq = kernels::quant::DequantizeWeight(q.view());
  std::vector<double> d(k), hd(k), hw(k), wr(k);
  for (int64_t r = 0; r < q.rows; r += OutputErrorStats::kErrorRowStride) {
    for (int j = 0; j < k; ++j) {
      wr[j] = w[r * k + j];
      d[j] = wr[j] - deq[r * k + j];
    }
    double num = 0, den = 0;
    for (int i = 0; i < k; ++i) {
      const double* hi = h.data() + static_cast<size_t>(i) * k;
      double a = 0, b = 0;
      for (int j = 0; j < k; ++j) {
        a += hi[j] * d[j];
        b += hi[j] * wr[j];
      }
      num += d[i] * a;
      den += wr[i] * b;
    }
    error->num[p] += num;
    error->den[p] += den;
  }
}

// OwqScores over the projections of `layer` that read activation a (base order).
absl::StatusOr<std::vector<double>> OwqLayerScores(const ModelSource& f32, int layer, int a,
                                                   const std::vector<double>& energy,
                                                   const QuantizedCheckpointMeta& meta) {
  std::vector<std::pair<const float*, int64_t>> ws;
  const int64_t k = static_cast<int64_t>(energy.size());
  for (int p = 0; p < kNumQuantProjections; ++p) {
    const auto proj = static_cast<QuantProjection>(p);
    if (static_cast<int>(InputOf(proj)) != a) continue;
    const std::string name = BaseWeightName(layer, proj);
    absl::StatusOr<const WeightTensor*> t = f32.Tensor(name);
    if (!t.ok()) return absl::InvalidArgumentError(std::string(t.status().message()));
    const WeightTensor& w = **t;
    if (w.dtype != DType::kF32 || w.shape.size() != 2 || w.shape[1] != k || w.shape[0] <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": expected an F32 [rows, ", k, "] weight for OWQ scores"));
    }
    ws.push_back({reinterpret_cast<const float*>(w.data), w.shape[0]});
  }
  return OwqScores(energy, ws, meta.group_size, meta.weight_bits);
}

bool RotationKeepsOutliers(const RotationSpec& s, int a) {
  switch (static_cast<QuantActivation>(a)) {
    case QuantActivation::kAttnNorm:
    case QuantActivation::kFfnNorm: return s.residual_outliers > 0;
    case QuantActivation::kAttnOut: return s.attn_out_outliers > 0;
    case QuantActivation::kSiluMul: return s.silu_mul_outliers > 0;
  }
  return false;
}

// The rotation's order for activation a of `layer`, or nullptr.
const std::vector<int32_t>* FixedOrder(const QuantizedCheckpointMeta& meta,
                                       const RotationOrders* orders, int layer, int a) {
  if (!meta.rotation || orders == nullptr || !RotationKeepsOutliers(meta.rotation->spec, a)) {
    return nullptr;
  }
  switch (static_cast<QuantActivation>(a)) {
    case QuantActivation::kAttnNorm:
    case QuantActivation::kFfnNorm: return orders->residual.empty() ? nullptr : &orders->residual;
    case QuantActivation::kAttnOut:
      return layer < static_cast<int>(orders->attn_out.size()) ? &orders->attn_out[layer] : nullptr;
    case QuantActivation::kSiluMul:
      return layer < static_cast<int>(orders->silu_mul.size()) ? &orders->silu_mul[layer] : nullptr;
  }
  return nullptr;
}

}  // namespace

QuantizedCheckpointMeta MetaFor(const QuantOptions& o, const OutlierCounts& outliers,
                                int n_layers) {
  QuantizedCheckpointMeta m;
  m.scheme = o.scheme;
  m.group_size = o.group_size;
  m.weight_bits = kernels::quant::SchemeWeightBits(o.scheme);
  m.activation_bits = kernels::quant::SchemeActivationBits(o.scheme);
  m.outliers = outliers;
  m.gptq = o.gptq;
  m.clip_search = o.clip_search;
  m.gptq_options = {o.gptq_damp, o.gptq_act_order, o.gptq_static_groups,
                    o.gptq_hessian_scale_search};
  m.w4_full_range = o.w4_full_range;
  m.outlier_selection = o.outlier_selection;
  m.refit_scales = o.refit_scales;
  m.n_layers = n_layers;
  if (o.rotation) m.rotation = RotationMeta{*o.rotation, ""};  // fingerprint: the caller's
  return m;
}

absl::StatusOr<QuantizedLayer> QuantizeLayer(const ModelSource& f32, int layer,
                                             const CalibrationStats& stats,
                                             const QuantizedCheckpointMeta& meta,
                                             const QuantOptions& o,
                                             OutputErrorStats* error,
                                             const RotationOrders* orders) {
  if (layer < 0 || layer >= static_cast<int>(stats.layers.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("quantize: no calibration statistics for layer ", layer));
  }
  if (o.gptq && !stats.has_hessian) {
    return absl::FailedPreconditionError("quantize: GPTQ needs calibration Hessians");
  }
  const auto& act = stats.layers[layer];
  QuantizedLayer out;
  std::array<std::vector<double>, kNumQuantActivations> energy;
  std::array<std::optional<GptqFactor>, kNumQuantActivations> factor;
  std::array<std::vector<double>, kNumQuantActivations> hperm;  // with refit_scales
  for (int a = 0; a < kNumQuantActivations; ++a) {
    std::vector<double> score = act[a].energy;
    if (o.outlier_selection == "owq") {
      absl::StatusOr<std::vector<double>> s = OwqLayerScores(f32, layer, a, act[a].energy, meta);
      if (!s.ok()) return s.status();
      score = *std::move(s);
    }
    absl::StatusOr<std::vector<int32_t>> perm = absl::InvalidArgumentError("no order");
    const std::vector<int32_t>* fixed = FixedOrder(meta, orders, layer, a);
    if (fixed != nullptr) {
      perm = *fixed;
    } else if (meta.rotation && RotationKeepsOutliers(meta.rotation->spec, a)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer ", layer, " ", QuantActivationName(static_cast<QuantActivation>(a)),
          ": the rotation keeps outliers out but no channel order was given"));
    } else {
      perm = OutlierPermutation(score, meta.outliers[a]);
    }
    if (!perm.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer ", layer, " ", QuantActivationName(static_cast<QuantActivation>(a)), ": ",
          perm.status().message()));
    }
    out.perm[a] = *std::move(perm);
    energy[a] = PermuteVector(act[a].energy, out.perm[a]);
    if (o.gptq) {
      const std::vector<double> h = PermuteSymmetric(act[a].hessian, out.perm[a]);
      std::vector<int> order;
      if (o.gptq_act_order) {
        std::vector<double> diag(act[a].k);
        for (int j = 0; j < act[a].k; ++j) diag[j] = h[static_cast<size_t>(j) * act[a].k + j];
        absl::StatusOr<std::vector<int>> ord = ActOrder(diag, meta.outliers[a]);
        if (!ord.ok()) return ord.status();
        order = *std::move(ord);
      }
      absl::StatusOr<GptqFactor> f = PrepareGptq(h, act[a].k, o.gptq_damp, order);
      if (o.refit_scales) hperm[a] = h;
      if (!f.ok()) {
        return absl::Status(f.status().code(),
                            absl::StrCat("layer ", layer, " ",
                                         QuantActivationName(static_cast<QuantActivation>(a)),
                                         ": ", f.status().message()));
      }
      factor[a] = *std::move(f);
    }
  }
  const std::vector<float> ratios = ClipRatios(meta.clip_search);
  const std::vector<int32_t>& mid_perm = out.perm[static_cast<int>(QuantActivation::kSiluMul)];
  for (int p = 0; p < kNumQuantProjections; ++p) {
    const auto proj = static_cast<QuantProjection>(p);
    const int a = static_cast<int>(InputOf(proj));
    const int k = act[a].k;
    const std::string name = BaseWeightName(layer, proj);
    absl::StatusOr<const WeightTensor*> t = f32.Tensor(name);
    if (!t.ok()) return absl::InvalidArgumentError(std::string(t.status().message()));
    const WeightTensor& w = **t;
    if (w.dtype != DType::kF32 || w.shape.size() != 2 || w.shape[1] != k || w.shape[0] <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": expected an F32 [rows, ", k, "] weight (dequantize the model first), got ",
          std::string(DTypeName(w.dtype)), " with ", w.shape.size(), " dimensions"));
    }
    const int64_t rows = w.shape[0];
    std::vector<float> permuted(rows * k);
    kernels::quant::PermuteColumns(reinterpret_cast<const float*>(w.data), rows, k,
                                   out.perm[a].data(), permuted.data());
    // A rotated model's online M_d mixes every channel: gate/up rows stay in the base
    // order and silu_mul's permutation applies after M_d (quantized_checkpoint.h).
    const bool rows_in_silu_order = !(meta.rotation && meta.rotation->spec.online_silu_mul);
    if (rows_in_silu_order && (proj == QuantProjection::kGate || proj == QuantProjection::kUp)) {
      if (rows != static_cast<int64_t>(mid_perm.size())) {
        return absl::InvalidArgumentError(absl::StrCat(name, " has ", rows, " rows but silu_mul has ",
                                                       mid_perm.size(), " channels"));
      }
      permuted = GatherRows(permuted.data(), k, mid_perm);
    }
    LinearQuantInput in;
    in.w = permuted.data();
    in.rows = rows;
    in.spec = meta.Spec(proj, k);
    in.energy = energy[a].data();
    in.ratios = ratios;
    in.gptq = factor[a] ? &*factor[a] : nullptr;
    in.full_range = o.w4_full_range;
    in.gptq_static_groups = o.gptq_static_groups;
    in.gptq_hessian_scale_search = o.gptq_hessian_scale_search;
    in.refit_scales = o.refit_scales;
    in.hessian = o.refit_scales ? hperm[a].data() : nullptr;
    in.threads = o.threads;
    absl::StatusOr<kernels::quant::AtomWeight> q = QuantizeLinear(in);
    if (!q.ok()) {
      return absl::Status(q.status().code(), absl::StrCat(name, ": ", q.status().message()));
    }
    if (error != nullptr && stats.has_hessian) {
      AccumulateOutputError(permuted, *q, PermuteSymmetric(act[a].hessian, out.perm[a]), p, error);
    }
    out.proj[p] = *std::move(q);
  }
  return out;
}

absl::StatusOr<std::vector<QuantizedLayer>> QuantizeModel(
    const ModelSource& f32, const CalibrationStats& stats, const QuantizedCheckpointMeta& meta,
    const QuantOptions& o, const std::function<void(int, int)>& progress,
    OutputErrorStats* error, const RotationOrders* orders) {
  const int n = f32.config().n_layers;
  if (static_cast<int>(stats.layers.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat("quantize: statistics for ", stats.layers.size(),
                                                   " layers, the model has ", n));
  }
  std::vector<QuantizedLayer> layers;
  layers.reserve(n);
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<QuantizedLayer> l = QuantizeLayer(f32, i, stats, meta, o, error, orders);
    if (!l.ok()) return l.status();
    layers.push_back(*std::move(l));
    if (progress) progress(i + 1, n);
  }
  return layers;
}

}  // namespace loom::quant
