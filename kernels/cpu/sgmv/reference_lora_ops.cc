#include "kernels/cpu/sgmv/reference_lora_ops.h"

#include <cstdint>

#include "kernels/dtype.h"

namespace loom::kernels {
namespace {

// Whether segment `s` is computed: an adapter with a positive rank that fits v_stride and
// non-null weights. Anything else is skipped (no output written), as in CpuLoraOps.
bool Active(const LoraSegment& s, int v_stride, bool need_a) {
  return s.lora != nullptr && s.lora->rank > 0 && s.lora->rank <= v_stride &&
         s.begin >= 0 && s.begin < s.end && (need_a ? s.lora->a : s.lora->b) != nullptr;
}

class ReferenceLoraOps final : public LoraOps {
 public:
  std::string_view name() const override { return "reference-lora"; }

  void SgmvShrink(const float* x, int h_in, const LoraSegment* segs, int n_segs, float* v,
                  int v_stride) override {
    for (int s = 0; s < n_segs; ++s) {
      if (!Active(segs[s], v_stride, true)) continue;
      const LoraPair& l = *segs[s].lora;
      for (int64_t t = segs[s].begin; t < segs[s].end; ++t) {
        for (int r = 0; r < l.rank; ++r) {
          double acc = 0;
          for (int k = 0; k < h_in; ++k) {
            acc += static_cast<double>(x[t * h_in + k]) *
                   Bf16ToFp32(l.a[static_cast<int64_t>(r) * h_in + k]);
          }
          v[t * v_stride + r] = static_cast<float>(acc);
        }
      }
    }
  }

  void SgmvExpand(const float* v, int v_stride, const LoraSegment* segs, int n_segs,
                  int h_out, float* y) override {
    for (int s = 0; s < n_segs; ++s) {
      if (!Active(segs[s], v_stride, false)) continue;
      const LoraPair& l = *segs[s].lora;
      for (int64_t t = segs[s].begin; t < segs[s].end; ++t) {
        for (int o = 0; o < h_out; ++o) {
          double acc = 0;
          for (int r = 0; r < l.rank; ++r) {
            acc += static_cast<double>(v[t * v_stride + r]) *
                   Bf16ToFp32(l.b[static_cast<int64_t>(o) * l.rank + r]);
          }
          y[t * h_out + o] += static_cast<float>(l.scale * acc);
        }
      }
    }
  }

  void Bgmv(const float* x, int h_in, int n, const int32_t* idx, const LoraPair* loras,
            int h_out, float* v, int v_stride, float* y) override {
    for (int t = 0; t < n; ++t) {
      if (idx[t] < 0) continue;
      const LoraSegment seg{t, t + 1, &loras[idx[t]]};
      SgmvShrink(x, h_in, &seg, 1, v, v_stride);
      SgmvExpand(v, v_stride, &seg, 1, h_out, y);
    }
  }
};

}  // namespace

std::unique_ptr<LoraOps> CreateReferenceLoraOps() { return std::make_unique<ReferenceLoraOps>(); }

}  // namespace loom::kernels
