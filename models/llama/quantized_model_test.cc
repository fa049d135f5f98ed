// The quantized mode of LlamaModel on the real SmolLM2 model, with weights quantized by RTN
// (no calibration) under RANDOM channel permutations with outliers, so that a mistake in
// folding any permutation (weights, fused activation reorder, gate/up row order, adapters)
// shows up as disagreement with the F32 path:
//   * W8A8 logits agree with the F32 (dequantized) model; declaring other permutations
//     than the weights were quantized with does not (the check can fail);
//   * a random adapter moves the quantized model's logits the way it moves the F32
//     model's, when permuted by PermuteLoraAdapter; an adapter whose lora_A columns are
//     left in the original order does not;
//   * W4A4 with outliers: a sequence alone == inside a mixed batch with adapters, bitwise;
//   * bad quantized weights are refused with InvalidArgument.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/sgmv/cpu_lora_ops.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/dtype.h"
#include "kernels/quant/reference_atom_kernels.h"
#include "kernels/quant/weight_packing.h"
#include "models/llama/llama_model.h"
#include "models/llama/quantized_loader.h"
#include "models/lora/adapter_permutation.h"
#include "models/lora/lora_adapter.h"
#include "models/quant/quant_names.h"
#include "models/quant/quantized_checkpoint.h"
#include "models/testing/dequantized_model.h"
#include "models/testing/test_model.h"
#include "models/tokenizer/tokenizer.h"
#include "scheduler/engine/lora_adapter_weights.h"

