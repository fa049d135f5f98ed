// A rotated (QuaRot) checkpoint end to end on a tiny model: loom_quantize's pipeline folds
// the rotation before calibration and writes a version-2 checkpoint; the loader rebuilds
// the rotation (refusing a recorded fingerprint it does not build) and the quantized
// model's logits track the unrotated F32 model's; an adapter bound to it (rotated, then
// permuted) moves the logits the way it moves the F32 model's, and a merely permuted one
// does not.
#include <cmath>
#include <filesystem>
#include <random>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/quant/cpu_atom_kernels.h"
#include "kernels/cpu/sgmv/cpu_lora_ops.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/dtype.h"
#include "models/eval/f32_model_source.h"
#include "models/kv_cache/paged_kv_cache.h"
#include "models/llama/adapter_weights.h"
#include "models/llama/llama_model.h"
#include "models/llama/quantized_loader.h"
#include "models/lora/adapter_permutation.h"
#include "models/quant/quantize_pipeline.h"
#include "models/weights/json_file.h"
#include "models/weights/safetensors_writer.h"
#include "models/weights/tiny_llama_gguf.h"

namespace loom::quant {
namespace {

std::string Temp(const std::string& name) {
  const std::string p = std::string(::testing::TempDir()) + "/" + name;
  std::filesystem::remove_all(p);
  return p;
}

// hidden 64 (= 2^6), q 64, intermediate 96 (= 12 x 8), 2 layers, byte-level vocabulary of
// the specials, "a".."z", space and fillers (as model_quantizer_test's).
std::string TinyModel(const std::string& name) {
  TinyLlamaOptions o;
  o.omit = {"tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges"};
  GgufWriter w = BuildTinyLlamaGguf(o);
  std::vector<std::string> tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  for (char c = 'a'; c <= 'z'; ++c) tokens.push_back(std::string(1, c));
  tokens.push_back("\xc4\xa0");
  tokens.push_back("ab");
  for (int i = 0; static_cast<int>(tokens.size()) < o.vocab; ++i) tokens.push_back("ab" + std::to_string(i));
  std::vector<int32_t> types(tokens.size(), 1);
  types[0] = types[1] = types[2] = 3;
  w.AddStringArray("tokenizer.ggml.tokens", tokens);
  w.AddI32Array("tokenizer.ggml.token_type", types);
  w.AddStringArray("tokenizer.ggml.merges", {"a b"});
  const std::string path = Temp(name);
  EXPECT_TRUE(w.WriteFile(path).ok());
  return path;
}

std::string CalibrationText() {
  std::mt19937 rng(4);
  std::string s;
  for (int i = 0; i < 600; ++i) {
    const int len = 1 + rng() % 7;
    for (int j = 0; j < len; ++j) s.push_back(static_cast<char>('a' + rng() % 26));
    s.push_back(' ');
  }
  return s;
}

class View final : public AdapterWeights {
 public:
  explicit View(const LoraAdapter* a) : a_(a) {}
  const kernels::LoraPair* Pair(int layer, Projection p) const override {
    return a_->Pair(layer, static_cast<LoraTarget>(static_cast<int>(p)));
  }
  int max_rank() const override { return a_->max_rank(); }

