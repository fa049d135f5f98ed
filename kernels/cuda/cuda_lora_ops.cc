#include "kernels/cuda/cuda_lora_ops.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/sgmv_launch.h"

namespace loom::kernels::cuda {

struct CudaLoraOps::Impl {
  CudaLoraOpsOptions opts;
  float* partial = nullptr;  // [SgmvSplits(max_h_in), max_tokens, max_v_stride]
  int* error_flag = nullptr;
  absl::Status status;

  void Fail(absl::Status st) {
    if (status.ok()) status = std::move(st);
  }
  bool CheckShape(const char* op, int h, int v_stride, int n_segs) {
    if (h < 1 || v_stride < 1 || v_stride > opts.max_v_stride || n_segs < 0 ||
        n_segs > 65535) {
      Fail(absl::InvalidArgumentError(absl::StrCat(op, ": bad shape h=", h, " v_stride=",
                                                   v_stride, " n_segs=", n_segs)));
      return false;
    }
    return true;
  }
};

CudaLoraOps::CudaLoraOps(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

CudaLoraOps::~CudaLoraOps() {
  cudaFree(impl_->partial);
  cudaFree(impl_->error_flag);
}

absl::StatusOr<std::unique_ptr<CudaLoraOps>> CudaLoraOps::Create(
    const CudaLoraOpsOptions& opts) {
  if (opts.max_tokens < 1 || opts.max_h_in < 1 || opts.max_v_stride < 1 ||
      opts.max_v_stride > kSgmvMaxVStride) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaLoraOps: bad options max_tokens=", opts.max_tokens,
                     " max_h_in=", opts.max_h_in, " max_v_stride=", opts.max_v_stride));
  }
  const absl::StatusOr<int> count = CudaDeviceCount();
  if (!count.ok()) return count.status();
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  std::unique_ptr<CudaLoraOps> ops(new CudaLoraOps(std::move(impl)));
  Impl& m = *ops->impl_;
  const size_t ws = static_cast<size_t>(SgmvSplits(opts.max_h_in)) * opts.max_tokens *
                    opts.max_v_stride;
  absl::Status st = CudaStatus(cudaMalloc(reinterpret_cast<void**>(&m.partial), ws * sizeof(float)), "cudaMalloc");
  if (!st.ok()) return st;
  st = CudaStatus(cudaMalloc(reinterpret_cast<void**>(&m.error_flag), sizeof(int)), "cudaMalloc");
  if (!st.ok()) return st;
  st = CudaStatus(cudaMemset(m.error_flag, 0, sizeof(int)), "cudaMemset");
  if (!st.ok()) return st;
  return ops;
}

void CudaLoraOps::SgmvShrink(const float* x, int h_in, const LoraSegment* segs, int n_segs,
                             float* v, int v_stride) {
  Impl& m = *impl_;
  if (!m.CheckShape("SgmvShrink", h_in, v_stride, n_segs) || n_segs == 0) return;
  if (h_in > m.opts.max_h_in) {
    return m.Fail(absl::InvalidArgumentError(
        absl::StrCat("SgmvShrink: h_in ", h_in, " > max_h_in ", m.opts.max_h_in)));
  }
  if (x == nullptr || segs == nullptr || v == nullptr) {
    return m.Fail(absl::InvalidArgumentError("SgmvShrink: null pointer"));
  }
  SgmvSegments s;
  s.segs = segs;
  s.n_segs = n_segs;
  m.Fail(CudaStatus(LaunchSgmvShrink(x, h_in, s, v, v_stride, m.opts.max_tokens, m.partial,
                                     m.error_flag, m.opts.stream),
                    "SgmvShrink launch"));
}

void CudaLoraOps::SgmvExpand(const float* v, int v_stride, const LoraSegment* segs,
                             int n_segs, int h_out, float* y) {
  Impl& m = *impl_;
  if (!m.CheckShape("SgmvExpand", h_out, v_stride, n_segs) || n_segs == 0) return;
  if (v == nullptr || segs == nullptr || y == nullptr) {
    return m.Fail(absl::InvalidArgumentError("SgmvExpand: null pointer"));
  }
  SgmvSegments s;
  s.segs = segs;
  s.n_segs = n_segs;
  m.Fail(CudaStatus(LaunchSgmvExpand(v, v_stride, s, h_out, y, m.opts.stream),
                    "SgmvExpand launch"));
}

