#include "kernels/cuda/cuda_atom.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/atom_gemm_launch.h"
#include "kernels/cuda/atom_gpu_layout.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/device_buffer.h"

namespace loom::kernels::cuda {

struct CudaAtomWeight::Impl {
  quant::QuantSpec spec;
  AtomGpuGeometry geo;
  int rows = 0;
  DeviceBuffer<uint8_t> q;
  DeviceBuffer<float> scales;
  DeviceBuffer<int8_t> q_outlier;
  DeviceBuffer<float> outlier_scales;
  AtomGpuWeights view() const {
    return AtomGpuWeights{rows, q.get(), scales.get(), q_outlier.get(), outlier_scales.get()};
  }
};

struct CudaAtomActivations::Impl {
  quant::QuantSpec spec;
  AtomGpuGeometry geo;
  int max_rows = 0;
  int n = 0;
  DeviceBuffer<uint8_t> q;
  DeviceBuffer<float> scales;
  DeviceBuffer<int8_t> q_outlier;
  DeviceBuffer<float> outlier_scales;
  AtomGpuActivations view() const {
    return AtomGpuActivations{n, q.get(), scales.get(), q_outlier.get(), outlier_scales.get()};
  }
};

namespace {

template <typename T>
absl::Status Upload(const std::vector<T>& host, DeviceBuffer<T>* dst) {
  absl::StatusOr<DeviceBuffer<T>> b = DeviceBuffer<T>::FromHost(host);
  if (!b.ok()) return b.status();
  *dst = std::move(*b);
  return absl::OkStatus();
}

template <typename T>
absl::Status Alloc(size_t count, DeviceBuffer<T>* dst) {
  absl::StatusOr<DeviceBuffer<T>> b = DeviceBuffer<T>::Allocate(count);
  if (!b.ok()) return b.status();
  *dst = std::move(*b);
  return absl::OkStatus();
}

}  // namespace

CudaAtomWeight::CudaAtomWeight(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaAtomWeight::CudaAtomWeight(CudaAtomWeight&&) noexcept = default;
CudaAtomWeight& CudaAtomWeight::operator=(CudaAtomWeight&&) noexcept = default;
CudaAtomWeight::~CudaAtomWeight() = default;
const quant::QuantSpec& CudaAtomWeight::spec() const { return impl_->spec; }
int CudaAtomWeight::rows() const { return impl_->rows; }

absl::StatusOr<CudaAtomWeight> CudaAtomWeight::Upload(const quant::AtomWeightView& w) {
  absl::StatusOr<AtomGpuWeightsHost> host = RepackWeightsForGpu(w);
  if (!host.ok()) return host.status();
  if (absl::StatusOr<int> count = CudaDeviceCount(); !count.ok()) return count.status();
  auto impl = std::make_unique<Impl>();
  impl->spec = w.spec;
  impl->geo = host->geo;
  impl->rows = host->rows;
  for (absl::Status st : {cuda::Upload(host->q, &impl->q), cuda::Upload(host->scales, &impl->scales),
                          cuda::Upload(host->q_outlier, &impl->q_outlier),
                          cuda::Upload(host->outlier_scales, &impl->outlier_scales)}) {
    if (!st.ok()) return st;
  }
  return CudaAtomWeight(std::move(impl));
}

CudaAtomActivations::CudaAtomActivations(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaAtomActivations::CudaAtomActivations(CudaAtomActivations&&) noexcept = default;
CudaAtomActivations& CudaAtomActivations::operator=(CudaAtomActivations&&) noexcept = default;
CudaAtomActivations::~CudaAtomActivations() = default;
const quant::QuantSpec& CudaAtomActivations::spec() const { return impl_->spec; }
int CudaAtomActivations::n() const { return impl_->n; }
int CudaAtomActivations::max_rows() const { return impl_->max_rows; }

absl::StatusOr<CudaAtomActivations> CudaAtomActivations::Create(const quant::QuantSpec& spec,
                                                                int max_rows) {
  absl::StatusOr<AtomGpuGeometry> geo = AtomGpuGeometryFor(spec);
  if (!geo.ok()) return geo.status();
  if (max_rows < 1) {
    return absl::InvalidArgumentError(absl::StrCat("CudaAtomActivations: max_rows ", max_rows));
  }
  if (absl::StatusOr<int> count = CudaDeviceCount(); !count.ok()) return count.status();
  auto impl = std::make_unique<Impl>();
  impl->spec = spec;
  impl->geo = *geo;
  impl->max_rows = max_rows;
  const size_t rows = static_cast<size_t>(max_rows);
  for (absl::Status st : {Alloc(rows * geo->act_row_bytes(), &impl->q),
                          Alloc(rows * geo->n_groups, &impl->scales),
                          Alloc(rows * geo->n_out_pad, &impl->q_outlier),
                          Alloc(rows, &impl->outlier_scales)}) {
    if (!st.ok()) return st;
  }
  return CudaAtomActivations(std::move(impl));
}

absl::StatusOr<CudaAtomActivations> CudaAtomActivations::FromHost(
    const quant::AtomActivations& x) {
  absl::StatusOr<AtomGpuActivationsHost> host = PackActivationsForGpu(x);
  if (!host.ok()) return host.status();
  absl::StatusOr<CudaAtomActivations> out = Create(x.spec, std::max(x.n, 1));
  if (!out.ok()) return out.status();
  Impl& m = *out->impl_;
  m.n = x.n;
  for (absl::Status st : {m.q.CopyFromHost(host->q), m.scales.CopyFromHost(host->scales),
                          m.q_outlier.CopyFromHost(host->q_outlier),
                          m.outlier_scales.CopyFromHost(host->outlier_scales)}) {
    if (!st.ok()) return st;
  }
  return out;
}

absl::StatusOr<quant::AtomActivations> CudaAtomActivations::ToHost() const {
  const Impl& m = *impl_;
  AtomGpuActivationsHost host;
  host.geo = m.geo;
  host.n = m.n;
  const size_t n = static_cast<size_t>(m.n);
  absl::StatusOr<std::vector<uint8_t>> q = m.q.ToHost(n * m.geo.act_row_bytes());
  absl::StatusOr<std::vector<float>> s = m.scales.ToHost(n * m.geo.n_groups);
  absl::StatusOr<std::vector<int8_t>> qo = m.q_outlier.ToHost(n * m.geo.n_out_pad);
  absl::StatusOr<std::vector<float>> so = m.outlier_scales.ToHost(n);
  for (const absl::Status& st : {q.status(), s.status(), qo.status(), so.status()}) {
    if (!st.ok()) return st;
  }
  host.q = std::move(*q);
  host.scales = std::move(*s);
  host.q_outlier = std::move(*qo);
  host.outlier_scales = std::move(*so);
  return UnpackActivationsFromGpu(m.spec, host);
}

namespace {

absl::Status Quantize(AtomPrologue mode, const float* x, const float* gamma_or_up, float eps,
                      int n, const int32_t* perm, CudaAtomActivations* out, float* permuted,
                      CUstream_st* stream, const char* what) {
  if (out == nullptr) return absl::InvalidArgumentError(absl::StrCat(what, ": null out"));
  CudaAtomActivations::Impl& m = out->impl();
  if (n < 0 || n > m.max_rows) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": n ", n, " outside [0, ", m.max_rows, "]"));
  }
  if (mode == AtomPrologue::kRmsNorm && (!(eps >= 0.0f) || eps == INFINITY)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": bad eps ", eps));
  }
  m.n = n;
  if (n == 0) return absl::OkStatus();
  if (x == nullptr || (mode != AtomPrologue::kPlain && gamma_or_up == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": null pointer"));
  }
  return CudaStatus(
      LaunchAtomQuantize(m.geo, mode, x, gamma_or_up, eps, perm, n, m.view(), permuted, stream),
      absl::StrCat(what, " launch"));
}

}  // namespace

