// The quantizer end to end on a tiny synthetic Llama (no real model, no real text):
// calibration statistics, the cache, folding into a written checkpoint, the pipeline and
// its refusals.
#include "models/quant/model_quantizer.h"

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/quant/weight_packing.h"
#include "models/llama/llama_model.h"
#include "models/quant/calibration_cache.h"
#include "models/quant/calibration_runner.h"
#include "models/quant/quantize_pipeline.h"
#include "models/quant/quantized_checkpoint.h"
#include "models/quant/sha256.h"
#include "models/weights/hf_exporter.h"
#include "models/weights/json_file.h"
#include "models/tokenizer/tokenizer.h"
#include "models/weights/model_source.h"
#include "models/weights/safetensors_writer.h"
#include "models/weights/tiny_llama_gguf.h"

namespace loom::quant {
namespace {

using kernels::quant::QuantScheme;

std::string Temp(const std::string& name) {
  const std::string p = std::string(::testing::TempDir()) + "/" + name;
  std::filesystem::remove_all(p);
  return p;
}

// hidden 64, q 64, kv 32, intermediate 96, 2 layers, vocab 40, F32 weights. The
// vocabulary is byte-level: the specials, "a".."z", "\u0120" (space), "ab", fillers, so
// lowercase text with spaces tokenizes.
std::string TinyModel(const std::string& name, const std::string& arch = "llama") {
  TinyLlamaOptions o;
  o.omit = {"tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges"};
  if (arch != "llama") o.omit.insert("general.architecture");
  GgufWriter w = BuildTinyLlamaGguf(o);
  if (arch != "llama") w.AddString("general.architecture", arch);
  std::vector<std::string> tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  std::vector<int32_t> types = {3, 3, 3};
  for (char c = 'a'; c <= 'z'; ++c) tokens.push_back(std::string(1, c));
  tokens.push_back("\xc4\xa0");
  tokens.push_back("ab");
  for (int i = 0; static_cast<int>(tokens.size()) < o.vocab; ++i) tokens.push_back("ab" + std::to_string(i));
  types.resize(tokens.size(), 1);
  w.AddStringArray("tokenizer.ggml.tokens", tokens);
  w.AddI32Array("tokenizer.ggml.token_type", types);
  w.AddStringArray("tokenizer.ggml.merges", {"a b"});
  const std::string path = Temp(name);
  EXPECT_TRUE(w.WriteFile(path).ok());
  return path;
}

std::vector<std::vector<int32_t>> RandomSequences(int n, int len, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> id(3, vocab - 1);
  std::vector<std::vector<int32_t>> s(n, std::vector<int32_t>(len));
  for (auto& q : s) for (int32_t& t : q) t = id(rng);
  return s;
}

QuantOptions TinyOptions(QuantScheme scheme, bool gptq) {
  QuantOptions o;
  o.scheme = scheme;
  o.group_size = 32;
  o.outliers = {32, 32, 32, 32};
  o.gptq = gptq;
  o.threads = 2;
  return o;
}

class TinyModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = TinyModel("tiny.gguf");
    auto src = ModelSource::Open(path_);
    ASSERT_TRUE(src.ok()) << src.status();
    backend_ = kernels::CreateCpuBackendOnPool(&pool_);
    auto m = LlamaModel::Create(*std::move(src), backend_.get());
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = *std::move(m);
    seqs_ = RandomSequences(4, 24, model_->config().vocab_size, 1);
  }
  kernels::ThreadPool pool_{2};
  std::string path_;
  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<LlamaModel> model_;
  std::vector<std::vector<int32_t>> seqs_;
};

