// Multi-adapter LoRA is exact: the forward pass with a runtime adapter equals the base
// model with the adapter MERGED into its weights, alone and inside a mixed batch, and on a
// rotated (QuaRot) model with the adapter rotated at load.
//
// Setup: an F32 copy of SmolLM2-135M (every tensor of the real GGUF dequantized to F32,
// same config, GGUF row order), so base MatMuls read plain F32 activations (no int8
// requantization that would turn last-bit differences into whole quantization steps).
// Adapters are seeded synthetic PEFT adapters with BF16 weights written to TEST_TMPDIR and
// loaded by the real loader (LoadPeftAdapter) against the GGUF config, so the q/k B rows go
// through the HF -> GGUF row permutation.
//
// Merged reference: W' = W + scale * B_gguf * A in double, rounded once to F32, where A and
// B are the adapter's BF16 values (the loaded values are asserted bit-equal to them) and
// B_gguf is permuted here with llama.cpp's converter formula (written out independently of
// models/weights/qk_permutation.h): convert_hf_to_gguf.py's
//   w.reshape(n_head, 2, d/2, in).swapaxes(1, 2).reshape(out, in)
// puts HF row h*d + j*d/2 + i at GGUF row h*d + 2i + j.
//
// Tolerance: max |logit_lora - logit_merged| <= 1e-3 * max |logit|. In exact arithmetic
// W x + s B (A x) == (W + s B A) x; the F32 computations differ only by (a) rounding W' to
// F32 (relative 2^-24 per element), (b) a different F32 summation order (runtime: an h_in
// dot plus the rank-term shrink and expand; merged: one h_in dot), each ~sqrt(n) * 2^-24
// relative, i.e. ~1e-6 per projection output, and (c) the FP32 rank intermediate. Those
// perturbations enter 210 projections over 30 layers, and K/V are stored in FP16 in the
// paged cache, so a last-bit F32 difference now and then flips an FP16 rounding (2^-11
// relative) of a key or value: that amplification is why the measured difference is
// 1.7e-4 .. 2.4e-4 of max |logit| (about 0.005 on logits near 30; printed), not 1e-6.
// 1e-3 leaves a 4x margin over that, while any real error (missing scale, transposed or
// unpermuted B, wrong adapter) moves logits by the adapter's whole effect (mean |delta| > 1
// here; the unpermuted-merge negative control in QkPermutationIsApplied is off by 8.7,
// 300x the bound).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "models/testing/dequantized_model.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/sgmv/cpu_lora_ops.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/dtype.h"
#include "models/llama/llama_model.h"
#include "models/lora/adapter_rotation.h"
#include "models/lora/lora_adapter.h"
#include "models/lora/peft_loader.h"
#include "models/lora/peft_writer.h"
#include "models/rotation/rotate_weights.h"
#include "models/testing/test_model.h"
#include "models/tokenizer/tokenizer.h"
#include "models/weights/model_source.h"
#include "scheduler/engine/lora_adapter_weights.h"