absl::Status AtomQuantize(const float* x, int n, const int32_t* perm, CudaAtomActivations* out,
                          float* permuted, CUstream_st* stream) {
  return Quantize(AtomPrologue::kPlain, x, nullptr, 0.0f, n, perm, out, permuted, stream,
                  "AtomQuantize");
}

absl::Status AtomRmsNormQuantize(const float* x, const float* gamma, int n, float eps,
                                 const int32_t* perm, CudaAtomActivations* out, float* normed,
                                 CUstream_st* stream) {
  return Quantize(AtomPrologue::kRmsNorm, x, gamma, eps, n, perm, out, normed, stream,
                  "AtomRmsNormQuantize");
}

absl::Status AtomSiluMulQuantize(const float* gate, const float* up, int n,
                                 CudaAtomActivations* out, float* h_out, CUstream_st* stream) {
  return Quantize(AtomPrologue::kSiluMul, gate, up, 0.0f, n, nullptr, out, h_out, stream,
                  "AtomSiluMulQuantize");
}

struct CudaHadamard::Impl {
  int n = 0, k = 1, p = 1;
  float scale = 1.0f;
  DeviceBuffer<int8_t> hk;
  DeviceBuffer<float> signs;
  GpuHadamard view() const {
    GpuHadamard g;
    g.n = n;
    g.k = k;
    g.p = p;
    g.scale = scale;
    g.hk = hk.get();
    g.signs = signs.get();
    return g;
  }
};