TEST_F(TinyModelTest, CalibrationEnergiesAndHessians) {
  auto with_backend = RunCalibration(*model_, seqs_, true, backend_.get(), nullptr);
  auto plain = RunCalibration(*model_, seqs_, true, nullptr, nullptr);
  auto energy_only = RunCalibration(*model_, seqs_, false, nullptr, nullptr);
  ASSERT_TRUE(with_backend.ok() && plain.ok() && energy_only.ok());
  EXPECT_EQ(with_backend->tokens, 4 * 24);
  ASSERT_EQ(with_backend->layers.size(), 2u);
  EXPECT_TRUE(energy_only->layers[0][0].hessian.empty());
  const int widths[] = {64, 64, 64, 96};
  for (int l = 0; l < 2; ++l) {
    for (int a = 0; a < kNumQuantActivations; ++a) {
      const ActivationStats& b = with_backend->layers[l][a];
      const ActivationStats& p = plain->layers[l][a];
      ASSERT_EQ(b.k, widths[a]);
      EXPECT_EQ(b.energy, p.energy);
      EXPECT_EQ(b.energy, energy_only->layers[l][a].energy);
      double total = 0;
      for (double e : b.energy) total += e;
      EXPECT_GT(total, 0);
      for (int i = 0; i < b.k; ++i) {
        EXPECT_NEAR(b.hessian[i * b.k + i], b.energy[i], 1e-5 * (1 + b.energy[i]));
        for (int j = 0; j < b.k; ++j) {
          const double h = b.hessian[i * b.k + j];
          EXPECT_NEAR(h, p.hessian[i * b.k + j], 1e-4 * (1 + std::abs(h)));
          EXPECT_EQ(h, b.hessian[j * b.k + i]);  // symmetric
        }
      }
    }
  }
}

TEST_F(TinyModelTest, CalibrationCacheRoundTrip) {
  auto stats = RunCalibration(*model_, seqs_, true, backend_.get(), nullptr);
  ASSERT_TRUE(stats.ok());
  const std::string path = Temp("stats.cal");
  const std::string key = CalibrationCacheKey("m", "t", 4, 24, true);
  ASSERT_TRUE(SaveCalibrationStats(path, key, *stats).ok());
  auto back = LoadCalibrationStats(path, key);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->tokens, stats->tokens);
  for (int l = 0; l < 2; ++l) {
    for (int a = 0; a < kNumQuantActivations; ++a) {
      EXPECT_EQ(back->layers[l][a].energy, stats->layers[l][a].energy);
      EXPECT_EQ(back->layers[l][a].hessian, stats->layers[l][a].hessian);  // float-rounded both
    }
  }
  EXPECT_EQ(LoadCalibrationStats(path, CalibrationCacheKey("m", "t", 4, 25, true)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(LoadCalibrationStats(Temp("none.cal"), key).status().code(), absl::StatusCode::kNotFound);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 5);
  EXPECT_EQ(LoadCalibrationStats(path, key).status().code(), absl::StatusCode::kDataLoss);
}

// The written checkpoint holds the base weights, permuted as the format says (columns by
// the input's perm, gate/up rows by silu_mul's), within the quantization error; the
// outliers are the highest-energy channels; GPTQ works from the Hessians.
TEST_F(TinyModelTest, CheckpointHoldsTheFoldedWeights) {
  auto stats = RunCalibration(*model_, seqs_, true, backend_.get(), nullptr);
  ASSERT_TRUE(stats.ok());
  for (QuantScheme scheme : {QuantScheme::kW4A4, QuantScheme::kW8A8}) {
    for (bool gptq : {false, true}) {
      const QuantOptions o = TinyOptions(scheme, gptq);
      const QuantizedCheckpointMeta meta = MetaFor(o, {32, 32, 32, 32}, 2);
      auto layers = QuantizeModel(model_->source(), *stats, meta, o, nullptr);
      ASSERT_TRUE(layers.ok()) << layers.status();
      const std::string dir = Temp("ckpt");
      ASSERT_TRUE(WriteQuantizedCheckpoint(dir, meta, *layers).ok());
      auto ck = QuantizedCheckpoint::Open(dir);
      ASSERT_TRUE(ck.ok()) << ck.status();
      ASSERT_TRUE(ck->CheckConfig(model_->config()).ok());
      const double tol = scheme == QuantScheme::kW4A4 ? 0.25 : 0.02;
      for (int l = 0; l < 2; ++l) {
        const QuantizedLayerView& v = ck->layer(l);
        for (int a = 0; a < kNumQuantActivations; ++a) {
          // Every outlier has at least the energy of every normal channel.
          const std::vector<double>& e = stats->layers[l][a].energy;
          double min_out = 1e300, max_norm = 0;
          for (int j = 0; j < v.k[a]; ++j) {
            (j < v.k[a] - 32 ? max_norm : min_out) =
                j < v.k[a] - 32 ? std::max(max_norm, e[v.perm[a][j]]) : std::min(min_out, e[v.perm[a][j]]);
          }
          EXPECT_GE(min_out, max_norm);
        }
        for (int p = 0; p < kNumQuantProjections; ++p) {
          const auto proj = static_cast<QuantProjection>(p);
          const WeightTensor* w = *model_->source().Tensor(BaseWeightName(l, proj));
          const float* base = reinterpret_cast<const float*>(w->data);
          const int64_t rows = w->shape[0], k = w->shape[1];
          const int32_t* cperm = v.perm[static_cast<int>(InputOf(proj))];
          const bool row_folded = proj == QuantProjection::kGate || proj == QuantProjection::kUp;
          const int32_t* rperm = v.perm[static_cast<int>(QuantActivation::kSiluMul)];
          const std::vector<float> dq = kernels::quant::DequantizeWeight(v.proj[p]);
          double err = 0, norm = 0;
          for (int64_t r = 0; r < rows; ++r) {
            const int64_t src_row = row_folded ? rperm[r] : r;
            for (int64_t j = 0; j < k; ++j) {
              const double want = base[src_row * k + cperm[j]];
              const double d = dq[r * k + j] - want;
              err += d * d;
              norm += want * want;
            }
          }
          EXPECT_LT(std::sqrt(err / norm), tol) << QuantProjectionName(proj) << " layer " << l
                                                << " gptq " << gptq;
        }
      }
    }
  }
}

