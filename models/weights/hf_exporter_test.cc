#include "models/weights/hf_exporter.h"

#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/testing/test_model.h"
#include "models/weights/gguf_reader.h"
#include "models/weights/json_file.h"
#include "models/weights/model_source.h"
#include "models/weights/qk_permutation.h"
#include "models/weights/tiny_llama_gguf.h"

namespace loom {
namespace {

std::string TempDir(const std::string& name) {
  const char* d = std::getenv("TEST_TMPDIR");
  const std::string p = absl::StrCat(d ? d : "/tmp", "/", name);
  std::filesystem::remove_all(p);
  return p;
}

std::vector<float> Dequantize(const WeightTensor& w) {
  std::vector<float> out(static_cast<size_t>(w.rows() * w.cols()));
  for (int64_t r = 0; r < w.rows(); ++r) {
    DequantizeRow(w.dtype, w.data + r * w.row_bytes(), &out[r * w.cols()], w.cols());
  }
  return out;
}

void ExpectSameConfig(const LlamaConfig& a, const LlamaConfig& b) {
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden, b.hidden);
  EXPECT_EQ(a.intermediate, b.intermediate);
  EXPECT_EQ(a.n_layers, b.n_layers);
  EXPECT_EQ(a.n_heads, b.n_heads);
  EXPECT_EQ(a.n_kv_heads, b.n_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.rms_eps, b.rms_eps);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.max_context, b.max_context);
  EXPECT_EQ(a.tied_embeddings, b.tied_embeddings);
}

void ExpectSameVocabulary(const Vocabulary& a, const Vocabulary& b) {
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.pre, b.pre);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.token_types, b.token_types);
  EXPECT_EQ(a.merges, b.merges);
  EXPECT_EQ(a.bos_id, b.bos_id);
  EXPECT_EQ(a.eos_id, b.eos_id);
  EXPECT_EQ(a.unk_id, b.unk_id);
  EXPECT_EQ(a.pad_id, b.pad_id);
  EXPECT_EQ(a.add_bos, b.add_bos);
  EXPECT_EQ(a.add_eos, b.add_eos);
  EXPECT_EQ(a.chat_template, b.chat_template);
}

// Every tensor of `hf` equals the dequantized GGUF tensor converted by `round`, with q/k
// rows in HF order: HF row HfRowOfGgufRow(r) == GGUF row r.
template <typename Round>
void ExpectSameTensors(const ModelSource& gguf, const ModelSource& hf, DType dtype,
                       Round round) {
  ASSERT_EQ(gguf.tensors().size(), hf.tensors().size());
  const int64_t d = gguf.config().head_dim;
  for (const auto& [name, g] : gguf.tensors()) {
    auto h = hf.Tensor(name);
    ASSERT_TRUE(h.ok()) << h.status();
    ASSERT_EQ((*h)->shape, g.shape) << name;
    ASSERT_EQ((*h)->dtype, dtype) << name;
    const std::vector<float> gv = Dequantize(g), hv = Dequantize(**h);
    const bool qk = absl::EndsWith(name, "attn_q.weight") || absl::EndsWith(name, "attn_k.weight");
    int64_t mismatches = 0;
    for (int64_t r = 0; r < g.rows(); ++r) {
      const int64_t hr = qk ? HfRowOfGgufRow(r, d) : r;
      for (int64_t c = 0; c < g.cols(); ++c) {
        mismatches += round(gv[r * g.cols() + c]) != hv[hr * g.cols() + c];
      }
    }
    EXPECT_EQ(mismatches, 0) << name;
  }
}

float Identity(float x) { return x; }
float RoundBf16(float x) { return Bf16ToFp32(Fp32ToBf16(x)); }
float RoundF16(float x) { return Fp16ToFp32(Fp32ToFp16(x)); }

TEST(QkPermutation, MatchesTheConverterFormula) {
  const int64_t d = 8;  // GGUF row h*d + 2i + j holds HF row h*d + j*d/2 + i
  for (int64_t h = 0; h < 3; ++h) {
    for (int64_t i = 0; i < d / 2; ++i) {
      for (int64_t j = 0; j < 2; ++j) {
        EXPECT_EQ(HfRowOfGgufRow(h * d + 2 * i + j, d), h * d + j * d / 2 + i);
        EXPECT_EQ(GgufRowOfHfRow(h * d + j * d / 2 + i, d), h * d + 2 * i + j);
      }
    }
  }
}

