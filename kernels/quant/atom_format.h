// Atom-style low-bit linear layers (Zhao et al., "Atom: Low-bit Quantization for Efficient
// and Accurate LLM Serving", MLSys 2024): the contract shared by the quantizer
// (models/quant), the kernels (kernels/quant reference, kernels/cpu/quant, kernels/cuda)
// and the model runtime (models/llama).
//
// Channel order. Every quantized linear layer reads its input x [T, K] in a PERMUTED
// channel order: channel j of the permuted input is channel perm[j] of the model's
// original activation. The permutation puts the activation's n_outliers highest-energy
// channels (sum of x^2 over calibration tokens) LAST; the first k_normal = K - n_outliers
// channels are "normal". The weight's input columns are stored in the same order.
//
// Normal part: quantized in groups of `group` consecutive (permuted) channels, symmetric,
//   weights per (output row, group), activations per (token, group), both to `w_bits` /
//   `a_bits` (4 or 8). The last group may be partial: k_normal need not be a multiple of
//   `group`; storage is padded with zeros to k_normal_padded = n_groups * group.
// Outlier part: the last n_outliers channels, INT8 on both sides, weights per output
//   row, activations per token.
//
// Symmetric quantization rule (activations; the quantizer uses it for weights too, with
// a clip-searched absmax): qmax = 7 (4-bit) or 127 (8-bit); absmax = max |x| over the
// group; inv = absmax > 0 ? qmax / absmax : 0; q = clamp(nearbyint(x * inv), -qmax, qmax)
// in round-to-nearest-even (the default FP mode; SIMD cvtps_epi32 matches); scale =
// absmax / qmax. x ≈ q * scale.
//
// Result. y[t, r] = Σ_g  sa[t,g] · sw[r,g] · D[t,r,g]  +  so[t] · swo[r] · Do[t,r]
// with D[t,r,g] = Σ_{j in group g} qa[t,j] · qw[r,j]   (exact int32)
// and  Do[t,r]  = Σ_{j < n_outliers} qao[t,j] · qwo[r,j] (exact int32).
// Every implementation computes D and Do EXACTLY (the integer part); the float sum may be
// ordered freely but in a fixed order per output element, so results are batch-invariant
// (kernels/backend.h's contract): bitwise the same whatever T, the row's position and the
// thread count.
#ifndef LOOM_KERNELS_QUANT_ATOM_FORMAT_H_
#define LOOM_KERNELS_QUANT_ATOM_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/rotation/hadamard_transform.h"

namespace loom::kernels::quant {

// What a model runs its linear layers in. kNone = the stored GGUF/HF weights as today.
enum class QuantScheme : uint8_t {
  kNone,
  kW8A8,  // INT8 weights (per row, groups of `group`), INT8 activations (per token, groups)
  kW4A8,  // INT4 weights, INT8 activations
  kW4A4,  // INT4 weights and activations, INT8 outlier channels (Atom)
};

std::string_view QuantSchemeName(QuantScheme s);  // "none", "w8a8", "w4a8", "w4a4"
absl::StatusOr<QuantScheme> ParseQuantScheme(std::string_view name);
int SchemeWeightBits(QuantScheme s);      // 8, 4, 4 (0 for kNone)
int SchemeActivationBits(QuantScheme s);  // 8, 8, 4 (0 for kNone)

// Geometry and precision of one linear layer's input side.
struct QuantSpec {
  int k = 0;           // input channels, > 0
  int n_outliers = 0;  // in [0, k]; the last n_outliers permuted channels
  int group = 128;     // > 0 and even
  int w_bits = 4;      // 4 or 8
  int a_bits = 4;      // 4 or 8

  int k_normal() const { return k - n_outliers; }
  int n_groups() const { return (k_normal() + group - 1) / group; }
  int k_normal_padded() const { return n_groups() * group; }
  // Bytes of one weight row's normal part: 4-bit packs two values per byte.
  size_t weight_row_bytes() const {
    return w_bits == 4 ? static_cast<size_t>(k_normal_padded()) / 2
                       : static_cast<size_t>(k_normal_padded());
  }
  // OK, or InvalidArgument naming the bad field.
  absl::Status Validate() const;
};

// Same geometry and precision (every field equal).
bool operator==(const QuantSpec& a, const QuantSpec& b);
inline bool operator!=(const QuantSpec& a, const QuantSpec& b) { return !(a == b); }

// Packing of 4-bit weights: each group of `group` values occupies group/2 bytes; byte i
// of the group holds value i in its LOW nibble and value i + group/2 in its HIGH nibble,
// each stored offset-binary (nibble = q + 8, q in [-8, 7]; the quantizer emits [-7, 7]).
// 8-bit weights are plain int8, zero-padded per row to k_normal_padded.
inline int Int4FromNibble(uint8_t nibble) { return static_cast<int>(nibble & 0xF) - 8; }

// A backend's own copy of one weight in the layout its kernels read fastest, made once
// (at load) by AtomKernels::Prepare of that backend. Opaque outside the backend.
class PreparedAtomWeight {
 public:
  virtual ~PreparedAtomWeight() = default;
};

// A quantized weight W [rows, k] (permuted columns). Views into caller-owned memory.
struct AtomWeightView {
  QuantSpec spec;
  int64_t rows = 0;
  const uint8_t* q = nullptr;           // [rows, spec.weight_row_bytes()]
  const float* scales = nullptr;        // [rows, spec.n_groups()]
  const int8_t* q_outlier = nullptr;    // [rows, spec.n_outliers]; null when 0 outliers
  const float* outlier_scales = nullptr;  // [rows]; null when 0 outliers
  // Optional: the same weight as AtomKernels::Prepare laid it out (caller-owned, must
  // outlive the view). Kernels that did not make it ignore it and read the fields above.
  const PreparedAtomWeight* prepared = nullptr;
};

// Dynamically quantized activations x [n, k] (permuted channels), owned and reused
// (grown, never shrunk) across calls. Values stay UNPACKED as int8 lanes, whatever
// a_bits: activations are small next to weights, and kernels read them many times.
struct AtomActivations {
  QuantSpec spec;
  int n = 0;
  std::vector<int8_t> q;          // [n, spec.k_normal_padded()], zero-padded
  std::vector<float> scales;      // [n, spec.n_groups()]
  std::vector<int8_t> q_outlier;  // [n, spec.n_outliers]
  std::vector<float> outlier_scales;  // [n]
  // Sets spec and n and grows the buffers.
  void Resize(const QuantSpec& s, int rows);
};

// The Atom kernels a backend provides. Shapes as above; `perm` (nullable = identity) is
// the layer input's permutation [k]: permuted channel j reads source channel perm[j].
class AtomKernels {
 public:
  virtual ~AtomKernels() = default;
  virtual std::string_view name() const = 0;

