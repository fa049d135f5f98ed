// CudaLoraOps: kernels::LoraOps (SGMV / BGMV) on a CUDA device. Public header: no CUDA
// headers.
//
// Pointer contract (differs from the CPU LoraOps, whose pointers are host memory): EVERY
// pointer passed to a CudaLoraOps method is a DEVICE pointer —
//   x, v, y: device FP32 arrays with the shapes of kernels/lora_ops.h;
//   segs: a device array of n_segs LoraSegment whose `lora` fields point to device
//     LoraPair structs whose a / b point to device BF16 weights (build it with
//     DeviceLoraTable below, once per step, and reuse it for every projection of every
//     layer whose adapters share the table);
//   Bgmv: idx is a device int32 array [n]; loras a device LoraPair array.
// So a call reads no host metadata and never synchronises: work is queued on the ops'
// stream (capturable into a CUDA graph once the workspace exists; it is allocated in
// Create, never inside a call).
//
// The interface returns void, so errors are sticky: status() returns the first one —
// an argument error found on the host (the call then does nothing), a launch error, or
// (after synchronising the stream) a segment the device found to end past max_tokens.
#ifndef LOOM_KERNELS_CUDA_CUDA_LORA_OPS_H_
#define LOOM_KERNELS_CUDA_CUDA_LORA_OPS_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/lora_ops.h"

struct CUstream_st;  // cudaStream_t is CUstream_st*.

namespace loom::kernels::cuda {

struct CudaLoraOpsOptions {
  int max_tokens = 2048;    // tokens per call (the split-K workspace's rows)
  int max_h_in = 16384;     // largest h_in of a shrink
  int max_v_stride = 128;   // largest v_stride (<= 1024)
  CUstream_st* stream = nullptr;  // nullptr: the default stream
};

class CudaLoraOps final : public LoraOps {
 public:
  // kInvalidArgument for bad options (checked before any CUDA call); kUnavailable
  // without a usable GPU; else the allocation status.
  static absl::StatusOr<std::unique_ptr<CudaLoraOps>> Create(const CudaLoraOpsOptions& opts);
  ~CudaLoraOps() override;

  std::string_view name() const override { return "cuda-lora"; }
  void SgmvShrink(const float* x, int h_in, const LoraSegment* segs, int n_segs, float* v,
                  int v_stride) override;
  void SgmvExpand(const float* v, int v_stride, const LoraSegment* segs, int n_segs,
                  int h_out, float* y) override;
  void Bgmv(const float* x, int h_in, int n, const int32_t* idx, const LoraPair* loras,
            int h_out, float* v, int v_stride, float* y) override;

  // First error so far (sticky). Synchronises the stream to read the device error flag.
  absl::Status status();

 private:
  struct Impl;
  explicit CudaLoraOps(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Device copies of a step's adapter metadata. Upload() takes HOST LoraSegment / LoraPair
// structs whose a / b are already DEVICE pointers, and writes one device buffer holding
// the distinct LoraPairs and the segments re-pointed at them. Synchronous copy (call it
// once per step, not per projection). segs() / pairs() stay valid until the next
// Upload() or destruction.
class DeviceLoraTable {
 public:
  DeviceLoraTable();
  ~DeviceLoraTable();
  DeviceLoraTable(const DeviceLoraTable&) = delete;
  DeviceLoraTable& operator=(const DeviceLoraTable&) = delete;

  // SGMV: segments (lora may be nullptr). pairs() holds the distinct adapters in first-
  // use order.
  absl::Status Upload(const LoraSegment* segs, int n_segs);
  // BGMV: an adapter array, copied in order (pairs()[i] = loras[i]); segs() is empty.
  absl::Status UploadPairs(const LoraPair* loras, int n_loras);

  const LoraSegment* segs() const { return segs_; }
  const LoraPair* pairs() const { return pairs_; }

 private:
  absl::Status Write(const std::vector<LoraPair>& pairs, const std::vector<LoraSegment>& segs);
  void* buf_ = nullptr;
  size_t bytes_ = 0;
  const LoraSegment* segs_ = nullptr;
  const LoraPair* pairs_ = nullptr;
};

}  // namespace loom::kernels::cuda

#endif  // LOOM_KERNELS_CUDA_CUDA_LORA_OPS_H_