TEST_F(TinyModelTest, QuantizerRefusesMismatchedStatistics) {
  auto stats = RunCalibration(*model_, seqs_, false, nullptr, nullptr);
  ASSERT_TRUE(stats.ok());
  const QuantOptions o = TinyOptions(QuantScheme::kW4A4, true);
  const QuantizedCheckpointMeta meta = MetaFor(o, {32, 32, 32, 32}, 2);
  auto no_h = QuantizeModel(model_->source(), *stats, meta, o, nullptr);
  EXPECT_EQ(no_h.status().code(), absl::StatusCode::kFailedPrecondition);
  CalibrationStats one = *stats;
  one.layers.pop_back();
  EXPECT_FALSE(QuantizeModel(model_->source(), one, meta, TinyOptions(QuantScheme::kW4A4, false), nullptr).ok());
}

// The whole pipeline on the tiny model and a text of its tokens; a rerun takes the
// statistics from the cache and writes the same bytes; GPTQ reuses Hessian statistics.
TEST(PipelineTest, QuantizesAndRerunsFromTheCache) {
  QuantizeRequest r;
  r.model_path = TinyModel("tiny_full.gguf");
  r.calibration_text = Temp("calib_full.txt");
  std::string text;
  std::mt19937 rng(2);
  for (int i = 0; i < 400; ++i) text += std::string(1, 'a' + rng() % 26) + (i % 5 == 4 ? " " : "");
  ASSERT_TRUE(WriteStringToFile(r.calibration_text, text).ok());
  r.sequences = 4;
  r.seq_len = 16;
  r.cache_dir = Temp("cache");
  r.options = TinyOptions(QuantScheme::kW4A8, true);
  r.out_dir = Temp("full1");
  const std::string first_dir = r.out_dir;
  auto first = QuantizeToCheckpoint(r, nullptr);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->calibration_cached);
  EXPECT_EQ(first->calibration_tokens, 64);
  r.out_dir = Temp("full2");
  auto second = QuantizeToCheckpoint(r, nullptr);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->calibration_cached);
  auto read = [](const std::string& p) { return *ReadFileToString(p); };
  EXPECT_EQ(read(first_dir + "/model.safetensors"), read(r.out_dir + "/model.safetensors"));
  auto ck = QuantizedCheckpoint::Open(r.out_dir);
  ASSERT_TRUE(ck.ok()) << ck.status();
  EXPECT_EQ(ck->meta().calibration.sequences, 4);
  EXPECT_EQ(ck->meta().calibration.sha256, Sha256Hex(text));
  EXPECT_TRUE(ck->CheckBaseModelFile(r.model_path, true).ok());
  // GPTQ refinements are recorded in the JSON (provenance).
  EXPECT_FALSE(ck->meta().gptq_options.act_order);
  EXPECT_FALSE(ck->meta().w4_full_range);
  r.options.gptq_act_order = true;
  r.options.w4_full_range = true;
  r.options.gptq_damp = 0.05;
  r.options.outlier_selection = "owq";
  r.options.refit_scales = true;
  r.out_dir = Temp("full_act_order");
  auto act = QuantizeToCheckpoint(r, nullptr);
  ASSERT_TRUE(act.ok()) << act.status();
  auto ck_act = QuantizedCheckpoint::Open(r.out_dir);
  ASSERT_TRUE(ck_act.ok()) << ck_act.status();
  EXPECT_TRUE(ck_act->meta().gptq_options.act_order);
  EXPECT_FALSE(ck_act->meta().gptq_options.static_groups);
  EXPECT_EQ(ck_act->meta().gptq_options.damp, 0.05);
  EXPECT_TRUE(ck_act->meta().w4_full_range);
  EXPECT_EQ(ck_act->meta().outlier_selection, "owq");
  EXPECT_TRUE(ck_act->meta().refit_scales);
  r.options.outlier_selection = "energy";
  r.options.refit_scales = false;
  r.options.gptq_act_order = r.options.w4_full_range = false;
  r.options.gptq_damp = 0.01;
  r.options.gptq_static_groups = true;
  r.options.gptq_hessian_scale_search = true;  // refused: not with static groups
  r.out_dir = Temp("full_refused");
  EXPECT_EQ(QuantizeToCheckpoint(r, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  r.options.gptq_static_groups = r.options.gptq_hessian_scale_search = false;
  r.options.gptq = false;  // served by the Hessian cache too
  r.out_dir = Temp("full3");
  auto third = QuantizeToCheckpoint(r, nullptr);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_TRUE(third->calibration_cached);
  // The output-error proxy: GPTQ minimises exactly sum_r d_r^T H d_r (up to 1% damping),
  // the clip search a diagonal approximation of it, so GPTQ's is the lower one.
  ASSERT_TRUE(second->has_output_error && third->has_output_error);
  double num_gptq = 0, den_gptq = 0, num_clip = 0, den_clip = 0;
  for (int p = 0; p < kNumQuantProjections; ++p) {
    num_gptq += second->output_error.num[p];
    den_gptq += second->output_error.den[p];
    num_clip += third->output_error.num[p];
    den_clip += third->output_error.den[p];
  }
  EXPECT_GT(num_gptq, 0);
  EXPECT_EQ(den_gptq, den_clip);  // the same weights and Hessians
  EXPECT_LT(num_gptq, num_clip);
  r.seq_len = 1000;  // more tokens than the text has
  r.cache_dir.clear();
  r.out_dir = Temp("full4");
  auto short_text = QuantizeToCheckpoint(r, nullptr);
  ASSERT_FALSE(short_text.ok());
  EXPECT_NE(short_text.status().message().find("are needed"), std::string::npos) << short_text.status();
}

// A Hugging Face directory base: the same pipeline; the directory's digest is recorded and
// checks out; q/k rows stay in the directory's (HF) order, gate/up rows in silu_mul's.
TEST(PipelineTest, QuantizesAnHfDirectory) {
  const std::string gguf = TinyModel("tiny_hf.gguf");
  auto src = ModelSource::Open(gguf);
  ASSERT_TRUE(src.ok());
  const std::string hf = Temp("tiny_hf_dir");
  ASSERT_TRUE(ExportHfDirectory(**src, hf, DType::kF32, 1).ok());
  QuantizeRequest r;
  r.model_path = hf;
  r.calibration_text = Temp("calib_hf.txt");
  std::string text;
  std::mt19937 rng(4);
  for (int i = 0; i < 300; ++i) text += std::string(1, 'a' + rng() % 26) + (i % 4 == 3 ? " " : "");
  ASSERT_TRUE(WriteStringToFile(r.calibration_text, text).ok());
  r.sequences = 2;
  r.seq_len = 16;
  r.options = TinyOptions(QuantScheme::kW8A8, false);
  r.out_dir = Temp("hf_out");
  auto rep = QuantizeToCheckpoint(r, nullptr);
  ASSERT_TRUE(rep.ok()) << rep.status();
  auto ck = QuantizedCheckpoint::Open(r.out_dir);
  ASSERT_TRUE(ck.ok()) << ck.status();
  EXPECT_TRUE(ck->CheckBaseModelFile(hf, true).ok());
  EXPECT_FALSE(ck->CheckBaseModelFile(gguf, false).ok());
  auto hf_src = ModelSource::Open(hf);
  ASSERT_TRUE(hf_src.ok());
  EXPECT_TRUE(ck->CheckConfig((*hf_src)->config()).ok());
  // attn_q: stored row r, column j ~ the directory's row r, column attn_norm.perm[j].
  const WeightTensor* wq = *(*hf_src)->Tensor(BaseWeightName(0, QuantProjection::kQ));
  ASSERT_EQ(wq->dtype, DType::kF32);
  const float* base = reinterpret_cast<const float*>(wq->data);
  const QuantizedLayerView& v = ck->layer(0);
  const std::vector<float> dq = kernels::quant::DequantizeWeight(v.proj[0]);
  const int k = v.k[0];
  double err = 0, norm = 0;
  for (int64_t row = 0; row < v.proj[0].rows; ++row) {
    for (int j = 0; j < k; ++j) {
      const double want = base[row * k + v.perm[0][j]];
      err += (dq[row * k + j] - want) * (dq[row * k + j] - want);
      norm += want * want;
    }
  }
  EXPECT_LT(std::sqrt(err / norm), 0.02);
}

// The pipeline's refusals, each before any forward pass.
class PipelineRefusalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    r_.model_path = TinyModel("tiny_p.gguf");
    r_.calibration_text = Temp("calib.txt");
    ASSERT_TRUE(WriteStringToFile(r_.calibration_text, "t3t4 t5t6\n").ok());
    r_.out_dir = Temp("out");
    r_.sequences = 2;
    r_.seq_len = 4;
    r_.options = TinyOptions(QuantScheme::kW4A4, false);
  }
  void ExpectRefused(const std::string& words, absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
    auto rep = QuantizeToCheckpoint(r_, nullptr);
    ASSERT_FALSE(rep.ok()) << words;
    EXPECT_EQ(rep.status().code(), code) << rep.status();
    EXPECT_NE(rep.status().message().find(words), std::string::npos) << rep.status();
    EXPECT_FALSE(std::filesystem::exists(r_.out_dir));
  }
  QuantizeRequest r_;
};

