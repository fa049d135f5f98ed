// Shared helpers for GPU tests: skip cleanly without a device, RAII device buffers.
// Test-only; host code with CUDA headers (CUDA_COPTS).
#ifndef LOOM_KERNELS_CUDA_GPU_TEST_UTIL_H_
#define LOOM_KERNELS_CUDA_GPU_TEST_UTIL_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device.h"

namespace loom::kernels::cuda::gpu_testing {

// True if a CUDA device is usable. The first call without one prints a single line
// "no CUDA device: skipping GPU tests (<reason>)".
inline bool GpuPresent() {
  static const bool present = [] {
    const absl::StatusOr<int> count = CudaDeviceCount();
    if (count.ok()) return true;
    std::printf("no CUDA device: skipping GPU tests (%s)\n",
                count.status().ToString().c_str());
    std::fflush(stdout);
    return false;
  }();
  return present;
}

#define LOOM_SKIP_WITHOUT_GPU()                                     \
  do {                                                              \
    if (!::loom::kernels::cuda::gpu_testing::GpuPresent()) GTEST_SKIP(); \
  } while (0)

// Device allocation of `count` floats, freed on destruction.
class DeviceFloats {
 public:
  explicit DeviceFloats(size_t count) : count_(count) {
    if (cudaMalloc(&ptr_, count * sizeof(float)) != cudaSuccess) ptr_ = nullptr;
  }
  ~DeviceFloats() { cudaFree(ptr_); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;

  float* get() const { return static_cast<float*>(ptr_); }
  bool ok() const { return ptr_ != nullptr; }

  void CopyFrom(const std::vector<float>& host) {
    ASSERT_LE(host.size(), count_);
    ASSERT_EQ(cudaMemcpy(ptr_, host.data(), host.size() * sizeof(float),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  void CopyTo(std::vector<float>* host, size_t count) const {
    ASSERT_LE(count, count_);
    host->resize(count);
    ASSERT_EQ(cudaMemcpy(host->data(), ptr_, count * sizeof(float),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
  }

 private:
  void* ptr_ = nullptr;
  size_t count_;
};

}  // namespace loom::kernels::cuda::gpu_testing

#endif  // LOOM_KERNELS_CUDA_GPU_TEST_UTIL_H_