namespace loom {
namespace {

namespace kq = kernels::quant;

constexpr char kEnglish[] =
    "The village stood at the edge of a wide valley, where the river turned slowly toward "
    "the sea. Every morning the baker opened his shop before the sun had risen, and the smell "
    "of fresh bread drifted down the narrow street. Children walked to school in small "
    "groups, talking about the games they would play in the afternoon.";

// Outlier channels per activation (attn_norm, attn_out, ffn_norm, silu_mul): hidden 576 ->
// 512 normal = 4 groups; intermediate 1536 -> 1408 = 11 groups.
constexpr int kOutliers[4] = {64, 64, 64, 128};

std::vector<int32_t> RandomPerm(int k, std::mt19937& rng) {
  std::vector<int32_t> p(k);
  std::iota(p.begin(), p.end(), 0);
  std::shuffle(p.begin(), p.end(), rng);
  return p;
}

// RTN weights of every layer of `f32` (an all-F32 source) under random permutations
// (seed), in the checkpoint's layout (models/quant/quantized_checkpoint.h).
absl::StatusOr<std::shared_ptr<std::vector<quant::QuantizedLayer>>> BuildRtnLayers(
    const ModelSource& f32, kq::QuantScheme scheme, uint32_t seed) {
  const LlamaConfig& c = f32.config();
  const int h = c.hidden, qd = c.n_heads * c.head_dim, ff = c.intermediate;
  const int ks[4] = {h, qd, h, ff};
  auto layers = std::make_shared<std::vector<quant::QuantizedLayer>>(c.n_layers);
  std::mt19937 rng(seed);
  for (int l = 0; l < c.n_layers; ++l) {
    quant::QuantizedLayer& L = (*layers)[l];
    for (int a = 0; a < 4; ++a) L.perm[a] = RandomPerm(ks[a], rng);
    const std::vector<int32_t>& silu = L.perm[3];
    for (int p = 0; p < quant::kNumQuantProjections; ++p) {
      const auto proj = static_cast<quant::QuantProjection>(p);
      const int input = static_cast<int>(quant::InputOf(proj));
      absl::StatusOr<const WeightTensor*> t = f32.Tensor(quant::BaseWeightName(l, proj));
      if (!t.ok()) return t.status();
      const int64_t rows = (*t)->shape[0];
      const int k = static_cast<int>((*t)->shape[1]);
      const float* src = reinterpret_cast<const float*>((*t)->data);
      std::vector<float> w(static_cast<size_t>(rows) * k);
      kq::PermuteColumns(src, rows, k, L.perm[input].data(), w.data());
      if (proj == quant::QuantProjection::kGate || proj == quant::QuantProjection::kUp) {
        std::vector<float> rowp(w.size());  // stored row j = original row silu[j]
        for (int64_t j = 0; j < rows; ++j) {
          std::copy_n(w.data() + silu[j] * k, k, rowp.data() + j * k);
        }
        w.swap(rowp);
      }
      kq::QuantSpec spec;
      spec.k = k;
      spec.n_outliers = kOutliers[input];
      spec.group = 128;
      spec.w_bits = kq::SchemeWeightBits(scheme);
      spec.a_bits = kq::SchemeActivationBits(scheme);
      absl::StatusOr<kq::AtomWeight> q = kq::QuantizeWeightRTN(w.data(), rows, spec);
      if (!q.ok()) return q.status();
      L.proj[p] = *std::move(q);
    }
  }
  return layers;
}

// The layers above as QuantizedWeights. When `declare_seed` != 0 the views declare other
// random permutations than the weights were quantized with (a deliberately wrong model).
absl::StatusOr<QuantizedWeights> BuildRtn(const ModelSource& f32, kq::QuantScheme scheme,
                                          uint32_t seed, uint32_t declare_seed = 0) {
  auto layers = BuildRtnLayers(f32, scheme, seed);
  if (!layers.ok()) return layers.status();
  QuantizedWeights w = QuantizedWeightsFromLayers(*layers, scheme);
  if (declare_seed != 0) {
    struct Owner {
      std::shared_ptr<const void> layers;
      std::vector<std::vector<int32_t>> perms;
    };
    auto own = std::make_shared<Owner>();
    own->layers = w.owner;
    std::mt19937 rng(declare_seed);
    for (QuantizedLayerWeights& L : w.layers) {
      const int ks[4] = {L.q.spec.k, L.o.spec.k, L.gate.spec.k, L.down.spec.k};
      for (int a = 0; a < 4; ++a) own->perms.push_back(RandomPerm(ks[a], rng));
      const size_t b = own->perms.size() - 4;
      L.attn_norm_perm = own->perms[b].data();
      L.attn_out_perm = own->perms[b + 1].data();
      L.ffn_norm_perm = own->perms[b + 2].data();
      L.silu_mul_perm = own->perms[b + 3].data();
    }
    w.owner = own;
  }
  return w;
}

// A random adapter on all seven projections of every layer (rank 8): A ~ N(0, 1/h_in),
// B ~ N(0, sigma^2), scale 1.
std::unique_ptr<LoraAdapter> RandomAdapter(const LlamaConfig& cfg, uint32_t seed, float sigma) {
  std::vector<LoraProjectionInfo> infos;
  for (int l = 0; l < cfg.n_layers; ++l) {
    for (LoraTarget t : kAllLoraTargets) {
      const ProjectionShape sh = BaseProjectionShape(cfg, t);
      infos.push_back({l, t, 8, 1.0f, sh.h_in, sh.h_out});
    }
  }
  auto a = LoraAdapter::Create("rand", "test", AdapterFormat::kInMemory, cfg.n_layers, infos);
  EXPECT_TRUE(a.ok()) << a.status();
  std::mt19937 rng(seed);
  for (size_t i = 0; i < (*a)->projections().size(); ++i) {
    const LoraProjectionInfo& p = (*a)->projections()[i];
    std::normal_distribution<float> ga(0.0f, 1.0f / std::sqrt(static_cast<float>(p.h_in)));
    std::normal_distribution<float> gb(0.0f, sigma);
    for (int k = 0; k < p.rank * p.h_in; ++k) (*a)->mutable_a(i)[k] = Fp32ToBf16(ga(rng));
    for (int k = 0; k < p.h_out * p.rank; ++k) (*a)->mutable_b(i)[k] = Fp32ToBf16(gb(rng));
  }
  return *std::move(a);
}

std::vector<LayerChannelOrder> Orders(const LlamaModel& m) {
  return ChannelOrders(*m.quantized());
}

class QuantizedModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pool_ = new kernels::ThreadPool(2);
    backend_ = kernels::CreateCpuBackendOnPool(pool_).release();
    lora_ = kernels::CreateCpuLoraOps(pool_).release();
    atom_ = kq::CreateReferenceAtomKernels().release();
    auto src = ModelSource::Open(testing::DefaultModelPath());
    ASSERT_TRUE(src.ok()) << src.status();
    auto tok = Tokenizer::Create((*src)->vocabulary());
    ASSERT_TRUE(tok.ok());
    auto ids = (*tok)->Encode(kEnglish, false);
    ASSERT_TRUE(ids.ok());
    prompt_ = new std::vector<int32_t>(*ids);
    auto m = LlamaModel::Create(testing::DequantizedCopy(**src), backend_, lora_);
    ASSERT_TRUE(m.ok()) << m.status();
    f32_ = m->release();
  }
  static void TearDownTestSuite() {
    delete f32_;
    delete prompt_;
    delete atom_;
    delete lora_;
    delete backend_;
    delete pool_;
  }