TEST_F(PipelineRefusalTest, UnknownArchitecture) {
  r_.model_path = TinyModel("gpt2.gguf", "gpt2");
  ExpectRefused("architecture 'gpt2' is not supported", absl::StatusCode::kUnimplemented);
}

TEST_F(PipelineRefusalTest, MissingModel) {
  r_.model_path = Temp("absent.gguf");
  auto rep = QuantizeToCheckpoint(r_, nullptr);
  ASSERT_FALSE(rep.ok());
  EXPECT_NE(rep.status().message().find("cannot quantize"), std::string::npos) << rep.status();
}

TEST_F(PipelineRefusalTest, EmptyCalibrationText) {
  ASSERT_TRUE(WriteStringToFile(r_.calibration_text, " \n\n").ok());
  ExpectRefused("is empty");
}

TEST_F(PipelineRefusalTest, HeldOutText) {
  r_.calibration_text = Temp("heldout.txt");
  ASSERT_TRUE(WriteStringToFile(r_.calibration_text, "t3t4").ok());
  ExpectRefused("refusing to calibrate on heldout.txt");
}

TEST_F(PipelineRefusalTest, GroupSizes) {
  r_.options.group_size = 31;
  ExpectRefused("group size 31 must be positive and even");
  r_.options.group_size = 128;
  ExpectRefused("group size 128 does not fit activation attn_norm (64 channels)");
  r_.options.group_size = 24;  // 64 - 32 = 32 is not a multiple of 24
  ExpectRefused("leaves 32 normal channels, not a positive multiple of the group size 24");
}

TEST_F(PipelineRefusalTest, OutlierCounts) {
  r_.options.outliers = {32, 32, 32, 40};
  ExpectRefused("outlier count 40 for silu_mul (96 channels)");
}

TEST_F(PipelineRefusalTest, SchemeNone) {
  r_.options.scheme = QuantScheme::kNone;
  ExpectRefused("nothing to quantize");
}

TEST_F(PipelineRefusalTest, ClipGrid) {
  r_.options.clip_search.min_ratio = 0;
  ExpectRefused("min_ratio");
}

}  // namespace
}  // namespace loom::quant