void CudaLoraOps::Bgmv(const float* x, int h_in, int n, const int32_t* idx,
                       const LoraPair* loras, int h_out, float* v, int v_stride, float* y) {
  Impl& m = *impl_;
  if (!m.CheckShape("Bgmv", h_in, v_stride, n) || !m.CheckShape("Bgmv", h_out, v_stride, n) ||
      n == 0) {
    return;
  }
  if (h_in > m.opts.max_h_in || n > m.opts.max_tokens) {
    return m.Fail(absl::InvalidArgumentError(absl::StrCat(
        "Bgmv: h_in ", h_in, " / n ", n, " exceed the options' max_h_in / max_tokens")));
  }
  if (x == nullptr || idx == nullptr || loras == nullptr || v == nullptr || y == nullptr) {
    return m.Fail(absl::InvalidArgumentError("Bgmv: null pointer"));
  }
  SgmvSegments s;
  s.idx = idx;
  s.loras = loras;
  s.n_segs = n;
  m.Fail(CudaStatus(LaunchSgmvShrink(x, h_in, s, v, v_stride, m.opts.max_tokens, m.partial,
                                     m.error_flag, m.opts.stream),
                    "Bgmv shrink launch"));
  m.Fail(CudaStatus(LaunchSgmvExpand(v, v_stride, s, h_out, y, m.opts.stream),
                    "Bgmv expand launch"));
}

absl::Status CudaLoraOps::status() {
  Impl& m = *impl_;
  if (!m.status.ok()) return m.status;
  m.Fail(CudaStatus(cudaStreamSynchronize(m.opts.stream), "CudaLoraOps sync"));
  if (!m.status.ok()) return m.status;
  int flag = 0;
  m.Fail(CudaStatus(cudaMemcpy(&flag, m.error_flag, sizeof(int), cudaMemcpyDeviceToHost),
                    "CudaLoraOps error flag"));
  if (m.status.ok() && flag != 0) {
    m.Fail(absl::InvalidArgumentError(absl::StrCat(
        "SgmvShrink: a segment ends past max_tokens ", m.opts.max_tokens, " (not computed)")));
  }
  return m.status;
}

DeviceLoraTable::DeviceLoraTable() = default;
DeviceLoraTable::~DeviceLoraTable() { cudaFree(buf_); }

absl::Status DeviceLoraTable::Write(const std::vector<LoraPair>& pairs,
                                    const std::vector<LoraSegment>& segs) {
  const size_t pair_bytes = pairs.size() * sizeof(LoraPair);
  const size_t bytes = pair_bytes + segs.size() * sizeof(LoraSegment);
  if (bytes > bytes_) {
    cudaFree(buf_);
    buf_ = nullptr;
    bytes_ = 0;
    absl::Status st = CudaStatus(cudaMalloc(&buf_, bytes), "cudaMalloc");
    if (!st.ok()) return st;
    bytes_ = bytes;
  }
  auto* base = static_cast<char*>(buf_);
  pairs_ = reinterpret_cast<const LoraPair*>(base);
  segs_ = reinterpret_cast<const LoraSegment*>(base + pair_bytes);
  // Segments were written with pair *indices* in `lora`; re-point them at device pairs.
  std::vector<char> host(bytes);
  if (pair_bytes > 0) std::memcpy(host.data(), pairs.data(), pair_bytes);
  for (size_t i = 0; i < segs.size(); ++i) {
    LoraSegment s = segs[i];
    if (s.lora != nullptr) s.lora = pairs_ + (reinterpret_cast<uintptr_t>(s.lora) - 1);
    std::memcpy(host.data() + pair_bytes + i * sizeof(LoraSegment), &s, sizeof(s));
  }
  if (bytes == 0) return absl::OkStatus();
  return CudaStatus(cudaMemcpy(buf_, host.data(), bytes, cudaMemcpyHostToDevice),
                    "DeviceLoraTable upload");
}

absl::Status DeviceLoraTable::Upload(const LoraSegment* segs, int n_segs) {
  if (n_segs < 0 || (n_segs > 0 && segs == nullptr)) {
    return absl::InvalidArgumentError("DeviceLoraTable::Upload: bad segments");
  }
  std::vector<LoraPair> pairs;
  std::unordered_map<const LoraPair*, uintptr_t> index;  // host pair -> 1 + slot
  std::vector<LoraSegment> out(segs, segs + n_segs);
  for (LoraSegment& s : out) {
    if (s.lora == nullptr) continue;
    auto [it, inserted] = index.emplace(s.lora, pairs.size() + 1);
    if (inserted) pairs.push_back(*s.lora);
    s.lora = reinterpret_cast<const LoraPair*>(it->second);  // index + 1, fixed in Write
  }
  return Write(pairs, out);
}

absl::Status DeviceLoraTable::UploadPairs(const LoraPair* loras, int n_loras) {
  if (n_loras < 0 || (n_loras > 0 && loras == nullptr)) {
    return absl::InvalidArgumentError("DeviceLoraTable::UploadPairs: bad pairs");
  }
  return Write(std::vector<LoraPair>(loras, loras + n_loras), {});
}

}  // namespace loom::kernels::cuda