  static std::unique_ptr<LlamaModel> Quantized(kq::QuantScheme scheme, uint32_t seed,
                                               uint32_t declare_seed = 0) {
    auto w = BuildRtn(f32_->source(), scheme, seed, declare_seed);
    EXPECT_TRUE(w.ok()) << w.status();
    auto src = ModelSource::Open(testing::DefaultModelPath());
    EXPECT_TRUE(src.ok());
    auto m = LlamaModel::CreateQuantized(*std::move(src), *std::move(w), backend_, atom_, lora_);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? *std::move(m) : nullptr;
  }

  // Logits [n, vocab] of every position of `tokens`, one fresh sequence per chunk, all
  // chunks in one step. adapters[i] applies to chunk i (nullptr = base).
  static std::vector<std::vector<float>> Run(const LlamaModel& m,
                                             const std::vector<std::vector<int32_t>>& seqs,
                                             const std::vector<const AdapterWeights*>& adapters) {
    KvCacheOptions o;
    o.n_pages = 64;
    auto kv = PagedKvCache::Create(m.config(), o);
    EXPECT_TRUE(kv.ok());
    std::vector<SequenceChunk> chunks;
    for (size_t i = 0; i < seqs.size(); ++i) {
      SequenceChunk c;
      c.kv_seq = (*kv)->NewSequence();
      c.tokens = seqs[i];
      c.logits = SequenceChunk::Logits::kAll;
      c.adapter = adapters.empty() ? nullptr : adapters[i];
      EXPECT_TRUE((*kv)->Reserve(c.kv_seq, c.tokens.size()).ok());
      chunks.push_back(std::move(c));
    }
    const int vocab = m.config().vocab_size;
    auto plan = BatchPlan::Build(chunks, **kv, vocab);
    EXPECT_TRUE(plan.ok()) << plan.status();
    std::vector<float> logits(plan->logit_tokens().size() * vocab);
    ForwardWorkspace ws;
    absl::Status s = m.Forward(*plan, kv->get(), &ws, logits.data());
    EXPECT_TRUE(s.ok()) << s;
    std::vector<std::vector<float>> out;
    for (size_t c = 0; c < chunks.size(); ++c) {
      out.emplace_back(logits.begin() + plan->logit_rows(c).first * vocab,
                       logits.begin() + plan->logit_rows(c).second * vocab);
    }
    return out;
  }
  static std::vector<float> Run1(const LlamaModel& m, const AdapterWeights* a = nullptr) {
    return Run(m, {*prompt_}, {a})[0];
  }

  // Fraction of positions whose argmax agrees.
  static double Top1Agreement(const std::vector<float>& a, const std::vector<float>& b,
                              int vocab) {
    const size_t n = a.size() / vocab;
    int same = 0;
    for (size_t t = 0; t < n; ++t) {
      const float* ra = a.data() + t * vocab;
      const float* rb = b.data() + t * vocab;
      same += std::max_element(ra, ra + vocab) - ra == std::max_element(rb, rb + vocab) - rb;
    }
    return static_cast<double>(same) / n;
  }

  // Pearson correlation of (a1 - a0) and (b1 - b0) over every element.
  static double DeltaCorrelation(const std::vector<float>& a0, const std::vector<float>& a1,
                                 const std::vector<float>& b0, const std::vector<float>& b1) {
    const size_t n = a0.size();
    double ma = 0, mb = 0;
    for (size_t i = 0; i < n; ++i) {
      ma += a1[i] - a0[i];
      mb += b1[i] - b0[i];
    }
    ma /= n;
    mb /= n;
    double sab = 0, saa = 0, sbb = 0;
    for (size_t i = 0; i < n; ++i) {
      const double da = a1[i] - a0[i] - ma, db = b1[i] - b0[i] - mb;
      sab += da * db;
      saa += da * da;
      sbb += db * db;
    }
    return sab / std::sqrt(saa * sbb);
  }