namespace loom {
namespace {

// HF row of GGUF row `g` for q/k (see the header comment; llama.cpp's converter).
int64_t ConverterHfRow(int64_t g, int64_t d) {
  const int64_t h = g / d, r = g % d, i = r / 2, j = r % 2;
  return h * d + j * (d / 2) + i;
}

bool IsQk(LoraTarget t) { return t == LoraTarget::kQ || t == LoraTarget::kK; }

using testing::DequantizedCopy;

std::string TensorName(int layer, LoraTarget t) {
  return absl::StrCat("blk.", layer, ".", GgufTensorStem(t), ".weight");
}

// `base` (F32; must outlive the result) with `ad` merged: W' = W + scale * B_gguf A,
// accumulated in double from the BF16 values and rounded once. With permute_qk = false
// the q/k B rows are (wrongly) used in HF order: the negative control.
std::unique_ptr<ModelSource> MergedCopy(const ModelSource& base, const SyntheticAdapter& ad,
                                        bool permute_qk = true) {
  auto s = std::make_unique<ModelSource>();
  s->path_ = base.path() + " + merged LoRA";
  s->config_ = base.config();
  s->vocab_ = base.vocabulary();
  s->tensors_ = base.tensors();  // shares the unmodified tensors' memory
  const int64_t d = base.config().head_dim;
  const int r = ad.spec.rank;
  std::vector<double> acc;
  for (const SyntheticAdapter::Projection& p : ad.projections) {
    WeightTensor& w = s->tensors_.at(TensorName(p.layer, p.target));
    EXPECT_EQ(w.rows(), p.h_out);
    EXPECT_EQ(w.cols(), p.h_in);
    const float* src = reinterpret_cast<const float*>(w.data);
    std::vector<uint8_t> buf(w.nbytes);
    float* dst = reinterpret_cast<float*>(buf.data());
    acc.resize(p.h_in);
    for (int64_t o = 0; o < p.h_out; ++o) {
      const int64_t hf = permute_qk && IsQk(p.target) ? ConverterHfRow(o, d) : o;
      for (int i = 0; i < p.h_in; ++i) acc[i] = src[o * p.h_in + i];
      for (int k = 0; k < r; ++k) {
        const double c = double(ad.scale) * p.b[hf * r + k];
        const float* arow = &p.a[static_cast<size_t>(k) * p.h_in];
        for (int i = 0; i < p.h_in; ++i) acc[i] += c * arow[i];
      }
      for (int i = 0; i < p.h_in; ++i) dst[o * p.h_in + i] = static_cast<float>(acc[i]);
    }
    w.data = buf.data();
    s->owned_.push_back(std::move(buf));
  }
  return s;
}

// Mean row norm of each target's base matrices over all layers (calibrates magnitudes).
std::map<LoraTarget, float> BaseRowNorms(const ModelSource& f32) {
  std::map<LoraTarget, float> out;
  for (LoraTarget t : kAllLoraTargets) {
    double sum = 0;
    int64_t n = 0;
    for (int l = 0; l < f32.config().n_layers; ++l) {
      const WeightTensor& w = f32.tensors().at(TensorName(l, t));
      const float* x = reinterpret_cast<const float*>(w.data);
      for (int64_t row = 0; row < w.rows(); ++row) {
        const float* xr = x + row * w.cols();
        double s2 = 0;
        for (int64_t i = 0; i < w.cols(); ++i) s2 += double(xr[i]) * xr[i];
        sum += std::sqrt(s2);
        ++n;
      }
    }
    out[t] = static_cast<float>(sum / n);
  }
  return out;
}

// Checks that the loaded adapter holds exactly the synthetic BF16 values, with the q/k B
// rows at the converter's GGUF positions.
void ExpectLoadedEqualsSynthetic(const LoraAdapter& loaded, const SyntheticAdapter& ad,
                                 int64_t head_dim) {
  ASSERT_EQ(loaded.projections().size(), ad.projections.size());
  const int r = ad.spec.rank;
  for (size_t i = 0; i < ad.projections.size(); ++i) {
    const SyntheticAdapter::Projection& p = ad.projections[i];
    const LoraProjectionInfo& info = loaded.projections()[i];
    ASSERT_EQ(info.layer, p.layer);
    ASSERT_EQ(info.target, p.target);
    ASSERT_EQ(info.rank, r);
    ASSERT_EQ(info.scale, ad.scale);
    int bad = 0;
    for (size_t k = 0; k < p.a.size(); ++k) bad += Bf16ToFp32(loaded.a(i)[k]) != p.a[k];
    for (int64_t o = 0; o < p.h_out; ++o) {
      const int64_t hf = IsQk(p.target) ? ConverterHfRow(o, head_dim) : o;
      for (int k = 0; k < r; ++k) bad += Bf16ToFp32(loaded.b(i)[o * r + k]) != p.b[hf * r + k];
    }
    ASSERT_EQ(bad, 0) << "layer " << p.layer << " " << PeftModuleName(p.target);
  }
}

// An in-memory LoraAdapter from a synthetic one (GGUF row order), for the many cheap
// adapters of the batch test.
std::unique_ptr<LoraAdapter> InMemoryAdapter(const SyntheticAdapter& ad, int64_t head_dim,
                                             const std::string& id) {
  std::vector<LoraProjectionInfo> infos;
  for (const auto& p : ad.projections) {
    infos.push_back({p.layer, p.target, ad.spec.rank, ad.scale, p.h_in, p.h_out});
  }
  auto la = LoraAdapter::Create(id, "in-memory", AdapterFormat::kInMemory, ad.base.n_layers,
                                infos);
  EXPECT_TRUE(la.ok()) << la.status();
  if (!la.ok()) return nullptr;
  const int r = ad.spec.rank;
  for (size_t i = 0; i < ad.projections.size(); ++i) {
    const auto& p = ad.projections[i];
    for (size_t k = 0; k < p.a.size(); ++k) (*la)->mutable_a(i)[k] = Fp32ToBf16(p.a[k]);
    for (int64_t o = 0; o < p.h_out; ++o) {
      const int64_t hf = IsQk(p.target) ? ConverterHfRow(o, head_dim) : o;
      for (int k = 0; k < r; ++k) (*la)->mutable_b(i)[o * r + k] = Fp32ToBf16(p.b[hf * r + k]);
    }
  }
  return *std::move(la);
}

// Logits [tokens.size(), vocab] of every position, the whole sequence in one chunk.
std::vector<float> RunAlone(const LlamaModel& m, const std::vector<int32_t>& tokens,
                            const AdapterWeights* adapter) {
  const int vocab = m.config().vocab_size;
  KvCacheOptions ko;
  ko.n_pages = static_cast<int32_t>(tokens.size() / 16 + 2);
  auto kv = PagedKvCache::Create(m.config(), ko);
  EXPECT_TRUE(kv.ok());
  SequenceChunk c;
  c.kv_seq = (*kv)->NewSequence();
  c.tokens = tokens;
  c.logits = SequenceChunk::Logits::kAll;
  c.adapter = adapter;
  EXPECT_TRUE((*kv)->Reserve(c.kv_seq, static_cast<int32_t>(tokens.size())).ok());
  auto plan = BatchPlan::Build({c}, **kv, vocab);
  EXPECT_TRUE(plan.ok()) << plan.status();
  std::vector<float> logits(tokens.size() * static_cast<size_t>(vocab));
  ForwardWorkspace ws;
  const absl::Status st = m.Forward(*plan, kv->get(), &ws, logits.data());
  EXPECT_TRUE(st.ok()) << st;
  return logits;
}

struct Diff {
  double max_abs = 0, mean_abs = 0, max_ref = 0;
};
Diff Compare(const std::vector<float>& a, const std::vector<float>& ref) {
  Diff d;
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double e = std::fabs(double(a[i]) - ref[i]);
    d.max_abs = std::max(d.max_abs, e);
    d.max_ref = std::max(d.max_ref, std::fabs(double(ref[i])));
    sum += e;
  }
  d.mean_abs = sum / a.size();
  return d;
}

constexpr double kRelTol = 1e-3;
constexpr int kTestedRanks[] = {8, 16, 64};

class LoraEquivalenceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pool_ = new kernels::ThreadPool(0);
    backend_ = kernels::CreateCpuBackendOnPool(pool_).release();
    lora_ = kernels::CreateCpuLoraOps(pool_).release();
    auto q = ModelSource::Open(testing::DefaultModelPath());
    ASSERT_TRUE(q.ok()) << q.status();
    auto tok = Tokenizer::Create((*q)->vocabulary());
    ASSERT_TRUE(tok.ok());
    auto ids = (*tok)->Encode("The old lighthouse keeper climbed the stairs every night to", false);
    ASSERT_TRUE(ids.ok());
    prompt_ = new std::vector<int32_t>(*ids);
    std::unique_ptr<ModelSource> f32 = DequantizedCopy(**q);
    norms_ = new std::map<LoraTarget, float>(BaseRowNorms(*f32));
    auto m = LlamaModel::Create(std::move(f32), backend_, lora_);
    ASSERT_TRUE(m.ok()) << m.status();
    base_ = m->release();
    base_logits_ = new std::vector<float>(RunAlone(*base_, *prompt_, nullptr));
    tested_ = new std::map<int, Tested>();
  }
  static void TearDownTestSuite() {
    delete tested_;
    delete base_logits_;
    delete base_;
    delete norms_;
    delete prompt_;
    delete lora_;
    delete backend_;
    delete pool_;
  }

  struct Tested {
    SyntheticAdapter synthetic;
    std::unique_ptr<LoraAdapter> loaded;
    std::unique_ptr<LoraAdapterWeights> view;
  };

  static SyntheticAdapterSpec Spec(int rank, uint64_t seed, std::vector<LoraTarget> targets,
                                   float magnitude) {
    SyntheticAdapterSpec spec;
    spec.rank = rank;
    spec.alpha = 2.0f * rank;  // scale 2
    spec.seed = seed;
    spec.dtype = DType::kBF16;
    spec.targets = std::move(targets);
    spec.relative_magnitude = magnitude;
    spec.base_row_norm = *norms_;
    return spec;
  }

  // Writes `spec` as PEFT to TEST_TMPDIR and loads it with the real loader against the
  // GGUF config (rope_layout kAdjacentPairs: q/k B rows permuted at load).
  static void WriteAndLoad(const SyntheticAdapterSpec& spec, const std::string& tag,
                           Tested* out) {
    ASSERT_EQ(base_->config().rope_layout, RopeLayout::kAdjacentPairs);
    auto ad = MakeSyntheticAdapter(base_->config(), spec);
    ASSERT_TRUE(ad.ok()) << ad.status();
    const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + tag;
    ASSERT_TRUE(WritePeftAdapter(*ad, dir).ok());
    auto loaded = LoadPeftAdapter(dir, base_->config(), AdapterLimits());
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    ExpectLoadedEqualsSynthetic(**loaded, *ad, base_->config().head_dim);
    out->synthetic = *std::move(ad);
    out->loaded = *std::move(loaded);
    out->view = std::make_unique<LoraAdapterWeights>(out->loaded.get());
  }

  // The rank-r adapter on all seven projections (loaded once, shared by the tests).
  static const Tested& TestedAdapter(int rank) {
    auto it = tested_->find(rank);
    if (it == tested_->end()) {
      Tested t;
      WriteAndLoad(Spec(rank, 1000 + rank, {std::begin(kAllLoraTargets),
                                            std::end(kAllLoraTargets)}, 0.05f),
                   absl::StrCat("all7_r", rank), &t);
      it = tested_->emplace(rank, std::move(t)).first;
    }
    return it->second;
  }

  static kernels::ThreadPool* pool_;
  static kernels::Backend* backend_;
  static kernels::LoraOps* lora_;
  static LlamaModel* base_;
  static std::vector<int32_t>* prompt_;
  static std::vector<float>* base_logits_;
  static std::map<LoraTarget, float>* norms_;
  static std::map<int, Tested>* tested_;
};