  // out = quantize(permute(x)) for x [n, k] (source order). When `permuted` is not null it
  // also receives the unquantized permuted rows [n, k] (the LoRA path's input).
  virtual void Quantize(const float* x, int n, const int32_t* perm, const QuantSpec& spec,
                        AtomActivations* out, float* permuted) = 0;

  // Fused RMSNorm + reorder + quantize: h = x / rms(x) * gamma (source order, as
  // Backend::RmsNorm computes it bitwise), then as Quantize(h). `normed` (nullable)
  // receives permute(h) [n, k] unquantized.
  virtual void RmsNormQuantize(const float* x, const float* gamma, int n, float eps,
                               const int32_t* perm, const QuantSpec& spec,
                               AtomActivations* out, float* normed) = 0;

  // Fused SiLU*mul + quantize: h[i] = silu(gate[i]) * up[i] (as Backend::SiluMul, bitwise)
  // for rows [n, spec.k] already in permuted order (the quantizer permuted gate/up output
  // rows), then quantize (identity permutation). `h` (nullable) receives h unquantized.
  virtual void SiluMulQuantize(const float* gate, const float* up, int n,
                               const QuantSpec& spec, AtomActivations* out, float* h) = 0;

  // Reorder + online rotation (QuaRot) + quantize, fused: r = permute(x) per row of
  // x [n, k], then the first t.n() channels of r <- T r[0, t.n()) (the canonical sequence
  // of kernels/rotation/hadamard_transform.h, bitwise; the channels after them, Atom's
  // INT8 outliers when t.n() == spec.k_normal(), stay as they are), then quantized as
  // Quantize's. `rotated` (nullable) receives r [n, k] unquantized (the LoRA path's
  // input). REQUIRES t.n() <= spec.k.
  virtual void HadamardQuantize(const float* x, int n, const HadamardTransform& t,
                                const int32_t* perm, const QuantSpec& spec,
                                AtomActivations* out, float* rotated) = 0;

  // Fused SiLU*mul + reorder + rotation + quantize: h = silu(gate) * up (as
  // SiluMulQuantize computes it, bitwise) for rows [n, spec.k] in the projection's
  // ORIGINAL order (a rotated model's gate/up rows are not permuted), then as
  // HadamardQuantize(h). REQUIRES t.n() <= spec.k.
  virtual void SiluMulHadamardQuantize(const float* gate, const float* up, int n,
                                       const HadamardTransform& t, const int32_t* perm,
                                       const QuantSpec& spec, AtomActivations* out,
                                       float* rotated) = 0;

  // x [n, t.n()] <- T x (transpose: Tᵀ x) per row, in place, bitwise as
  // HadamardTransform::Apply (a rotated model's residual stream at embedding and head).
  virtual void HadamardRows(const HadamardTransform& t, float* x, int n, bool transpose) = 0;

  // A copy of `w` in this backend's fastest layout, for w.prepared (results are bitwise
  // those of the plain view); nullptr when the backend has none for w.spec. Load time.
  virtual std::unique_ptr<PreparedAtomWeight> Prepare(const AtomWeightView& w) {
    (void)w;
    return nullptr;
  }

  // y [x.n, w.rows] = dequantized (x · Wᵀ) per the Result formula above.
  // REQUIRES: x.spec == w.spec (same k, n_outliers, group, bits).
  virtual void MatMul(const AtomWeightView& w, const AtomActivations& x, float* y) = 0;

  // ys[i] [x.n, ws[i]->rows] = MatMul(*ws[i], x) for i < count: the linears that read one
  // activation (q/k/v; gate/up) in one call, each result exactly as MatMul's. A backend may
  // run them as one pass (the CPU kernels: one activation plan, one parallel region over
  // all rows). The default calls MatMul for each.
  virtual void MatMulMany(const AtomWeightView* const* ws, int count, const AtomActivations& x,
                          float* const* ys) {
    for (int i = 0; i < count; ++i) MatMul(*ws[i], x, ys[i]);
  }
};

}  // namespace loom::kernels::quant

#endif  // LOOM_KERNELS_QUANT_ATOM_FORMAT_H_
