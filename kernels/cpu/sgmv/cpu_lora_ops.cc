#include "kernels/cpu/sgmv/cpu_lora_ops.h"

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kernels/cpu/sgmv/lora_kernels.h"

namespace loom::kernels {
namespace {

constexpr int kShrinkRowBlock = 8;     // rank rows per shrink item
constexpr int kTokenChunk = 32;        // tokens per item (largest)
constexpr int kExpandBlockBytes = 16384;  // target B bytes per expand item

int CeilDiv(int a, int b) { return (a + b - 1) / b; }
int RoundUp8(int a) { return (a + 7) / 8 * 8; }

// One unit of parallel work: rows [r0, r1) of segment `seg`'s weight for tokens [t0, t1).
struct Item {
  const LoraPair* lora;
  int32_t r0, r1, t0, t1;
};

bool Active(const LoraSegment& s, int v_stride, bool need_a) {
  return s.lora != nullptr && s.lora->rank > 0 && s.lora->rank <= v_stride &&
         s.begin >= 0 && s.begin < s.end && (need_a ? s.lora->a : s.lora->b) != nullptr;
}

class CpuLoraOps final : public LoraOps {
 public:
  CpuLoraOps(ThreadPool* pool, const sgmv::LoraKernelTable* k, std::string name)
      : pool_(pool), k_(k), name_(std::move(name)) {}

  std::string_view name() const override { return name_; }

  void SgmvShrink(const float* x, int h_in, const LoraSegment* segs, int n_segs, float* v,
                  int v_stride) override {
    std::lock_guard<std::mutex> lock(mu_);
    Shrink(x, h_in, segs, n_segs, v, v_stride);
  }

  void SgmvExpand(const float* v, int v_stride, const LoraSegment* segs, int n_segs,
                  int h_out, float* y) override {
    std::lock_guard<std::mutex> lock(mu_);
    Expand(v, v_stride, segs, n_segs, h_out, y);
  }

  void Bgmv(const float* x, int h_in, int n, const int32_t* idx, const LoraPair* loras,
            int h_out, float* v, int v_stride, float* y) override {
    std::lock_guard<std::mutex> lock(mu_);
    // Runs of equal indices become segments; the kernels are the SGMV ones, so each token's
    // result is bitwise what SGMV gives it.
    bgmv_segs_.clear();
    for (int t = 0; t < n;) {
      int e = t + 1;
      while (e < n && idx[e] == idx[t]) ++e;
      if (idx[t] >= 0) bgmv_segs_.push_back(LoraSegment{t, e, &loras[idx[t]]});
      t = e;
    }
    const int ns = static_cast<int>(bgmv_segs_.size());
    Shrink(x, h_in, bgmv_segs_.data(), ns, v, v_stride);
    Expand(v, v_stride, bgmv_segs_.data(), ns, h_out, y);
  }

 private:
  int Threads() const { return pool_ == nullptr ? 1 : pool_->size(); }

  // Token chunk so that there are at least ~2 items per thread when the row split alone
  // gives fewer (few segments, small ranks).
  int TokenChunk(int row_items, int max_len) const {
    const int want = 2 * Threads();
    if (Threads() == 1 || row_items >= want) return kTokenChunk;
    const int split = CeilDiv(want, std::max(row_items, 1));
    return std::clamp(CeilDiv(max_len, split), 2, kTokenChunk);
  }

  template <class Fn>
  void Run(Fn fn) {
    const int64_t n = static_cast<int64_t>(items_.size());
    if (n == 0) return;
    if (pool_ == nullptr || pool_->size() == 1 || n == 1) {
      fn(0, n);
      return;
    }
    // Runs of consecutive items per chunk, so that each item can prefetch the next one's
    // weights on the same thread.
    const int64_t grain = std::max<int64_t>(1, n / (4 * pool_->size()));
    pool_->ParallelFor(n, grain, [&fn](int64_t b, int64_t e) { fn(b, e); });
  }