kernels::ThreadPool* LoraEquivalenceTest::pool_ = nullptr;
kernels::Backend* LoraEquivalenceTest::backend_ = nullptr;
kernels::LoraOps* LoraEquivalenceTest::lora_ = nullptr;
LlamaModel* LoraEquivalenceTest::base_ = nullptr;
std::vector<int32_t>* LoraEquivalenceTest::prompt_ = nullptr;
std::vector<float>* LoraEquivalenceTest::base_logits_ = nullptr;
std::map<LoraTarget, float>* LoraEquivalenceTest::norms_ = nullptr;
std::map<int, LoraEquivalenceTest::Tested>* LoraEquivalenceTest::tested_ = nullptr;

// Runtime LoRA (F32 base + SGMV) == merged F32 model, ranks 8, 16, 64, all 7 projections.
TEST_F(LoraEquivalenceTest, RuntimeLoraEqualsMergedWeights) {
  ASSERT_GE(prompt_->size(), 10u);
  for (int rank : kTestedRanks) {
    const Tested& t = TestedAdapter(rank);
    ASSERT_NE(t.view, nullptr);
    const std::vector<float> lora = RunAlone(*base_, *prompt_, t.view.get());
    auto merged_model = LlamaModel::Create(MergedCopy(base_->source(), t.synthetic), backend_);
    ASSERT_TRUE(merged_model.ok()) << merged_model.status();
    const std::vector<float> merged = RunAlone(**merged_model, *prompt_, nullptr);
    const Diff d = Compare(lora, merged);
    const Diff effect = Compare(lora, *base_logits_);
    std::printf("rank %2d: %zu tokens; |lora - merged| max %.3g mean %.3g (max |logit| %.2f, "
                "bound %.3g); adapter effect |lora - base| mean %.3f max %.2f\n",
                rank, prompt_->size(), d.max_abs, d.mean_abs, d.max_ref, kRelTol * d.max_ref,
                effect.mean_abs, effect.max_abs);
    EXPECT_LE(d.max_abs, kRelTol * d.max_ref) << "rank " << rank;
    EXPECT_GT(effect.mean_abs, 1.0) << "adapter too weak to prove anything, rank " << rank;
  }
}