 private:
  const LoraAdapter* a_;
};

std::vector<float> Logits(const LlamaModel& m, const std::vector<int32_t>& tokens,
                          const AdapterWeights* adapter = nullptr) {
  KvCacheOptions o;
  o.n_pages = 16;
  auto kv = PagedKvCache::Create(m.config(), o);
  EXPECT_TRUE(kv.ok());
  SequenceChunk c;
  c.kv_seq = (*kv)->NewSequence();
  c.tokens = tokens;
  c.logits = SequenceChunk::Logits::kAll;
  c.adapter = adapter;
  EXPECT_TRUE((*kv)->Reserve(c.kv_seq, tokens.size()).ok());
  auto plan = BatchPlan::Build({c}, **kv, m.config().vocab_size);
  EXPECT_TRUE(plan.ok()) << plan.status();
  std::vector<float> logits(tokens.size() * m.config().vocab_size);
  ForwardWorkspace ws;
  EXPECT_TRUE(m.Forward(*plan, kv->get(), &ws, logits.data()).ok());
  return logits;
}

double RelativeRms(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  return std::sqrt(num / den);
}

double Correlation(const std::vector<double>& a, const std::vector<double>& b) {
  double ma = 0, mb = 0;
  for (size_t i = 0; i < a.size(); ++i) ma += a[i], mb += b[i];
  ma /= a.size();
  mb /= b.size();
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    sab += (a[i] - ma) * (b[i] - mb);
    saa += (a[i] - ma) * (a[i] - ma);
    sbb += (b[i] - mb) * (b[i] - mb);
  }
  return sab / std::sqrt(saa * sbb);
}

std::vector<double> Minus(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<double> d(a.size());
  for (size_t i = 0; i < a.size(); ++i) d[i] = double(a[i]) - b[i];
  return d;
}

// Parameter: INT8 outlier channels per activation, kept out of the rotation (0: QuaRot).
class RotatedCheckpointTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    model_path_ = TinyModel("rot_tiny.gguf");
    text_path_ = Temp("calibration-rot.txt");
    ASSERT_TRUE(WriteStringToFile(text_path_, CalibrationText()).ok());
    dir_ = Temp("rot_ckpt");
    QuantizeRequest r;
    r.model_path = model_path_;
    r.calibration_texts = {{text_path_, 1.0}};
    r.out_dir = dir_;
    r.sequences = 4;
    r.seq_len = 24;
    r.options.scheme = kernels::quant::QuantScheme::kW8A8;
    r.options.group_size = 32;
    const int o = GetParam();
    r.options.outliers = {o, o, o, o};
    r.options.rotation = RotationSpec{9, true, true};
    r.options.threads = 2;
    auto rep = QuantizeToCheckpoint(r, nullptr);
    ASSERT_TRUE(rep.ok()) << rep.status();
    ASSERT_TRUE(rep->meta.rotation.has_value());
    EXPECT_EQ(rep->meta.rotation->spec.residual_outliers, o);
    EXPECT_EQ(rep->meta.rotation->spec.silu_mul_outliers, o);
    EXPECT_EQ(rep->meta.rotation->fingerprint.size(), 16u);
    backend_ = kernels::CreateCpuBackendOnPool(&pool_);
    atom_ = kernels::quant::CreateCpuAtomKernels(&pool_);
    lora_ = kernels::CreateCpuLoraOps(&pool_);
    auto src = ModelSource::Open(model_path_);
    ASSERT_TRUE(src.ok());
    auto f32 = DequantizeToF32(**src);
    ASSERT_TRUE(f32.ok());
    auto m = LlamaModel::Create(*std::move(f32), backend_.get(), lora_.get());
    ASSERT_TRUE(m.ok());
    f32_ = *std::move(m);
    tokens_.resize(20);
    std::mt19937 rng(6);
    for (int32_t& t : tokens_) t = 3 + rng() % 26;
  }

  absl::StatusOr<std::unique_ptr<LlamaModel>> LoadQuantized() {
    auto src = ModelSource::Open(model_path_);
    if (!src.ok()) return src.status();
    auto w = LoadQuantizedWeights(dir_, **src);
    if (!w.ok()) return w.status();
    EXPECT_NE(w->rotation, nullptr);
    EXPECT_TRUE(w->rotation->has_folded_norms());
    return LlamaModel::CreateQuantized(*std::move(src), *std::move(w), backend_.get(), atom_.get(),
                                       lora_.get());
  }

  void EditJson(const std::function<void(nlohmann::json&)>& edit) {
    auto j = ReadJsonObject(dir_ + "/" + kQuantJsonName);
    ASSERT_TRUE(j.ok());
    edit(*j);
    ASSERT_TRUE(WriteStringToFile(dir_ + "/" + kQuantJsonName, j->dump()).ok());
  }

  kernels::ThreadPool pool_{2};
  std::string model_path_, text_path_, dir_;
  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<kernels::quant::AtomKernels> atom_;
  std::unique_ptr<kernels::LoraOps> lora_;
  std::unique_ptr<LlamaModel> f32_;
  std::vector<int32_t> tokens_;
};

TEST_P(RotatedCheckpointTest, TracksTheF32ModelAndIsVersion2) {
  auto j = ReadJsonObject(dir_ + "/" + kQuantJsonName);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)["version"], 2);
  EXPECT_EQ((*j)["rotation"]["kind"], "randomized_hadamard");
  auto q = LoadQuantized();
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_NE((*q)->rotation(), nullptr);
  const std::vector<float> want = Logits(*f32_, tokens_);
  const std::vector<float> got = Logits(**q, tokens_);
  const double err = RelativeRms(got, want);
  // The same W8A8 without rotation: on this random-weight model both lose a few percent.
  QuantizeRequest r;
  r.model_path = model_path_;
  r.calibration_texts = {{text_path_, 1.0}};
  r.out_dir = Temp("unrotated_ckpt");
  r.sequences = 4;
  r.seq_len = 24;
  r.options.scheme = kernels::quant::QuantScheme::kW8A8;
  r.options.group_size = 32;
  r.options.outliers = {GetParam(), GetParam(), GetParam(), GetParam()};
  r.options.threads = 2;
  ASSERT_TRUE(QuantizeToCheckpoint(r, nullptr).ok());
  auto src = ModelSource::Open(model_path_);
  ASSERT_TRUE(src.ok());
  auto w = LoadQuantizedWeights(r.out_dir, **src);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->rotation, nullptr);
  auto plain = LlamaModel::CreateQuantized(*std::move(src), *std::move(w), backend_.get(),
                                           atom_.get(), lora_.get());
  ASSERT_TRUE(plain.ok());
  const double plain_err = RelativeRms(Logits(**plain, tokens_), want);
  std::printf("W8A8 vs F32, relative RMS logit error: rotated %.4f, unrotated %.4f\n", err,
              plain_err);
  EXPECT_LT(err, 0.1);
  EXPECT_LT(err, 2 * plain_err);
}

