// RAII device memory for host code (tests, benchmarks, the CUDA ops' workspaces).
// Host code with CUDA headers (CUDA_COPTS).
#ifndef LOOM_KERNELS_CUDA_DEVICE_BUFFER_H_
#define LOOM_KERNELS_CUDA_DEVICE_BUFFER_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/cuda_status.h"

namespace loom::kernels::cuda {

// `count` elements of trivially copyable T in device memory (uninitialised), freed on
// destruction. Movable, not copyable.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { Reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      Reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      count_ = std::exchange(o.count_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Allocates `count` elements (count == 0: an empty buffer, get() == nullptr).
  static absl::StatusOr<DeviceBuffer> Allocate(size_t count) {
    DeviceBuffer b;
    if (count == 0) return b;
    void* p = nullptr;
    const absl::Status st = CudaStatus(cudaMalloc(&p, count * sizeof(T)), "cudaMalloc");
    if (!st.ok()) return st;
    b.ptr_ = static_cast<T*>(p);
    b.count_ = count;
    return b;
  }

  // Allocates host.size() elements and copies `host` into them (synchronous).
  static absl::StatusOr<DeviceBuffer> FromHost(const std::vector<T>& host) {
    absl::StatusOr<DeviceBuffer> b = Allocate(host.size());
    if (!b.ok() || host.empty()) return b;
    const absl::Status st = CudaStatus(
        cudaMemcpy(b->ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
        "cudaMemcpy H2D");
    if (!st.ok()) return st;
    return b;
  }

  // Copies the first `count` elements to host (synchronous; waits for prior work).
  absl::StatusOr<std::vector<T>> ToHost(size_t count) const {
    if (count > count_) return absl::InvalidArgumentError("DeviceBuffer::ToHost: count");
    std::vector<T> host(count);
    if (count == 0) return host;
    const absl::Status st = CudaStatus(
        cudaMemcpy(host.data(), ptr_, count * sizeof(T), cudaMemcpyDeviceToHost),
        "cudaMemcpy D2H");
    if (!st.ok()) return st;
    return host;
  }
  absl::StatusOr<std::vector<T>> ToHost() const { return ToHost(count_); }

  // Overwrites the first host.size() elements (synchronous).
  absl::Status CopyFromHost(const std::vector<T>& host) {
    if (host.size() > count_) return absl::InvalidArgumentError("DeviceBuffer: too small");
    if (host.empty()) return absl::OkStatus();
    return CudaStatus(
        cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
        "cudaMemcpy H2D");
  }

  T* get() const { return ptr_; }
  size_t size() const { return count_; }

 private:
  void Reset() {
    if (ptr_ != nullptr) cudaFree(ptr_);
    ptr_ = nullptr;
    count_ = 0;
  }
  T* ptr_ = nullptr;
  size_t count_ = 0;
};

}  // namespace loom::kernels::cuda

#endif  // LOOM_KERNELS_CUDA_DEVICE_BUFFER_H_