CudaHadamard::CudaHadamard(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaHadamard::CudaHadamard(CudaHadamard&&) noexcept = default;
CudaHadamard& CudaHadamard::operator=(CudaHadamard&&) noexcept = default;
CudaHadamard::~CudaHadamard() = default;
int CudaHadamard::n() const { return impl_->n; }

// The rotating quantizer keeps h and hp in shared memory (h doubles as the rotation's
// scratch), as the plain one: kAtomGpuMaxK.
constexpr int kMaxRotatedK = kAtomGpuMaxK;

absl::StatusOr<CudaHadamard> CudaHadamard::Upload(const HadamardTransform& t) {
  if (t.n() > kMaxRotatedK) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaHadamard: n ", t.n(), " > ", kMaxRotatedK));
  }
  if (absl::StatusOr<int> count = CudaDeviceCount(); !count.ok()) return count.status();
  auto impl = std::make_unique<Impl>();
  impl->n = t.n();
  impl->k = t.base();
  impl->p = t.block();
  impl->scale = t.scale();
  if (absl::Status st = cuda::Upload(t.base_matrix(), &impl->hk); !st.ok()) return st;
  if (!t.signs().empty()) {
    if (absl::Status st = cuda::Upload(t.signs(), &impl->signs); !st.ok()) return st;
  }
  return CudaHadamard(std::move(impl));
}

namespace {

absl::Status RotateQuantize(AtomPrologue mode, const float* x, const float* up, int n,
                            const CudaHadamard& t, const int32_t* perm, CudaAtomActivations* out,
                            float* rotated, CUstream_st* stream, const char* what) {
  if (out == nullptr) return absl::InvalidArgumentError(absl::StrCat(what, ": null out"));
  CudaAtomActivations::Impl& m = out->impl();
  if (t.n() > m.spec.k) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the rotation has ", t.n(), " channels, the spec only ", m.spec.k));
  }
  if (n < 0 || n > m.max_rows) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": n ", n, " outside [0, ", m.max_rows, "]"));
  }
  m.n = n;
  if (n == 0) return absl::OkStatus();
  if (x == nullptr || (mode == AtomPrologue::kSiluMul && up == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": null pointer"));
  }
  return CudaStatus(LaunchAtomHadamardQuantize(m.geo, mode, x, up, t.impl().view(), perm, n,
                                               m.view(), rotated, stream),
                    absl::StrCat(what, " launch"));
}

}  // namespace

absl::Status AtomHadamardQuantize(const float* x, int n, const CudaHadamard& t,
                                  const int32_t* perm, CudaAtomActivations* out, float* rotated,
                                  CUstream_st* stream) {
  return RotateQuantize(AtomPrologue::kPlain, x, nullptr, n, t, perm, out, rotated, stream,
                        "AtomHadamardQuantize");
}

absl::Status AtomSiluMulHadamardQuantize(const float* gate, const float* up, int n,
                                         const CudaHadamard& t, const int32_t* perm,
                                         CudaAtomActivations* out, float* rotated,
                                         CUstream_st* stream) {
  return RotateQuantize(AtomPrologue::kSiluMul, gate, up, n, t, perm, out, rotated, stream,
                        "AtomSiluMulHadamardQuantize");
}

absl::Status AtomMatMul(const CudaAtomWeight& w, const CudaAtomActivations& x, float* y,
                        CUstream_st* stream) {
  if (!(w.spec() == x.spec())) {
    return absl::InvalidArgumentError("AtomMatMul: weight and activation specs differ");
  }
  if (x.n() == 0) return absl::OkStatus();
  if (y == nullptr) return absl::InvalidArgumentError("AtomMatMul: null y");
  const CudaAtomActivations::Impl& xm = x.impl();
  return CudaStatus(LaunchAtomGemm(w.impl().geo, w.impl().view(), xm.view(), y, stream),
                    "AtomMatMul launch");
}

}  // namespace loom::kernels::cuda
