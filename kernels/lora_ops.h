// Multi-adapter LoRA kernels (Punica's SGMV and BGMV): y += scale * (x Aᵀ) Bᵀ for many
// adapters in ONE call, each token using its own adapter.
//
// Shapes (one projection of one layer, h_in -> h_out):
//   x: [T, h_in] FP32 row-major (the projection's unquantized input)
//   A: [rank, h_in] BF16 row-major   (PEFT lora_A.weight)
//   B: [h_out, rank] BF16 row-major  (PEFT lora_B.weight)
//   v: [T, v_stride] FP32 intermediate (v_stride >= the largest rank in the call)
//   y: [T, h_out] FP32, accumulated into
//
// Batch invariance (as kernels/backend.h): each token's result depends only on its own x
// row and its adapter, computed in a fixed order — bitwise the same whatever the segment
// lengths, the other segments or the thread count; SGMV and BGMV agree bitwise.
#ifndef LOOM_KERNELS_LORA_OPS_H_
#define LOOM_KERNELS_LORA_OPS_H_

#include <cstdint>
#include <memory>
#include <string_view>

namespace loom::kernels {

// One adapter's weights for one projection. rank may differ between adapters in the same
// call (no padding to the largest rank).
struct LoraPair {
  const uint16_t* a = nullptr;  // [rank, h_in] BF16
  const uint16_t* b = nullptr;  // [h_out, rank] BF16
  int rank = 0;
  float scale = 1.0f;           // alpha / rank (or alpha / sqrt(rank), rsLoRA)
};

// Tokens [begin, end) of the batch use `lora` (nullptr: no adapter on this projection:
// the segment is skipped at no cost). Segments are disjoint and ascending; empty
// segments (begin == end) are allowed.
struct LoraSegment {
  int32_t begin = 0;
  int32_t end = 0;
  const LoraPair* lora = nullptr;
};

class LoraOps {
 public:
  virtual ~LoraOps() = default;
  virtual std::string_view name() const = 0;

  // SGMV shrink: v[t, 0:rank_s) = x[t, :] · A_sᵀ for every token t of segment s.
  // Each segment's A is read once for all its tokens.
  virtual void SgmvShrink(const float* x, int h_in, const LoraSegment* segs, int n_segs,
                          float* v, int v_stride) = 0;

  // SGMV expand: y[t, :] += scale_s * v[t, 0:rank_s) · B_sᵀ for every token t of segment s.
  virtual void SgmvExpand(const float* v, int v_stride, const LoraSegment* segs, int n_segs,
                          int h_out, float* y) = 0;

  // BGMV: one adapter index per token (idx[t] = -1: none); loras[idx[t]] is token t's
  // adapter. Computes shrink and expand for n tokens: y[t] += scale * (x[t] Aᵀ) Bᵀ.
  // v: scratch [n, v_stride].
  virtual void Bgmv(const float* x, int h_in, int n, const int32_t* idx,
                    const LoraPair* loras, int h_out, float* v, int v_stride, float* y) = 0;
};

}  // namespace loom::kernels

#endif  // LOOM_KERNELS_LORA_OPS_H_