// An adapter on q_proj and k_proj only: the merged reference permutes B's rows with the
// converter's formula; merging WITHOUT the permutation must be far off (the test can fail).
TEST_F(LoraEquivalenceTest, QkPermutationIsApplied) {
  Tested t;
  WriteAndLoad(Spec(16, 77, {LoraTarget::kQ, LoraTarget::kK}, 0.3f), "qk_only", &t);
  ASSERT_NE(t.view, nullptr);
  const std::vector<float> lora = RunAlone(*base_, *prompt_, t.view.get());
  auto merged = LlamaModel::Create(MergedCopy(base_->source(), t.synthetic, true), backend_);
  auto unpermuted =
      LlamaModel::Create(MergedCopy(base_->source(), t.synthetic, false), backend_);
  ASSERT_TRUE(merged.ok() && unpermuted.ok());
  const Diff d = Compare(lora, RunAlone(**merged, *prompt_, nullptr));
  const Diff wrong = Compare(lora, RunAlone(**unpermuted, *prompt_, nullptr));
  const Diff effect = Compare(lora, *base_logits_);
  std::printf("q/k only: |lora - merged| max %.3g (bound %.3g); vs unpermuted merge max %.3f "
              "mean %.3f; adapter effect mean %.3f\n",
              d.max_abs, kRelTol * d.max_ref, wrong.max_abs, wrong.mean_abs, effect.mean_abs);
  EXPECT_LE(d.max_abs, kRelTol * d.max_ref);
  EXPECT_GT(wrong.max_abs, 100 * kRelTol * d.max_ref);
  EXPECT_GT(effect.mean_abs, 0.1);
}

