// Atom quantized GEMM throughput vs cuBLAS FP16 (cublasGemmEx, FP32 accumulation) at
// M = 256 tokens, N = K = 4096 (and M = 16, 1 for decode), median of 7 runs of 50 calls
// (CUDA events). Prints us per GEMM and effective TOPS (2·M·N·K / time).
// Rows: w4a4 (no outliers; 128 INT8 outliers), w4a8 + 128 outliers, w8a8, and the
// activation quantizer alone. cuBLAS is loaded with dlopen (libcublas.so.13, else .12) so
// the binary runs where cuBLAS is absent (its row then says so). Exit code 2 without a GPU.
//   bazel run --config=cuda //kernels/cuda:atom_gemm_benchmark
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <vector>

#include "kernels/cuda/cuda_atom.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/dtype.h"
#include "kernels/quant/atom_format.h"
#include "kernels/quant/weight_packing.h"

namespace loom::kernels::cuda {
namespace {

constexpr int kN = 4096, kK = 4096;
constexpr int kCalls = 50, kRuns = 7;

// Median microseconds per call of fn (queued kCalls times between two events).
double TimeUs(const std::function<void()>& fn) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  fn();  // warm-up
  cudaDeviceSynchronize();
  std::vector<double> us;
  for (int r = 0; r < kRuns; ++r) {
    cudaEventRecord(a);
    for (int c = 0; c < kCalls; ++c) fn();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    us.push_back(1000.0 * ms / kCalls);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(us.begin(), us.end());
  return us[kRuns / 2];
}

std::vector<float> Pseudo(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (float& f : v) {
    seed = seed * 1664525u + 1013904223u;
    f = static_cast<float>(static_cast<int32_t>(seed >> 8) - (1 << 23)) / (1 << 23);
  }
  return v;
}

quant::QuantSpec Spec(int n_outliers, int w_bits, int a_bits) {
  quant::QuantSpec s;
  s.k = kK;
  s.n_outliers = n_outliers;
  s.group = 128;
  s.w_bits = w_bits;
  s.a_bits = a_bits;
  return s;
}

struct CublasApi {
  using CreateFn = cublasStatus_t (*)(cublasHandle_t*);
  using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                      int, int, int, const void*, const void*, cudaDataType,
                                      int, const void*, cudaDataType, int, const void*, void*,
                                      cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  void* lib = nullptr;
  CreateFn create = nullptr;
  GemmExFn gemm = nullptr;
  bool Load() {
    for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
      lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (lib != nullptr) break;
    }
    if (lib == nullptr) return false;
    create = reinterpret_cast<CreateFn>(dlsym(lib, "cublasCreate_v2"));
    gemm = reinterpret_cast<GemmExFn>(dlsym(lib, "cublasGemmEx"));
    return create != nullptr && gemm != nullptr;
  }
};

void Report(const char* what, int m, double us) {
  const double tops = 2.0 * m * kN * kK / (us * 1e6);
  std::printf("%-34s M=%-4d %9.1f us  %7.1f TOPS\n", what, m, us, tops);
}

int Run() {
  if (absl::StatusOr<int> c = CudaDeviceCount(); !c.ok()) {
    std::printf("no CUDA device: %s\n", c.status().ToString().c_str());
    return 2;
  }
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device: %s (sm_%d%d); GEMM y[M,%d] = x[M,%d] W^T\n", prop.name, prop.major,
              prop.minor, kN, kK);
  const int max_m = 256;
  const std::vector<float> w = Pseudo(size_t(kN) * kK, 1);
  const std::vector<float> x = Pseudo(size_t(max_m) * kK, 2);
  auto dx = DeviceBuffer<float>::FromHost(x);
  auto dy = DeviceBuffer<float>::Allocate(size_t(max_m) * kN);
  if (!dx.ok() || !dy.ok()) return 1;

  struct Scheme {
    const char* name;
    int outliers, w_bits, a_bits;
  };
  for (const Scheme& s : {Scheme{"atom w4a4 (mma s4)", 0, 4, 4},
                          Scheme{"atom w4a4 + 128 int8 outliers", 128, 4, 4},
                          Scheme{"atom w4a8 + 128 outliers (s8)", 128, 4, 8},
                          Scheme{"atom w8a8 (mma s8)", 0, 8, 8}}) {
    const quant::QuantSpec spec = Spec(s.outliers, s.w_bits, s.a_bits);
    absl::StatusOr<quant::AtomWeight> aw = quant::QuantizeWeightRTN(w.data(), kN, spec);
    if (!aw.ok()) return 1;
    absl::StatusOr<CudaAtomWeight> dw = CudaAtomWeight::Upload(aw->view());
    absl::StatusOr<CudaAtomActivations> acts = CudaAtomActivations::Create(spec, max_m);
    if (!dw.ok() || !acts.ok()) {
      std::printf("%s: %s\n", s.name, (dw.ok() ? acts.status() : dw.status()).ToString().c_str());
      return 1;
    }
    for (int m : {256, 16, 1}) {
      if (!AtomQuantize(dx->get(), m, nullptr, &*acts, nullptr).ok()) return 1;
      absl::Status st;
      const double us = TimeUs([&] { st.Update(AtomMatMul(*dw, *acts, dy->get())); });
      if (!st.ok()) {
        std::printf("%s: %s\n", s.name, st.ToString().c_str());
        return 1;
      }
      Report(s.name, m, us);
    }
    if (s.outliers == 128 && s.a_bits == 4) {
      const double us = TimeUs([&] { (void)AtomQuantize(dx->get(), 256, nullptr, &*acts, nullptr); });
      std::printf("%-34s M=%-4d %9.1f us\n", "  activation quantize (w4a4+outl.)", 256, us);
    }
  }

  CublasApi api;
  if (!api.Load()) {
    std::printf("cublas fp16: libcublas not found (dlopen), no baseline\n");
    return 0;
  }
  cublasHandle_t handle = nullptr;
  if (api.create(&handle) != CUBLAS_STATUS_SUCCESS) {
    std::printf("cublas fp16: cublasCreate failed\n");
    return 1;
  }
  std::vector<uint16_t> wh(w.size()), xh(x.size());
  for (size_t i = 0; i < w.size(); ++i) wh[i] = Fp32ToFp16(w[i]);
  for (size_t i = 0; i < x.size(); ++i) xh[i] = Fp32ToFp16(x[i]);
  auto dwh = DeviceBuffer<uint16_t>::FromHost(wh);
  auto dxh = DeviceBuffer<uint16_t>::FromHost(xh);
  auto dyh = DeviceBuffer<uint16_t>::Allocate(size_t(max_m) * kN);
  if (!dwh.ok() || !dxh.ok() || !dyh.ok()) return 1;
  const float alpha = 1.0f, beta = 0.0f;
  for (int m : {256, 16, 1}) {
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    // Row-major y[m, N] = x[m, K] W[N, K]^T is column-major y^T = W^T(op T) x^T.
    const double us = TimeUs([&] {
      st = api.gemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, kN, m, kK, &alpha, dwh->get(), CUDA_R_16F,
                    kK, dxh->get(), CUDA_R_16F, kK, &beta, dyh->get(), CUDA_R_16F, kN,
                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    });
    if (st != CUBLAS_STATUS_SUCCESS) {
      std::printf("cublasGemmEx failed: %d\n", static_cast<int>(st));
      return 1;
    }
    Report("cublas fp16 (GemmEx, fp32 acc)", m, us);
  }
  return 0;
}

}  // namespace
}  // namespace loom::kernels::cuda

int main() { return loom::kernels::cuda::Run(); }
