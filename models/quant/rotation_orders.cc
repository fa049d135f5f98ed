#include "models/quant/rotation_orders.h"

#include "absl/strings/str_cat.h"
#include "kernels/dtype.h"
#include "models/quant/channel_permutation.h"

namespace loom::quant {

absl::StatusOr<RotationOrders> RotationOrdersFromStats(const CalibrationStats& st,
                                                       const RotationSpec& spec,
                                                       const ModelSource& base) {
  const LlamaConfig& c = base.config();
  if (static_cast<int>(st.layers.size()) != c.n_layers) {
    return absl::InvalidArgumentError(absl::StrCat("rotation orders: statistics for ",
                                                   st.layers.size(), " layers, the model has ",
                                                   c.n_layers));
  }
  RotationOrders out;
  if (spec.residual_outliers > 0) {
    std::vector<double> score(c.hidden, 0.0);
    for (int l = 0; l < c.n_layers; ++l) {
      for (QuantActivation a : {QuantActivation::kAttnNorm, QuantActivation::kFfnNorm}) {
        const ActivationStats& s = st.layers[l][static_cast<int>(a)];
        const std::string name = absl::StrCat(
            "blk.", l, a == QuantActivation::kAttnNorm ? ".attn_norm.weight" : ".ffn_norm.weight");
        absl::StatusOr<const WeightTensor*> t = base.Tensor(name);
        if (!t.ok()) return absl::InvalidArgumentError(std::string(t.status().message()));
        if (s.k != c.hidden || (*t)->cols() != c.hidden) {
          return absl::InvalidArgumentError(absl::StrCat("rotation orders: ", name, " width"));
        }
        std::vector<float> g(c.hidden);
        DequantizeRow((*t)->dtype, (*t)->data, g.data(), c.hidden);
        std::vector<double> e(c.hidden);
        double sum = 0;
        for (int j = 0; j < c.hidden; ++j) {
          const double gj = double(g[j]) * g[j];
          e[j] = gj > 0 ? s.energy[j] / gj : 0.0;
          sum += e[j];
        }
        if (sum > 0) {
          for (int j = 0; j < c.hidden; ++j) score[j] += e[j] / sum;
        }
      }
    }
    absl::StatusOr<std::vector<int32_t>> p = OutlierPermutation(score, spec.residual_outliers);
    if (!p.ok()) return p.status();
    out.residual = *std::move(p);
  }
  struct Online { int count; QuantActivation a; std::vector<std::vector<int32_t>>* dst; };
  for (Online o : {Online{spec.attn_out_outliers, QuantActivation::kAttnOut, &out.attn_out},
                   Online{spec.silu_mul_outliers, QuantActivation::kSiluMul, &out.silu_mul}}) {
    if (o.count == 0) continue;
    for (int l = 0; l < c.n_layers; ++l) {
      absl::StatusOr<std::vector<int32_t>> p =
          OutlierPermutation(st.layers[l][static_cast<int>(o.a)].energy, o.count);
      if (!p.ok()) return p.status();
      o.dst->push_back(*std::move(p));
    }
  }
  return out;
}

}  // namespace loom::quant