// A rotated (QuaRot) F32 model (models/rotation): the runtime adapter, rotated at load
// (models/lora/adapter_rotation.h), equals the MERGED model rotated the same way, and the
// rotated model with it tracks the unrotated model with the adapter (teacher-forced top-1
// agreement over a real-text passage). Tolerance: the rotated copy's A' and B' are rounded
// to BF16 once (2^-9 relative per weight, random signs), which moves the adapter's effect
// by ~0.1-0.3% (the unrotated runtime adapter reads the merged model's exact BF16 values);
// 5e-3 of max |logit| keeps a margin over that and stays 50x below the effect of an
// unrotated adapter on the rotated model (checked: the negative control).
TEST_F(LoraEquivalenceTest, RotatedModelRuntimeLoraEqualsMergedWeights) {
  auto tok = Tokenizer::Create(base_->source().vocabulary());
  ASSERT_TRUE(tok.ok());
  auto ids = (*tok)->Encode(
      "The harbour was quiet in the early morning. Fishing boats lay at anchor, their nets "
      "folded on the decks, and a thin mist hung over the water. Along the quay the first "
      "shops were opening: a baker set out trays of bread, a boy swept the steps of the inn, "
      "and two old men argued about the weather as they had done every day for forty years. "
      "Far out beyond the breakwater a ship was turning towards the land, and the gulls rose "
      "from the rocks to meet it, crying loudly as the sun broke through the clouds.",
      false);
  ASSERT_TRUE(ids.ok());
  const std::vector<int32_t>& text = *ids;
  ASSERT_GE(text.size(), 100u);
  const Tested& t = TestedAdapter(16);
  const RotationSpec spec{2024, true, true};
  // Merged, then rotated.
  std::unique_ptr<ModelSource> merged = MergedCopy(base_->source(), t.synthetic);
  auto merged_rot = RotateF32Model(spec, merged.get());
  ASSERT_TRUE(merged_rot.ok()) << merged_rot.status();
  auto merged_model = LlamaModel::CreateRotated(std::move(merged), *merged_rot, backend_);
  ASSERT_TRUE(merged_model.ok());
  const std::vector<float> want = RunAlone(**merged_model, text, nullptr);
  merged_model->reset();
  // Rotated base + the rotated runtime adapter.
  std::unique_ptr<ModelSource> base = DequantizedCopy(base_->source());
  auto rot = RotateF32Model(spec, base.get());
  ASSERT_TRUE(rot.ok()) << rot.status();
  auto rotated = LlamaModel::CreateRotated(std::move(base), *rot, backend_, lora_);
  ASSERT_TRUE(rotated.ok());
  auto adapter = RotateLoraAdapter(*t.loaded, **rot);
  ASSERT_TRUE(adapter.ok()) << adapter.status();
  LoraAdapterWeights view(adapter->get());
  const std::vector<float> got = RunAlone(**rotated, text, &view);
  const Diff d = Compare(got, want);
  // Negative control: the unrotated adapter on the rotated model.
  const Diff wrong = Compare(RunAlone(**rotated, text, t.view.get()), want);
  // Teacher-forced top-1 against the unrotated model with the adapter.
  const std::vector<float> plain = RunAlone(*base_, text, t.view.get());
  const int vocab = base_->config().vocab_size;
  int same = 0;
  for (size_t p = 0; p < text.size(); ++p) {
    const float* a = got.data() + p * vocab;
    const float* b = plain.data() + p * vocab;
    same += std::max_element(a, a + vocab) - a == std::max_element(b, b + vocab) - b;
  }
  const double agreement = double(same) / text.size();
  std::printf("rotated: %zu tokens; |rotated lora - rotated merged| max %.3g mean %.3g (bound "
              "%.3g); unrotated adapter on the rotated model max %.3g; top-1 vs the unrotated "
              "model + adapter %.4f\n",
              text.size(), d.max_abs, d.mean_abs, 5e-3 * d.max_ref, wrong.max_abs, agreement);
  EXPECT_LE(d.max_abs, 5e-3 * d.max_ref);
  EXPECT_GT(wrong.max_abs, 50 * 5e-3 * d.max_ref);
  EXPECT_GE(agreement, 0.99);
}