  void Shrink(const float* x, int h_in, const LoraSegment* segs, int n_segs, float* v,
              int v_stride) {
    items_.clear();
    if (h_in <= 0) return;
    int row_items = 0, max_len = 0;
    for (int s = 0; s < n_segs; ++s) {
      if (!Active(segs[s], v_stride, true)) continue;
      row_items += CeilDiv(segs[s].lora->rank, kShrinkRowBlock);
      max_len = std::max(max_len, segs[s].end - segs[s].begin);
    }
    const int tc = TokenChunk(row_items, max_len);
    for (int s = 0; s < n_segs; ++s) {
      if (!Active(segs[s], v_stride, true)) continue;
      const int rank = segs[s].lora->rank;
      for (int t = segs[s].begin; t < segs[s].end; t += tc) {
        const int te = std::min(t + tc, segs[s].end);
        for (int r = 0; r < rank; r += kShrinkRowBlock) {
          items_.push_back(Item{segs[s].lora, r, std::min(r + kShrinkRowBlock, rank), t, te});
        }
      }
    }
    const Item* items = items_.data();
    const sgmv::LoraKernelTable* k = k_;
    Run([=](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const Item& it = items[i];
        // Prefetch the next item's weights unless it is the same rows for other tokens.
        const void* pf = nullptr;
        int64_t pf_bytes = 0;
        if (i + 1 < e && (items[i + 1].lora != it.lora || items[i + 1].t0 == it.t0)) {
          const Item& nx = items[i + 1];
          pf = nx.lora->a + static_cast<int64_t>(nx.r0) * h_in;
          pf_bytes = int64_t{2} * (nx.r1 - nx.r0) * h_in;
        }
        k->shrink(x + static_cast<int64_t>(it.t0) * h_in, h_in, it.t1 - it.t0, it.lora->a, h_in,
                  it.r0, it.r1, v + static_cast<int64_t>(it.t0) * v_stride, v_stride, pf,
                  pf_bytes);
      }
    });
  }

  void Expand(const float* v, int v_stride, const LoraSegment* segs, int n_segs, int h_out,
              float* y) {
    items_.clear();
    if (h_out <= 0) return;
    // Blocks of h_out rows of about kExpandBlockBytes of B each, split further (down to 8
    // rows) when there are fewer than ~2 items per thread.
    auto blocks_of = [h_out](int rank) {
      const int rows = std::max(8, RoundUp8(kExpandBlockBytes / (2 * rank)));
      return CeilDiv(h_out, rows);
    };
    int row_items = 0, max_len = 0;
    for (int s = 0; s < n_segs; ++s) {
      if (!Active(segs[s], v_stride, false)) continue;
      row_items += blocks_of(segs[s].lora->rank);
      max_len = std::max(max_len, segs[s].end - segs[s].begin);
    }
    const int want = 2 * Threads();
    const int widen = Threads() > 1 && row_items > 0 && row_items < want
                          ? CeilDiv(want, row_items) : 1;
    const int tc = TokenChunk(row_items * widen, max_len);
    for (int s = 0; s < n_segs; ++s) {
      if (!Active(segs[s], v_stride, false)) continue;
      const int nb = std::min(CeilDiv(h_out, 8), blocks_of(segs[s].lora->rank) * widen);
      const int rows = RoundUp8(CeilDiv(h_out, nb));
      for (int t = segs[s].begin; t < segs[s].end; t += tc) {
        const int te = std::min(t + tc, segs[s].end);
        for (int o = 0; o < h_out; o += rows) {
          items_.push_back(Item{segs[s].lora, o, std::min(o + rows, h_out), t, te});
        }
      }
    }
    const Item* items = items_.data();
    const sgmv::LoraKernelTable* k = k_;
    Run([=](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const Item& it = items[i];
        const void* pf = nullptr;
        int64_t pf_bytes = 0;
        if (i + 1 < e && (items[i + 1].lora != it.lora || items[i + 1].t0 == it.t0)) {
          const Item& nx = items[i + 1];
          pf = nx.lora->b + static_cast<int64_t>(nx.r0) * nx.lora->rank;
          pf_bytes = int64_t{2} * (nx.r1 - nx.r0) * nx.lora->rank;
        }
        k->expand(v + static_cast<int64_t>(it.t0) * v_stride, v_stride, it.t1 - it.t0,
                  it.lora->b, it.lora->rank, it.lora->scale, it.r0, it.r1,
                  y + static_cast<int64_t>(it.t0) * h_out, h_out, pf, pf_bytes);
      }
    });
  }

  ThreadPool* const pool_;
  const sgmv::LoraKernelTable* const k_;
  const std::string name_;
  std::mutex mu_;
  std::vector<Item> items_;
  std::vector<LoraSegment> bgmv_segs_;
};

}  // namespace

std::unique_ptr<LoraOps> CreateCpuLoraOps(ThreadPool* pool) {
  return *CreateCpuLoraOpsWithIsa(pool, LoraIsa::kAuto);
}

absl::StatusOr<std::unique_ptr<LoraOps>> CreateCpuLoraOpsWithIsa(ThreadPool* pool, LoraIsa isa) {
  const bool avx2 = sgmv::Avx2LoraSupported();
  if (isa == LoraIsa::kAuto) isa = avx2 ? LoraIsa::kAvx2 : LoraIsa::kScalar;
  if (isa == LoraIsa::kAvx2) {
    if (!avx2) return absl::FailedPreconditionError("CPU lacks AVX2+FMA for the LoRA kernels");
    return std::unique_ptr<LoraOps>(
        new CpuLoraOps(pool, sgmv::Avx2LoraKernels(), "cpu-lora-avx2"));
  }
  return std::unique_ptr<LoraOps>(
      new CpuLoraOps(pool, sgmv::ScalarLoraKernels(), "cpu-lora-scalar"));
}

}  // namespace loom::kernels
