// The per-token CUDA kernels vs kernels/cpu's ReferenceBackend: SiLU*mul, rope, paged KV
// append (bitwise), paged attention over a shuffled CSR page table with GQA (batched
// prefill and decode), embedding gather (bitwise, F32 / F16 / BF16 / Q8_0). GPU tests
// skip without a device; argument checks run everywhere.
#include "kernels/cuda/cuda_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cpu/reference_backend.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/gpu_test_util.h"
#include "kernels/dtype.h"

namespace loom::kernels::cuda {
namespace {

std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& f : v) f = u(rng);
  return v;
}

template <typename T>
DeviceBuffer<T> Dev(const std::vector<T>& host) {
  absl::StatusOr<DeviceBuffer<T>> b = DeviceBuffer<T>::FromHost(host);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? std::move(*b) : DeviceBuffer<T>();
}

// |got - want| <= abs_tol + rel_tol * |want| everywhere.
void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, float abs_tol,
                float rel_tol, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= abs_tol + rel_tol * std::fabs(want[i])) &&
        ++bad <= 5) {
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << " want " << want[i];
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

TEST(CudaOpsTest, RejectsBadArgumentsBeforeTouchingTheDevice) {
  float f = 0.0f;
  int32_t i = 0;
  EXPECT_EQ(SiluMul(&f, &f, -1, &f).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(SiluMul(nullptr, nullptr, 0, nullptr).ok());
  EXPECT_EQ(Rope(&f, &i, 1, 1, 3, 1e4f, true).code(), absl::StatusCode::kInvalidArgument);
  KvLayout l{16, 3, 512};
  AttentionBatch b{1, &i, &i, &i, &i};
  EXPECT_EQ(PagedAttention(l, b, &f, 9, nullptr, nullptr, &f).code(),
            absl::StatusCode::kInvalidArgument);  // head_dim > 256
  l.head_dim = 64;
  EXPECT_EQ(PagedAttention(l, b, &f, 8, nullptr, nullptr, &f).code(),
            absl::StatusCode::kInvalidArgument);  // 8 % 3 != 0
  EXPECT_EQ(EmbeddingGather(DType::kQ4_1, &f, 1, 32, &i, 1, &f).code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(EmbeddingGather(DType::kQ8_0, &f, 1, 33, &i, 1, &f).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CudaOpsTest, SiluMulMatchesReference) {
  LOOM_SKIP_WITHOUT_GPU();
  const int64_t count = 3 * 1536 + 7;
  const std::vector<float> g = Random(count, 1, 8.0f), u = Random(count, 2, 2.0f);
  std::vector<float> want(count);
  CreateReferenceBackend()->SiluMul(g.data(), u.data(), count, want.data());
  auto dg = Dev(g), du = Dev(u);
  ASSERT_TRUE(SiluMul(dg.get(), du.get(), count, dg.get()).ok());  // y aliases gate
  ExpectNear(*dg.ToHost(), want, 0.0f, 2.4e-7f, "silu_mul");
}

TEST(CudaOpsTest, RopeMatchesReference) {
  LOOM_SKIP_WITHOUT_GPU();
  const std::vector<int32_t> pos = {0, 1, 17, 1000, 8191};
  const int n = static_cast<int>(pos.size());
  for (int head_dim : {64, 128}) {
    for (bool adjacent : {false, true}) {
      for (float theta : {10000.0f, 100000.0f}) {
        SCOPED_TRACE(::testing::Message() << "hd=" << head_dim << " adj=" << adjacent
                                          << " theta=" << theta);
        const int heads = 9;
        std::vector<float> x = Random(size_t(n) * heads * head_dim, head_dim, 2.0f);
        auto dx = Dev(x);
        auto dpos = Dev(pos);
        CreateReferenceBackend()->Rope(x.data(), pos.data(), n, heads, head_dim, theta,
                                       adjacent);
        ASSERT_TRUE(Rope(dx.get(), dpos.get(), n, heads, head_dim, theta, adjacent).ok());
        ExpectNear(*dx.ToHost(), x, 2e-6f, 0.0f, "rope");
      }
    }
  }
}

// Sequences of `lens` tokens in shuffled pages. Step 1 (prefill): every token of every
// sequence in one batch. Step 2 (decode): one new token per sequence.
TEST(CudaOpsTest, AppendKvAndPagedAttentionMatchReference) {
  LOOM_SKIP_WITHOUT_GPU();
  struct Shape {
    int n_heads, n_kv_heads, head_dim;
  };
  for (const Shape& sh : {Shape{9, 3, 64}, Shape{32, 8, 128}, Shape{4, 4, 256}}) {
    SCOPED_TRACE(::testing::Message() << "heads=" << sh.n_heads << "/" << sh.n_kv_heads
                                      << " hd=" << sh.head_dim);
    const KvLayout layout{16, sh.n_kv_heads, sh.head_dim};
    const std::vector<int> lens = {1, 37, 70, 16};
    // CSR page table: room for each sequence's prefill + 1 decode token.
    std::vector<int32_t> indptr = {0};
    for (int len : lens) indptr.push_back(indptr.back() + (len + 1 + 15) / 16);
    const int n_pages = indptr.back() + 3;  // 3 pages nobody owns
    std::vector<int32_t> table(n_pages);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), std::mt19937(5));
    table.resize(indptr.back());
    const size_t pool_elems = size_t(n_pages) * layout.page_elems();
    std::vector<uint16_t> k_pool(pool_elems, 0), v_pool(pool_elems, 0);
    auto dk_pool = Dev(k_pool), dv_pool = Dev(v_pool);
    auto dindptr = Dev(indptr), dtable = Dev(table);
    std::unique_ptr<Backend> ref = CreateReferenceBackend();

    for (int step = 0; step < 2; ++step) {
      std::vector<int32_t> seq, pos;
      for (int s = 0; s < static_cast<int>(lens.size()); ++s) {
        if (step == 0) {
          for (int p = 0; p < lens[s]; ++p) {
            seq.push_back(s);
            pos.push_back(p);
          }
        } else {
          seq.push_back(s);
          pos.push_back(lens[s]);
        }
      }
      const int n = static_cast<int>(seq.size());
      const int kv_width = sh.n_kv_heads * sh.head_dim, q_width = sh.n_heads * sh.head_dim;
      const std::vector<float> k = Random(size_t(n) * kv_width, 10 + step);
      const std::vector<float> v = Random(size_t(n) * kv_width, 20 + step);
      const std::vector<float> q = Random(size_t(n) * q_width, 30 + step, 2.0f);
      AttentionBatch hb{n, seq.data(), pos.data(), indptr.data(), table.data()};
      // The host pools are FP16 rows: the reference sees them as bytes (KvLayout kF16).
      ref->AppendKv(layout, hb, k.data(), v.data(), reinterpret_cast<uint8_t*>(k_pool.data()),
                    reinterpret_cast<uint8_t*>(v_pool.data()));
      std::vector<float> want(size_t(n) * q_width);
      ref->PagedAttention(layout, hb, q.data(), sh.n_heads,
                          reinterpret_cast<const uint8_t*>(k_pool.data()),
                          reinterpret_cast<const uint8_t*>(v_pool.data()), want.data());

      auto dseq = Dev(seq), dpos = Dev(pos);
      auto dk = Dev(k), dv = Dev(v), dq = Dev(q);
      auto dout = DeviceBuffer<float>::Allocate(want.size());
      ASSERT_TRUE(dout.ok());
      AttentionBatch db{n, dseq.get(), dpos.get(), dindptr.get(), dtable.get()};
      ASSERT_TRUE(AppendKv(layout, db, dk.get(), dv.get(), dk_pool.get(), dv_pool.get()).ok());
      ASSERT_TRUE(PagedAttention(layout, db, dq.get(), sh.n_heads, dk_pool.get(),
                                 dv_pool.get(), dout->get())
                      .ok());
      EXPECT_EQ(*dk_pool.ToHost(), k_pool) << "K pool, step " << step;
      EXPECT_EQ(*dv_pool.ToHost(), v_pool) << "V pool, step " << step;
      ExpectNear(*dout->ToHost(), want, 2e-5f, 1e-5f, step == 0 ? "prefill" : "decode");
    }
  }
}

TEST(CudaOpsTest, EmbeddingGatherMatchesDequantizeRow) {
  LOOM_SKIP_WITHOUT_GPU();
  const int rows = 50, cols = 576;
  const std::vector<int32_t> ids = {3, 0, 49, 3, -1, 50, 17};
  const int n = static_cast<int>(ids.size());
  const std::vector<float> vals = Random(size_t(rows) * cols, 9, 3.0f);
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0}) {
    SCOPED_TRACE(std::string(DTypeName(dt)));
    const size_t row_bytes = *DTypeRowBytes(dt, cols);
    std::vector<uint8_t> table(rows * row_bytes);
    std::mt19937 rng(4);
    for (int r = 0; r < rows; ++r) {
      uint8_t* row = table.data() + r * row_bytes;
      for (int c = 0; c < cols; ++c) {
        const float f = vals[size_t(r) * cols + c];
        if (dt == DType::kF32) reinterpret_cast<float*>(row)[c] = f;
        if (dt == DType::kF16) reinterpret_cast<uint16_t*>(row)[c] = Fp32ToFp16(f);
        if (dt == DType::kBF16) reinterpret_cast<uint16_t*>(row)[c] = Fp32ToBf16(f);
      }
      if (dt == DType::kQ8_0) {
        for (int b = 0; b < cols / 32; ++b) {
          BlockQ8_0 blk;
          blk.d = Fp32ToFp16(0.01f * (1 + rng() % 50));
          for (int j = 0; j < 32; ++j) blk.qs[j] = static_cast<int8_t>(int(rng() % 255) - 127);
          std::memcpy(row + b * sizeof(BlockQ8_0), &blk, sizeof(blk));
        }
      }
    }
    std::vector<float> want(size_t(n) * cols, 0.0f);
    for (int t = 0; t < n; ++t) {
      if (ids[t] >= 0 && ids[t] < rows) {
        DequantizeRow(dt, table.data() + ids[t] * row_bytes, want.data() + size_t(t) * cols,
                      cols);
      }
    }
    auto dtable = Dev(table);
    auto dids = Dev(ids);
    auto dout = DeviceBuffer<float>::Allocate(want.size());
    ASSERT_TRUE(dout.ok());
    ASSERT_TRUE(EmbeddingGather(dt, dtable.get(), rows, cols, dids.get(), n, dout->get()).ok());
    EXPECT_EQ(*dout->ToHost(), want);
  }
}

}  // namespace
}  // namespace loom::kernels::cuda
