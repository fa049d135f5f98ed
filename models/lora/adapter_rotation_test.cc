// RotateLoraAdapter: the rotated copy's delta on a rotated model's input equals the
// original adapter's delta on the unrotated model's input (rotated back into the residual
// basis for o and down), to BF16 precision, for every projection of a tiny GQA config.
#include "models/lora/adapter_rotation.h"

#include <cmath>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/dtype.h"
#include "models/lora/lora_test_util.h"

namespace loom {
namespace {

std::vector<double> Delta(const LoraAdapter& a, size_t i, const std::vector<float>& x) {
  const LoraProjectionInfo& p = a.projections()[i];
  std::vector<double> v(p.rank, 0.0), y(p.h_out, 0.0);
  for (int r = 0; r < p.rank; ++r) {
    for (int j = 0; j < p.h_in; ++j) v[r] += double(Bf16ToFp32(a.a(i)[r * p.h_in + j])) * x[j];
  }
  for (int o = 0; o < p.h_out; ++o) {
    for (int r = 0; r < p.rank; ++r) y[o] += double(Bf16ToFp32(a.b(i)[o * p.rank + r])) * v[r];
    y[o] *= p.scale;
  }
  return y;
}

// A model description with only the norm scales (what SetFoldedNorms reads).
std::unique_ptr<ModelSource> NormsOnly(const LlamaConfig& c, std::mt19937& rng) {
  auto s = std::make_unique<ModelSource>();
  s->config_ = c;
  std::uniform_real_distribution<float> u(0.2f, 2.5f);
  for (int l = 0; l < c.n_layers; ++l) {
    for (const char* n : {"attn_norm", "ffn_norm"}) {
      std::vector<uint8_t> buf(c.hidden * sizeof(float));
      float* g = reinterpret_cast<float*>(buf.data());
      for (int j = 0; j < c.hidden; ++j) g[j] = u(rng);
      WeightTensor t;
      t.name = absl::StrCat("blk.", l, ".", n, ".weight");
      t.dtype = DType::kF32;
      t.shape = {c.hidden};
      t.data = buf.data();
      t.nbytes = buf.size();
      s->owned_.push_back(std::move(buf));
      s->tensors_[t.name] = t;
    }
  }
  return s;
}

std::unique_ptr<LoraAdapter> RandomAdapter(const LlamaConfig& cfg, std::mt19937& rng) {
  std::vector<LoraProjectionInfo> infos;
  for (int l = 0; l < cfg.n_layers; ++l) {
    for (LoraTarget t : kAllLoraTargets) {
      const ProjectionShape sh = BaseProjectionShape(cfg, t);
      infos.push_back({l, t, 4, 0.5f, sh.h_in, sh.h_out});
    }
  }
  auto a = LoraAdapter::Create("a", "src", AdapterFormat::kInMemory, cfg.n_layers, infos);
  EXPECT_TRUE(a.ok()) << a.status();
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (size_t i = 0; i < (*a)->projections().size(); ++i) {
    const LoraProjectionInfo& p = (*a)->projections()[i];
    for (int k = 0; k < p.rank * p.h_in; ++k) (*a)->mutable_a(i)[k] = Fp32ToBf16(g(rng));
    for (int k = 0; k < p.h_out * p.rank; ++k) (*a)->mutable_b(i)[k] = Fp32ToBf16(g(rng));
  }
  return *std::move(a);
}

double RelativeError(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

TEST(AdapterRotationTest, RotatedDeltaOnRotatedInputEqualsDelta) {
  const LlamaConfig cfg = testing::TinyLoraBase();  // hidden 64, q 64, intermediate 96
  std::mt19937 rng(11);
  for (bool online : {false, true}) {
    SCOPED_TRACE(online ? "online M_o, M_d" : "no online transforms");
    auto rot = ModelRotation::Create(cfg, {5, online, online});
    ASSERT_TRUE(rot.ok()) << rot.status();
    ASSERT_TRUE(rot->SetFoldedNorms(*NormsOnly(cfg, rng)).ok());
    std::unique_ptr<LoraAdapter> adapter = RandomAdapter(cfg, rng);
    auto rotated = RotateLoraAdapter(*adapter, *rot);
    ASSERT_TRUE(rotated.ok()) << rotated.status();
    std::normal_distribution<float> g(0.0f, 1.0f);
    for (size_t i = 0; i < adapter->projections().size(); ++i) {
      const LoraProjectionInfo& p = adapter->projections()[i];
      SCOPED_TRACE(absl::StrCat("layer ", p.layer, " ", PeftModuleName(p.target)));
      // u: what the rotated model feeds the projection; x: what the unrotated one does.
      std::vector<float> u(p.h_in), x(p.h_in);
      for (float& v : u) v = g(rng);
      x = u;
      std::vector<double> want;
      switch (p.target) {
        case LoraTarget::kQ: case LoraTarget::kK: case LoraTarget::kV:
        case LoraTarget::kGate: case LoraTarget::kUp: {
          // u = R RMSNorm(x0) (unit scale); the unrotated input is RMSNorm(x0) ⊙ g = Rᵀu ⊙ g.
          rot->residual().Apply(x.data(), 1, /*transpose=*/true);
          const bool ffn = p.target == LoraTarget::kGate || p.target == LoraTarget::kUp;
          const std::vector<float>& gamma = ffn ? rot->ffn_norm(p.layer) : rot->attn_norm(p.layer);
          for (int j = 0; j < p.h_in; ++j) x[j] *= gamma[j];
          want = Delta(*adapter, i, x);
          break;
        }
        case LoraTarget::kO: case LoraTarget::kDown: {
          // u = M a (M = I when not online); the output lands in the rotated residual: R y.
          const kernels::HadamardTransform* m =
              p.target == LoraTarget::kO ? rot->attn_out() : rot->silu_mul();
          if (m != nullptr) m->Apply(x.data(), 1, /*transpose=*/true);
          const std::vector<double> y = Delta(*adapter, i, x);
          std::vector<float> yf(y.begin(), y.end());
          rot->residual().Apply(yf.data(), 1);
          want.assign(yf.begin(), yf.end());
          break;
        }
      }
      const std::vector<double> got = Delta(**rotated, i, u);
      // BF16 rounding of A' and B' (relative 2^-9 per weight, random signs).
      EXPECT_LT(RelativeError(got, want), 6e-3);
      // Not a trivial pass: the unrotated adapter on the rotated input is far off.
      EXPECT_GT(RelativeError(Delta(*adapter, i, u), want), 0.3);
    }
  }
}

TEST(AdapterRotationTest, Refusals) {
  const LlamaConfig cfg = testing::TinyLoraBase();
  std::mt19937 rng(3);
  std::unique_ptr<LoraAdapter> adapter = RandomAdapter(cfg, rng);
  auto rot = ModelRotation::Create(cfg, {1, true, true});
  ASSERT_TRUE(rot.ok());
  EXPECT_EQ(RotateLoraAdapter(*adapter, *rot).status().code(),
            absl::StatusCode::kFailedPrecondition);  // no folded norms
  LlamaConfig wider = cfg;
  wider.hidden = 128;
  auto wrong = ModelRotation::Create(wider, {1, false, false});
  ASSERT_TRUE(wrong.ok());
  LlamaConfig wider_norms = cfg;
  wider_norms.hidden = 128;
  ASSERT_TRUE(wrong->SetFoldedNorms(*NormsOnly(wider_norms, rng)).ok());
  auto refused = RotateLoraAdapter(*adapter, *wrong);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("does not fit"), std::string::npos) << refused.status();
}

}  // namespace
}  // namespace loom