TEST_P(RotatedCheckpointTest, RefusesARotationItDoesNotBuild) {
  EditJson([](nlohmann::json& j) { j["rotation"]["fingerprint"] = "0123456789abcdef"; });
  auto q = LoadQuantized();
  EXPECT_EQ(q.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(q.status().message().find("rotation mismatch"), std::string::npos) << q.status();
  // A different seed (weights folded with seed 9 claimed as seed 10) is refused too.
  std::filesystem::remove_all(dir_);
  SetUp();
  EditJson([](nlohmann::json& j) { j["rotation"]["seed"] = 10; });
  EXPECT_EQ(LoadQuantized().status().code(), absl::StatusCode::kFailedPrecondition);
  // And an unrotated reader's view of it (version 1 with a rotation) by the parser.
  std::filesystem::remove_all(dir_);
  SetUp();
  EditJson([](nlohmann::json& j) { j["version"] = 1; });
  EXPECT_EQ(LoadQuantized().status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(RotatedCheckpointTest, AdaptersMoveTheLogitsAsOnTheF32Model) {
  const LlamaConfig& cfg = f32_->config();
  std::vector<LoraProjectionInfo> infos;
  for (int l = 0; l < cfg.n_layers; ++l) {
    for (LoraTarget t : kAllLoraTargets) {
      const ProjectionShape sh = BaseProjectionShape(cfg, t);
      infos.push_back({l, t, 4, 1.0f, sh.h_in, sh.h_out});
    }
  }
  auto adapter = LoraAdapter::Create("a", "mem", AdapterFormat::kInMemory, cfg.n_layers, infos);
  ASSERT_TRUE(adapter.ok());
  std::mt19937 rng(12);
  std::normal_distribution<float> g(0.0f, 0.15f);
  for (size_t i = 0; i < infos.size(); ++i) {
    for (int k = 0; k < infos[i].rank * infos[i].h_in; ++k) (*adapter)->mutable_a(i)[k] = Fp32ToBf16(g(rng));
    for (int k = 0; k < infos[i].h_out * infos[i].rank; ++k) (*adapter)->mutable_b(i)[k] = Fp32ToBf16(g(rng));
  }
  auto q = LoadQuantized();
  ASSERT_TRUE(q.ok()) << q.status();
  // The same adapter for the rotated checkpoint: rotated, then permuted.
  auto copy = LoraAdapter::Create("a", "mem", AdapterFormat::kInMemory, cfg.n_layers, infos);
  ASSERT_TRUE(copy.ok());
  for (size_t i = 0; i < infos.size(); ++i) {
    std::copy_n((*adapter)->a(i), infos[i].rank * infos[i].h_in, (*copy)->mutable_a(i));
    std::copy_n((*adapter)->b(i), infos[i].h_out * infos[i].rank, (*copy)->mutable_b(i));
  }
  auto bound = BindAdapterToQuantized(*std::move(copy), (*q)->quantized());
  ASSERT_TRUE(bound.ok()) << bound.status();
  auto permuted_only = PermuteLoraAdapter(**adapter, ChannelOrders(*(*q)->quantized()));
  ASSERT_TRUE(permuted_only.ok());
  View ref_view(adapter->get()), q_view(bound->get()), wrong_view(permuted_only->get());
  const std::vector<double> ref_delta =
      Minus(Logits(*f32_, tokens_, &ref_view), Logits(*f32_, tokens_));
  const std::vector<float> q_base = Logits(**q, tokens_);
  const double corr = Correlation(Minus(Logits(**q, tokens_, &q_view), q_base), ref_delta);
  const double wrong = Correlation(Minus(Logits(**q, tokens_, &wrong_view), q_base), ref_delta);
  double effect = 0;
  for (double d : ref_delta) effect += std::fabs(d);
  std::printf("adapter delta correlation with F32: rotated+permuted %.3f, permuted only %.3f "
              "(mean |delta| %.3f)\n", corr, wrong, effect / ref_delta.size());
  EXPECT_GT(effect / ref_delta.size(), 0.05);
  EXPECT_GT(corr, 0.9);
  EXPECT_LT(wrong, 0.6);
}

INSTANTIATE_TEST_SUITE_P(OutliersKeptOut, RotatedCheckpointTest, ::testing::Values(0, 32));

}  // namespace
}  // namespace loom::quant