TEST(HfExporter, RealModelF32ThreeShards) {
  auto gguf = ModelSource::Open(testing::DefaultModelPath());
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  const std::string dir = TempDir("export_f32");
  ASSERT_TRUE(ExportHfDirectory(**gguf, dir, DType::kF32, 3).ok());
  EXPECT_TRUE(FileExists(dir + "/model.safetensors.index.json"));
  EXPECT_TRUE(FileExists(dir + "/model-00003-of-00003.safetensors"));
  EXPECT_FALSE(FileExists(dir + "/model.safetensors"));
  auto hf = ModelSource::Open(dir);
  ASSERT_TRUE(hf.ok()) << hf.status();
  EXPECT_EQ((*hf)->files_.size(), 3u);
  ExpectSameConfig((*gguf)->config(), (*hf)->config());
  EXPECT_EQ((*hf)->config().rope_layout, RopeLayout::kHalves);
  ExpectSameVocabulary((*gguf)->vocabulary(), (*hf)->vocabulary());
  ExpectSameTensors(**gguf, **hf, DType::kF32, Identity);
  std::filesystem::remove_all(dir);
}

TEST(HfExporter, RealModelBf16SingleFile) {
  auto gguf = ModelSource::Open(testing::DefaultModelPath());
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  const std::string dir = TempDir("export_bf16");
  ASSERT_TRUE(ExportHfDirectory(**gguf, dir, DType::kBF16, 1).ok());
  EXPECT_TRUE(FileExists(dir + "/model.safetensors"));
  EXPECT_FALSE(FileExists(dir + "/model.safetensors.index.json"));
  auto hf = ModelSource::Open(dir);
  ASSERT_TRUE(hf.ok()) << hf.status();
  ExpectSameConfig((*gguf)->config(), (*hf)->config());
  ExpectSameVocabulary((*gguf)->vocabulary(), (*hf)->vocabulary());
  ExpectSameTensors(**gguf, **hf, DType::kBF16, RoundBf16);
  std::filesystem::remove_all(dir);
}

TEST(HfExporter, TinyUntiedQ4_1ToF16AndBackToGgufOrder) {
  TinyLlamaOptions o;
  o.matrix_dtype = DType::kQ4_1;
  o.tied = false;
  const std::string path = TempDir("tiny.gguf");
  ASSERT_TRUE(BuildTinyLlamaGguf(o).WriteFile(path).ok());
  auto gguf = ModelSource::Open(path);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  const std::string dir = TempDir("export_tiny");
  ASSERT_TRUE(ExportHfDirectory(**gguf, dir, DType::kF16, 2).ok());
  auto hf = ModelSource::Open(dir);
  ASSERT_TRUE(hf.ok()) << hf.status();
  ExpectSameConfig((*gguf)->config(), (*hf)->config());
  ExpectSameVocabulary((*gguf)->vocabulary(), (*hf)->vocabulary());
  ExpectSameTensors(**gguf, **hf, DType::kF16, RoundF16);
  // Exporting an HF source again does not permute (its rope layout is already kHalves).
  const std::string dir2 = TempDir("export_tiny2");
  ASSERT_TRUE(ExportHfDirectory(**hf, dir2, DType::kF32, 1).ok());
  auto hf2 = ModelSource::Open(dir2);
  ASSERT_TRUE(hf2.ok()) << hf2.status();
  for (const auto& [name, t] : (*hf)->tensors()) {
    auto t2 = (*hf2)->Tensor(name);
    ASSERT_TRUE(t2.ok()) << t2.status();
    EXPECT_EQ(Dequantize(t), Dequantize(**t2)) << name;
  }
}

TEST(HfExporter, RejectsBadArguments) {
  TinyLlamaOptions o;
  const std::string path = TempDir("tiny2.gguf");
  ASSERT_TRUE(BuildTinyLlamaGguf(o).WriteFile(path).ok());
  auto gguf = ModelSource::Open(path);
  ASSERT_TRUE(gguf.ok());
  EXPECT_EQ(ExportHfDirectory(**gguf, TempDir("x"), DType::kQ8_0, 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExportHfDirectory(**gguf, TempDir("x"), DType::kF32, 0).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace loom
