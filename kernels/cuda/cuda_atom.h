// Atom-style quantized linear layers (kernels/quant/atom_format.h) on a CUDA device:
// weights uploaded once in the GPU layout (atom_gpu_layout.h), activations quantized on
// the device (optionally fused with RMSNorm or SiLU*mul), and the integer tensor-core GEMM
// whose result equals kernels/quant's ReferenceAtomKernels::MatMul bitwise.
// Public header: no CUDA headers. All float / int32 pointer arguments are DEVICE pointers;
// calls queue work on `stream` (nullptr: default stream) and do not synchronise.
//
// Supported: w4a4 (mma.sync m16n8k64 .s4 — the fast path on sm_80 / sm_89), w4a8 and w8a8
// (m16n8k32 .s8, the path for sm_90a, where INT4 MMA has no fast path), INT8 outliers
// (m16n8k32 .s8), group a multiple of 64, k <= kAtomGpuMaxK.
#ifndef LOOM_KERNELS_CUDA_CUDA_ATOM_H_
#define LOOM_KERNELS_CUDA_CUDA_ATOM_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/quant/atom_format.h"

struct CUstream_st;  // cudaStream_t is CUstream_st*.

namespace loom::kernels::cuda {

// A quantized weight in device memory (owning).
class CudaAtomWeight {
 public:
  // Repacks `w` (host memory) and copies it to the device (synchronous).
  // Unimplemented for unsupported specs; kUnavailable without a GPU.
  static absl::StatusOr<CudaAtomWeight> Upload(const quant::AtomWeightView& w);
  CudaAtomWeight(CudaAtomWeight&&) noexcept;
  CudaAtomWeight& operator=(CudaAtomWeight&&) noexcept;
  ~CudaAtomWeight();

  const quant::QuantSpec& spec() const;
  int rows() const;

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  explicit CudaAtomWeight(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Quantized activations in device memory, capacity fixed at creation.
class CudaAtomActivations {
 public:
  static absl::StatusOr<CudaAtomActivations> Create(const quant::QuantSpec& spec,
                                                    int max_rows);
  // Copies host activations (e.g. from the CPU reference) to the device (synchronous).
  static absl::StatusOr<CudaAtomActivations> FromHost(const quant::AtomActivations& x);
  CudaAtomActivations(CudaAtomActivations&&) noexcept;
  CudaAtomActivations& operator=(CudaAtomActivations&&) noexcept;
  ~CudaAtomActivations();

  // The first n() rows back in atom_format.h's host form (synchronises the device).
  absl::StatusOr<quant::AtomActivations> ToHost() const;

  const quant::QuantSpec& spec() const;
  int n() const;  // rows written by the last quantize call
  int max_rows() const;

  struct Impl;
  const Impl& impl() const { return *impl_; }
  Impl& impl() { return *impl_; }

 private:
  explicit CudaAtomActivations(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// out = quantize(permute(x)) for x [n, k] (source order); perm: device [k] or nullptr
// (identity); permuted (nullable): device [n, k] receives the unquantized permuted rows.
// Bitwise as quant::QuantizeActivationRow. InvalidArgument for n outside [0, max_rows],
// null x.
absl::Status AtomQuantize(const float* x, int n, const int32_t* perm, CudaAtomActivations* out,
                          float* permuted, CUstream_st* stream = nullptr);

// Fused RMSNorm + reorder + quantize: h = x / sqrt(mean(x^2) + eps) * gamma in FP32 on the
// device (so h may differ from the CPU reference's double RMSNorm in the last bit), then
// as AtomQuantize. normed (nullable): device [n, k] receives permute(h).
absl::Status AtomRmsNormQuantize(const float* x, const float* gamma, int n, float eps,
                                 const int32_t* perm, CudaAtomActivations* out, float* normed,
                                 CUstream_st* stream = nullptr);

// Fused SiLU*mul + quantize over rows already in permuted order: h = silu(gate) * up
// (double, rounded to float, as the CPU reference), then quantize. h_out (nullable).
absl::Status AtomSiluMulQuantize(const float* gate, const float* up, int n,
                                 CudaAtomActivations* out, float* h_out,
                                 CUstream_st* stream = nullptr);

// The online rotation of a rotated (QuaRot) model, kernels/rotation/hadamard_transform.h's
// T, in device memory (owning): its ±1 base matrix and signs.
class CudaHadamard {
 public:
  // kUnavailable without a GPU; InvalidArgument for n > kAtomGpuMaxK.
  static absl::StatusOr<CudaHadamard> Upload(const HadamardTransform& t);
  CudaHadamard(CudaHadamard&&) noexcept;
  CudaHadamard& operator=(CudaHadamard&&) noexcept;
  ~CudaHadamard();
  int n() const;

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  explicit CudaHadamard(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Fused reorder + rotation + quantize (AtomKernels::HadamardQuantize): r = permute(x) per
// row, its first t.n() channels <- T r[0, t.n()), then quantized as AtomQuantize's.
// Bitwise as the CPU reference. rotated (nullable): device [n, k] receives r.
// InvalidArgument as AtomQuantize, or t.n() > the spec's k.
absl::Status AtomHadamardQuantize(const float* x, int n, const CudaHadamard& t,
                                  const int32_t* perm, CudaAtomActivations* out, float* rotated,
                                  CUstream_st* stream = nullptr);

// Fused SiLU*mul + rotation + reorder + quantize (AtomKernels::SiluMulHadamardQuantize):
// h = silu(gate) * up (double, rounded to float, as the CPU reference) for rows in the
// ORIGINAL order, then as AtomHadamardQuantize(h).
absl::Status AtomSiluMulHadamardQuantize(const float* gate, const float* up, int n,
                                         const CudaHadamard& t, const int32_t* perm,
                                         CudaAtomActivations* out, float* rotated,
                                         CUstream_st* stream = nullptr);

// y [x.n(), w.rows()] = the Atom Result formula, bitwise as ReferenceAtomKernels::MatMul.
// InvalidArgument when the specs differ or y is null.
absl::Status AtomMatMul(const CudaAtomWeight& w, const CudaAtomActivations& x, float* y,
                        CUstream_st* stream = nullptr);

}  // namespace loom::kernels::cuda

#endif  // LOOM_KERNELS_CUDA_CUDA_ATOM_H_