  static kernels::ThreadPool* pool_;
  static kernels::Backend* backend_;
  static kernels::LoraOps* lora_;
  static kq::AtomKernels* atom_;
  static std::vector<int32_t>* prompt_;
  static LlamaModel* f32_;
};
kernels::ThreadPool* QuantizedModelTest::pool_ = nullptr;
kernels::Backend* QuantizedModelTest::backend_ = nullptr;
kernels::LoraOps* QuantizedModelTest::lora_ = nullptr;
kq::AtomKernels* QuantizedModelTest::atom_ = nullptr;
std::vector<int32_t>* QuantizedModelTest::prompt_ = nullptr;
LlamaModel* QuantizedModelTest::f32_ = nullptr;

TEST_F(QuantizedModelTest, W8A8WithRandomPermutationsAgreesWithF32) {
  const int vocab = f32_->config().vocab_size;
  const std::vector<float> ref = Run1(*f32_);
  auto q = Quantized(kq::QuantScheme::kW8A8, 11);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->scheme(), kq::QuantScheme::kW8A8);
  const double agree = Top1Agreement(ref, Run1(*q), vocab);
  EXPECT_GE(agree, 0.9) << "W8A8 top-1 agreement with F32";
  std::printf("W8A8 top-1 agreement %.3f\n", agree);

  // The same weights with other permutations declared: the folding no longer matches.
  auto wrong = Quantized(kq::QuantScheme::kW8A8, 11, /*declare_seed=*/12);
  ASSERT_NE(wrong, nullptr);
  const double agree_wrong = Top1Agreement(ref, Run1(*wrong), vocab);
  EXPECT_LT(agree_wrong, 0.5) << "right " << agree << " wrong " << agree_wrong;
  std::printf("wrong permutations: agreement %.3f\n", agree_wrong);
}