// 40 sequences in two steps (32 adapters of ranks 8/16/64, some on a subset of the
// projections, the three tested adapters among them, and 8 base sequences; step 1 prefills,
// step 2 mixes decode tokens and prefill chunks, chunks listed in an order that interleaves
// adapters): every logits row equals the sequence's alone run bitwise.
TEST_F(LoraEquivalenceTest, MixedBatchEqualsAloneRunsBitwise) {
  const LlamaConfig& c = base_->config();
  const int vocab = c.vocab_size;
  constexpr int kAdapters = 32, kBase = 8, kSeqs = kAdapters + kBase;
  std::vector<std::unique_ptr<LoraAdapter>> extra;
  std::vector<std::unique_ptr<LoraAdapterWeights>> extra_views;
  std::vector<const AdapterWeights*> adapter_of(kSeqs, nullptr);
  for (int i = 0; i < kAdapters; ++i) {
    if (i < 3) {
      adapter_of[i] = TestedAdapter(kTestedRanks[i]).view.get();
      continue;
    }
    const int rank = (i == 10 || i == 20) ? 64 : (i % 3 == 0 ? 16 : 8);
    std::vector<LoraTarget> targets(std::begin(kAllLoraTargets), std::end(kAllLoraTargets));
    if (i % 4 == 3) targets = {LoraTarget::kQ, LoraTarget::kV, LoraTarget::kDown};
    auto ad = MakeSyntheticAdapter(c, Spec(rank, 5000 + i, targets, 0.05f));
    ASSERT_TRUE(ad.ok()) << ad.status();
    extra.push_back(InMemoryAdapter(*ad, c.head_dim, absl::StrCat("extra", i)));
    ASSERT_NE(extra.back(), nullptr);
    extra_views.push_back(std::make_unique<LoraAdapterWeights>(extra.back().get()));
    adapter_of[i] = extra_views.back().get();
  }
  // Sequence s (adapters 0..31, then base 32..39): the tested adapters read the prompt of
  // the merged test; the others seeded token ids, 5 to 14 tokens.
  std::vector<std::vector<int32_t>> tokens(kSeqs);
  uint64_t state = 12345;
  auto next = [&state]() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int32_t>(state >> 33);
  };
  for (int s = 0; s < kSeqs; ++s) {
    if (s < 3) {
      tokens[s] = *prompt_;
      continue;
    }
    const int len = 5 + next() % 10;
    for (int k = 0; k < len; ++k) tokens[s].push_back(next() % vocab);
  }
  // Step 1 prefills all but 1 token (even s) or about half (odd s); step 2 runs the rest:
  // one decode token (even s) or a prefill chunk (odd s).
  std::vector<int> split(kSeqs);
  for (int s = 0; s < kSeqs; ++s) {
    const int n = static_cast<int>(tokens[s].size());
    split[s] = s % 2 == 0 ? n - 1 : n / 2;
  }
  KvCacheOptions ko;
  ko.n_pages = kSeqs * 2;
  auto kv = PagedKvCache::Create(c, ko);
  ASSERT_TRUE(kv.ok());
  std::vector<int32_t> slot(kSeqs);
  for (int s = 0; s < kSeqs; ++s) {
    slot[s] = (*kv)->NewSequence();
    ASSERT_TRUE((*kv)->Reserve(slot[s], static_cast<int32_t>(tokens[s].size())).ok());
  }
  // Chunk order: base and adapter sequences interleaved (s * 7 mod 40 visits all of them).
  std::vector<int> order(kSeqs);
  for (int i = 0; i < kSeqs; ++i) order[i] = (i * 7) % kSeqs;
  std::vector<std::vector<float>> batched(kSeqs);
  ForwardWorkspace ws;
  for (int step = 0; step < 2; ++step) {
    std::vector<SequenceChunk> chunks;
    for (int s : order) {
      SequenceChunk ch;
      ch.kv_seq = slot[s];
      const int begin = step == 0 ? 0 : split[s];
      const int end = step == 0 ? split[s] : static_cast<int>(tokens[s].size());
      ch.start_pos = begin;
      ch.tokens.assign(tokens[s].begin() + begin, tokens[s].begin() + end);
      ch.logits = SequenceChunk::Logits::kAll;
      ch.adapter = adapter_of[s];
      chunks.push_back(std::move(ch));
    }
    auto plan = BatchPlan::Build(chunks, **kv, vocab);
    ASSERT_TRUE(plan.ok()) << plan.status();
    if (step == 0) {
      ASSERT_EQ(plan->adapter_segments().size(), static_cast<size_t>(kAdapters));
    }
    std::vector<float> logits(plan->logit_tokens().size() * static_cast<size_t>(vocab));
    ASSERT_TRUE(base_->Forward(*plan, kv->get(), &ws, logits.data()).ok());
    for (size_t i = 0; i < order.size(); ++i) {
      const auto [r0, r1] = plan->logit_rows(i);
      batched[order[i]].insert(batched[order[i]].end(), logits.begin() + size_t(r0) * vocab,
                               logits.begin() + size_t(r1) * vocab);
    }
  }
  int mismatched = 0;
  for (int s = 0; s < kSeqs; ++s) {
    const std::vector<float> alone = RunAlone(*base_, tokens[s], adapter_of[s]);
    ASSERT_EQ(batched[s].size(), alone.size()) << "sequence " << s;
    const bool same =
        std::memcmp(batched[s].data(), alone.data(), alone.size() * sizeof(float)) == 0;
    if (!same) {
      ++mismatched;
      ADD_FAILURE() << "sequence " << s << " (adapter " << (s < kAdapters ? s : -1)
                    << "): batched logits differ from the alone run, max |diff| "
                    << Compare(batched[s], alone).max_abs;
    }
  }
  std::printf("mixed batch: %d sequences (%d adapters, %d base), %d bitwise equal to their "
              "alone runs\n", kSeqs, kAdapters, kBase, kSeqs - mismatched);
}

}  // namespace
}  // namespace loom