// The INT8 head (requantized at load, its own channel order) gives logits close to the
// stored head's: top-1 agreement and a small relative error over every logit. An
// unquantized model refuses it.
TEST_F(QuantizedModelTest, Int8HeadTracksTheStoredHead) {
  const int vocab = f32_->config().vocab_size;
  auto q = Quantized(kq::QuantScheme::kW8A8, 11);
  ASSERT_NE(q, nullptr);
  const std::vector<float> stored = Run1(*q);
  ASSERT_FALSE(q->int8_head());
  ASSERT_TRUE(q->UseInt8Head().ok());
  EXPECT_TRUE(q->int8_head());
  const std::vector<float> int8 = Run1(*q);
  ASSERT_EQ(stored.size(), int8.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < stored.size(); ++i) {
    num += (int8[i] - stored[i]) * (int8[i] - stored[i]);
    den += stored[i] * stored[i];
  }
  const double rel = std::sqrt(num / den);
  const double agree = Top1Agreement(stored, int8, vocab);
  EXPECT_LT(rel, 0.04) << "relative RMS logit error of the INT8 head";
  EXPECT_GE(agree, 0.9);
  std::printf("INT8 head: relative logit error %.4f, top-1 agreement %.3f\n", rel, agree);
  EXPECT_EQ(f32_->UseInt8Head().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(QuantizedModelTest, PermutedAdapterMovesLogitsLikeTheF32Path) {
  const LlamaConfig& cfg = f32_->config();
  std::unique_ptr<LoraAdapter> adapter = RandomAdapter(cfg, 21, 0.1f);
  LoraAdapterWeights f32_view(adapter.get());
  const std::vector<float> f0 = Run1(*f32_), f1 = Run1(*f32_, &f32_view);

  auto q = Quantized(kq::QuantScheme::kW8A8, 13);
  ASSERT_NE(q, nullptr);
  auto permuted = PermuteLoraAdapter(*adapter, Orders(*q));
  ASSERT_TRUE(permuted.ok()) << permuted.status();
  LoraAdapterWeights q_view(permuted->get());
  const std::vector<float> q0 = Run1(*q), q1 = Run1(*q, &q_view);
  const double corr = DeltaCorrelation(f0, f1, q0, q1);
  EXPECT_GE(corr, 0.8) << "the adapter's effect on the quantized model";

  // lora_A columns left in the original order (B rows still permuted): the effect is lost.
  std::vector<LayerChannelOrder> wrong = Orders(*q);
  for (LayerChannelOrder& o : wrong) o.attn_norm = o.attn_out = o.ffn_norm = nullptr;
  auto bad = PermuteLoraAdapter(*adapter, wrong);
  ASSERT_TRUE(bad.ok());
  LoraAdapterWeights bad_view(bad->get());
  const double corr_bad = DeltaCorrelation(f0, f1, q0, Run1(*q, &bad_view));
  EXPECT_LT(corr_bad, 0.5) << "right " << corr << " wrong lora_A order " << corr_bad;
  std::printf("adapter delta correlation %.3f, wrong lora_A order %.3f\n", corr, corr_bad);
}

TEST_F(QuantizedModelTest, W4A4SequenceAloneEqualsMixedBatchBitwise) {
  auto q = Quantized(kq::QuantScheme::kW4A4, 17);
  ASSERT_NE(q, nullptr);
  std::unique_ptr<LoraAdapter> adapter = RandomAdapter(q->config(), 23, 0.05f);
  auto permuted = PermuteLoraAdapter(*adapter, Orders(*q));
  ASSERT_TRUE(permuted.ok());
  LoraAdapterWeights view(permuted->get());
  const std::vector<int32_t> a(prompt_->begin(), prompt_->begin() + 24);
  const std::vector<int32_t> b(prompt_->begin() + 5, prompt_->begin() + 12);
  const std::vector<int32_t> c(prompt_->begin() + 20, prompt_->begin() + 41);
  const std::vector<float> alone = Run(*q, {a}, {&view})[0];
  const std::vector<float> alone_base = Run(*q, {c}, {nullptr})[0];
  const std::vector<std::vector<float>> mixed =
      Run(*q, {b, a, c, {a[3]}}, {nullptr, &view, nullptr, &view});
  ASSERT_EQ(mixed[1].size(), alone.size());
  EXPECT_TRUE(std::equal(alone.begin(), alone.end(), mixed[1].begin()))
      << "adapter sequence differs inside the mixed batch";
  EXPECT_TRUE(std::equal(alone_base.begin(), alone_base.end(), mixed[2].begin()))
      << "base sequence differs inside the mixed batch";
  for (float v : alone) ASSERT_TRUE(std::isfinite(v));
}

TEST_F(QuantizedModelTest, RefusesBadQuantizedWeights) {
  const LlamaConfig& cfg = f32_->config();
  auto open = [] { return *ModelSource::Open(testing::DefaultModelPath()); };
  auto good = BuildRtn(f32_->source(), kq::QuantScheme::kW4A8, 3);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_TRUE(good->Validate(cfg).ok());

  auto code = [&](QuantizedWeights w, kq::AtomKernels* atom) {
    return LlamaModel::CreateQuantized(open(), std::move(w), backend_, atom, lora_)
        .status()
        .code();
  };
  EXPECT_EQ(code(*good, nullptr), absl::StatusCode::kInvalidArgument) << "no Atom kernels";

  QuantizedWeights fewer = *good;  // a checkpoint of a model with fewer layers
  fewer.layers.pop_back();
  EXPECT_EQ(code(fewer, atom_), absl::StatusCode::kInvalidArgument);

  QuantizedWeights rows = *good;  // a projection of another shape
  rows.layers[7].gate.rows = cfg.intermediate - 1;
  EXPECT_EQ(code(rows, atom_), absl::StatusCode::kInvalidArgument);

  QuantizedWeights k = *good;  // an input width of another model
  k.layers[2].down.spec.k = cfg.intermediate / 2;
  k.layers[2].down.spec.n_outliers = 0;
  EXPECT_EQ(code(k, atom_), absl::StatusCode::kInvalidArgument);

  QuantizedWeights bits = *good;  // weights in 8 bits under a 4-bit scheme
  bits.layers[0].v.spec.w_bits = 8;
  EXPECT_EQ(code(bits, atom_), absl::StatusCode::kInvalidArgument);

  QuantizedWeights qkv = *good;  // q/k/v must read one activation spec
  qkv.layers[1].k.spec.n_outliers = 0;
  EXPECT_EQ(code(qkv, atom_), absl::StatusCode::kInvalidArgument);

  std::vector<int32_t> dup(cfg.hidden, 0);  // not a permutation
  QuantizedWeights perm = *good;
  perm.layers[4].ffn_norm_perm = dup.data();
  EXPECT_EQ(code(perm, atom_), absl::StatusCode::kInvalidArgument);

  // Scheme override: activation bits may change, weight bits may not.
  QuantizedWeights over = *good;
  EXPECT_TRUE(OverrideScheme(kq::QuantScheme::kW4A4, &over).ok());
  EXPECT_EQ(over.layers[0].q.spec.a_bits, 4);
  EXPECT_TRUE(over.Validate(cfg).ok());
  EXPECT_EQ(OverrideScheme(kq::QuantScheme::kW8A8, &over).code(),
            absl::StatusCode::kInvalidArgument);
}

// A checkpoint written with models/quant's writer and loaded by LoadQuantizedWeights runs
// bitwise like the same layers in memory; one recorded for another base file or another
// shape is refused with FailedPrecondition.
TEST_F(QuantizedModelTest, CheckpointRoundTripAndWrongBase) {
  auto layers = BuildRtnLayers(f32_->source(), kq::QuantScheme::kW4A8, 29);
  ASSERT_TRUE(layers.ok()) << layers.status();
  const std::string path = testing::DefaultModelPath();
  quant::QuantizedCheckpointMeta meta;
  meta.scheme = kq::QuantScheme::kW4A8;
  meta.weight_bits = 4;
  meta.activation_bits = 8;
  meta.outliers = {kOutliers[0], kOutliers[1], kOutliers[2], kOutliers[3]};
  meta.n_layers = f32_->config().n_layers;
  meta.base_model.path = path;
  meta.base_model.sha256 = "unchecked";
  meta.base_model.bytes = static_cast<int64_t>(std::filesystem::file_size(path));
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/ckpt_w4a8";
  ASSERT_TRUE(quant::WriteQuantizedCheckpoint(dir, meta, **layers).ok());

  auto src = ModelSource::Open(path);
  ASSERT_TRUE(src.ok());
  auto loaded = LoadQuantizedWeights(dir, **src);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->scheme, kq::QuantScheme::kW4A8);
  auto from_file = LlamaModel::CreateQuantized(*std::move(src), *std::move(loaded), backend_,
                                               atom_, lora_);
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  auto in_memory = LlamaModel::CreateQuantized(
      *ModelSource::Open(path), QuantizedWeightsFromLayers(*layers, kq::QuantScheme::kW4A8),
      backend_, atom_, lora_);
  ASSERT_TRUE(in_memory.ok()) << in_memory.status();
  const std::vector<int32_t> few(prompt_->begin(), prompt_->begin() + 8);
  const std::vector<float> a = Run(**from_file, {few}, {nullptr})[0];
  const std::vector<float> b = Run(**in_memory, {few}, {nullptr})[0];
  EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin()));

  // Recorded for another base file (size differs).
  meta.base_model.bytes += 1;
  const std::string other = std::string(std::getenv("TEST_TMPDIR")) + "/ckpt_other_base";
  ASSERT_TRUE(quant::WriteQuantizedCheckpoint(other, meta, **layers).ok());
  EXPECT_EQ(LoadQuantizedWeights(other, **ModelSource::Open(path)).status().code(),
            absl::StatusCode::kFailedPrecondition);

  // A checkpoint of a model with another depth.
  meta.base_model.bytes -= 1;
  meta.n_layers = 2;
  std::vector<quant::QuantizedLayer> two((*layers)->begin(), (*layers)->begin() + 2);
  const std::string shallow = std::string(std::getenv("TEST_TMPDIR")) + "/ckpt_two_layers";
  ASSERT_TRUE(quant::WriteQuantizedCheckpoint(shallow, meta, two).ok());
  EXPECT_EQ(LoadQuantizedWeights(shallow, **ModelSource::Open(path)).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace loom
