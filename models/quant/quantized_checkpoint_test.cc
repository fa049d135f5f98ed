#include "models/quant/quantized_checkpoint.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/quant/weight_packing.h"
#include "models/quant/channel_permutation.h"
#include "models/weights/json_file.h"
#include "models/weights/safetensors_file.h"
#include "models/weights/safetensors_writer.h"
#include "nlohmann/json.hpp"

namespace loom::quant {
namespace {

using kernels::quant::AtomWeight;
using kernels::quant::QuantScheme;
using kernels::quant::QuantSpec;

// A small model shape: hidden 64, q 64, kv 32, intermediate 96; group 32.
LlamaConfig SmallConfig() {
  LlamaConfig c;
  c.hidden = 64;
  c.intermediate = 96;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 16;
  c.vocab_size = 40;
  return c;
}

QuantizedCheckpointMeta SmallMeta(QuantScheme scheme) {
  QuantizedCheckpointMeta m;
  m.scheme = scheme;
  m.weight_bits = kernels::quant::SchemeWeightBits(scheme);
  m.activation_bits = kernels::quant::SchemeActivationBits(scheme);
  m.group_size = 32;
  m.outliers = {32, 0, 32, 32};
  m.gptq = true;
  m.gptq_options = {0.05, true, true, false};
  m.w4_full_range = true;
  m.outlier_selection = "owq";
  m.refit_scales = true;
  m.base_model = {"/models/base.gguf", std::string(64, 'a'), 1234};
  m.calibration = {"/text/calibration.txt", std::string(64, 'b'), 4, 16, "synthetic"};
  m.n_layers = 2;
  return m;
}

std::vector<QuantizedLayer> SmallLayers(const QuantizedCheckpointMeta& m, uint32_t seed) {
  const LlamaConfig c = SmallConfig();
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0, 0.05f);
  const int ks[] = {c.hidden, c.n_heads * c.head_dim, c.hidden, c.intermediate};
  const int64_t rows[] = {64, 32, 32, 64, 96, 96, 64};
  std::vector<QuantizedLayer> layers(m.n_layers);
  for (QuantizedLayer& l : layers) {
    for (int a = 0; a < kNumQuantActivations; ++a) {
      std::vector<double> e(ks[a]);
      for (double& v : e) v = std::abs(g(rng));
      l.perm[a] = *OutlierPermutation(e, m.outliers[a]);
    }
    for (int p = 0; p < kNumQuantProjections; ++p) {
      const QuantSpec s = m.Spec(static_cast<QuantProjection>(p), ks[static_cast<int>(InputOf(static_cast<QuantProjection>(p)))]);
      std::vector<float> w(rows[p] * s.k);
      for (float& v : w) v = g(rng);
      l.proj[p] = *kernels::quant::QuantizeWeightRTN(w.data(), rows[p], s);
    }
  }
  return layers;
}

std::string TempDir(const std::string& name) {
  const std::string d = std::string(::testing::TempDir()) + "/" + name;
  std::filesystem::remove_all(d);
  return d;
}

TEST(QuantizedCheckpointTest, WriterReaderRoundTrip) {
  for (QuantScheme scheme : {QuantScheme::kW4A4, QuantScheme::kW4A8, QuantScheme::kW8A8}) {
    const QuantizedCheckpointMeta m = SmallMeta(scheme);
    const std::vector<QuantizedLayer> layers = SmallLayers(m, 3);
    const std::string dir = TempDir("rt_" + std::string(kernels::quant::QuantSchemeName(scheme)));
    ASSERT_TRUE(WriteQuantizedCheckpoint(dir, m, layers).ok());
    absl::StatusOr<QuantizedCheckpoint> c = QuantizedCheckpoint::Open(dir);
    ASSERT_TRUE(c.ok()) << c.status();
    QuantizedCheckpoint moved = *std::move(c);  // views survive a move
    EXPECT_EQ(moved.meta().ToJson(), m.ToJson());
    EXPECT_TRUE(moved.CheckConfig(SmallConfig()).ok());
    ASSERT_EQ(moved.n_layers(), 2);
    for (int i = 0; i < 2; ++i) {
      const QuantizedLayerView& v = moved.layer(i);
      for (int a = 0; a < kNumQuantActivations; ++a) {
        ASSERT_EQ(v.k[a], static_cast<int>(layers[i].perm[a].size()));
        EXPECT_EQ(std::vector<int32_t>(v.perm[a], v.perm[a] + v.k[a]), layers[i].perm[a]);
      }
      for (int p = 0; p < kNumQuantProjections; ++p) {
        const kernels::quant::AtomWeightView& got = v.proj[p];
        const AtomWeight& want = layers[i].proj[p];
        EXPECT_EQ(got.spec, want.spec);
        EXPECT_EQ(got.rows, want.rows);
        EXPECT_EQ(kernels::quant::DequantizeWeight(got), kernels::quant::DequantizeWeight(want.view()));
        EXPECT_EQ(got.q_outlier == nullptr, want.spec.n_outliers == 0);
      }
    }
    LlamaConfig other = SmallConfig();
    other.intermediate = 128;
    EXPECT_EQ(moved.CheckConfig(other).code(), absl::StatusCode::kFailedPrecondition);
  }
}

TEST(QuantizedCheckpointTest, BaseModelCheck) {
  const std::string base = TempDir("base.bin");
  ASSERT_TRUE(WriteStringToFile(base, "abc").ok());
  QuantizedCheckpointMeta m = SmallMeta(QuantScheme::kW4A4);
  m.base_model = {base, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", 3};
  const std::string dir = TempDir("basecheck");
  ASSERT_TRUE(WriteQuantizedCheckpoint(dir, m, SmallLayers(m, 1)).ok());
  absl::StatusOr<QuantizedCheckpoint> c = QuantizedCheckpoint::Open(dir);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->CheckBaseModelFile(base, true).ok());
  EXPECT_TRUE(c->CheckBaseModelFile(base, false).ok());
  ASSERT_TRUE(WriteStringToFile(base, "abd").ok());  // same size, other content
  EXPECT_TRUE(c->CheckBaseModelFile(base, false).ok());
  EXPECT_EQ(c->CheckBaseModelFile(base, true).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(WriteStringToFile(base, "abcd").ok());
  EXPECT_EQ(c->CheckBaseModelFile(base, false).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(QuantizedCheckpointTest, WriterRefusesInconsistentLayers) {
  const QuantizedCheckpointMeta m = SmallMeta(QuantScheme::kW4A4);
  std::vector<QuantizedLayer> layers = SmallLayers(m, 2);
  QuantizedCheckpointMeta three = m;
  three.n_layers = 3;
  EXPECT_FALSE(WriteQuantizedCheckpoint(TempDir("w1"), three, layers).ok());
  std::vector<QuantizedLayer> bad_perm = layers;
  bad_perm[1].perm[2][0] = bad_perm[1].perm[2][1];
  EXPECT_FALSE(WriteQuantizedCheckpoint(TempDir("w2"), m, bad_perm).ok());
  std::vector<QuantizedLayer> bad_spec = layers;
  bad_spec[0].proj[3].spec.n_outliers = 32;
  EXPECT_FALSE(WriteQuantizedCheckpoint(TempDir("w3"), m, bad_spec).ok());
  std::vector<QuantizedLayer> bad_size = layers;
  bad_size[0].proj[6].scales.pop_back();
  EXPECT_FALSE(WriteQuantizedCheckpoint(TempDir("w4"), m, bad_size).ok());
}

// A good checkpoint, then one change to its JSON or tensors; Open must refuse it with a
// message containing `words`.
class ReaderRefusalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    meta_ = SmallMeta(QuantScheme::kW4A4);
    dir_ = TempDir("refuse");
    ASSERT_TRUE(WriteQuantizedCheckpoint(dir_, meta_, SmallLayers(meta_, 5)).ok());
    json_ = *ReadJsonObject(dir_ + "/" + kQuantJsonName);
    auto f = SafetensorsFile::Open(dir_ + "/" + kQuantTensorsName);
    ASSERT_TRUE(f.ok());
    file_ = *std::move(f);
    for (const auto& [name, t] : file_->tensors()) {
      entries_.push_back({name, t.dtype_name, t.shape,
                          std::string(reinterpret_cast<const char*>(t.data), t.nbytes)});
    }
  }
  void ExpectRefused(const std::string& words, absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
    absl::StatusOr<QuantizedCheckpoint> c = QuantizedCheckpoint::Open(dir_);
    ASSERT_FALSE(c.ok()) << words;
    EXPECT_EQ(c.status().code(), code) << c.status();
    EXPECT_NE(c.status().message().find(words), std::string::npos) << c.status();
  }
  void WriteJson(const nlohmann::json& j) {
    ASSERT_TRUE(WriteStringToFile(dir_ + "/" + kQuantJsonName, j.dump()).ok());
  }
  void WriteTensors() {
    ASSERT_TRUE(WriteSafetensors(dir_ + "/" + kQuantTensorsName, entries_, {}).ok());
  }
  SafetensorsEntry* Entry(const std::string& name) {
    for (SafetensorsEntry& e : entries_) if (e.name == name) return &e;
    return nullptr;
  }

  QuantizedCheckpointMeta meta_;
  std::string dir_;
  nlohmann::json json_;
  std::unique_ptr<SafetensorsFile> file_;
  std::vector<SafetensorsEntry> entries_;
};

TEST_F(ReaderRefusalTest, OpensUnchanged) { EXPECT_TRUE(QuantizedCheckpoint::Open(dir_).ok()); }

// Checkpoints written before gptq_options / w4_full_range existed open with the defaults
// they were made with (damp 0.01, natural order, dynamic groups, codes in [-7, 7]).
TEST_F(ReaderRefusalTest, OlderJsonWithoutGptqOptionsOpens) {
  nlohmann::json j = json_;
  j.erase("gptq_options");
  j.erase("w4_full_range");
  j.erase("outlier_selection");
  j.erase("refit_scales");
  WriteJson(j);
  absl::StatusOr<QuantizedCheckpoint> c = QuantizedCheckpoint::Open(dir_);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->meta().gptq_options.damp, 0.01);
  EXPECT_FALSE(c->meta().gptq_options.act_order);
  EXPECT_FALSE(c->meta().gptq_options.static_groups);
  EXPECT_FALSE(c->meta().gptq_options.hessian_scale_search);
  EXPECT_FALSE(c->meta().w4_full_range);
  EXPECT_EQ(c->meta().outlier_selection, "energy");
  EXPECT_FALSE(c->meta().refit_scales);
}

TEST_F(ReaderRefusalTest, MissingFiles) {
  std::filesystem::remove(dir_ + "/" + kQuantTensorsName);
  ExpectRefused("no model.safetensors", absl::StatusCode::kNotFound);
  std::filesystem::remove(dir_ + "/" + kQuantJsonName);
  ExpectRefused("no loom_quant.json", absl::StatusCode::kNotFound);
}

TEST_F(ReaderRefusalTest, MalformedJson) {
  ASSERT_TRUE(WriteStringToFile(dir_ + "/" + kQuantJsonName, "{\"format\": ").ok());
  ExpectRefused("loom_quant.json");
}

TEST_F(ReaderRefusalTest, JsonFields) {
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> cases = {
      {[](nlohmann::json& j) { j.erase("scheme"); }, "missing key 'scheme'"},
      {[](nlohmann::json& j) { j["format"] = "gguf"; }, "format 'gguf'"},
      {[](nlohmann::json& j) { j["version"] = 3; }, "version 3 is not supported"},
      {[](nlohmann::json& j) { j["version"] = 2; }, "version 2 (rotated) without a 'rotation'"},
      {[](nlohmann::json& j) {
         j["rotation"] = {{"kind", "randomized_hadamard"}, {"seed", 1}, {"online_attn_out", true},
                          {"online_silu_mul", true}, {"fingerprint", "00"}};
       }, "'rotation' in a version 1 checkpoint"},
      {[](nlohmann::json& j) {
         j["version"] = 2;
         j["rotation"] = {{"kind", "learned"}, {"seed", 1}, {"online_attn_out", true},
                          {"online_silu_mul", true}, {"fingerprint", "00"}};
       }, "rotation kind 'learned' is not 'randomized_hadamard'"},
      {[](nlohmann::json& j) {
         j["version"] = 2;
         j["rotation"] = {{"kind", "randomized_hadamard"}, {"seed", 1}, {"online_attn_out", 1},
                          {"online_silu_mul", true}, {"fingerprint", "00"}};
       }, "'rotation.online_attn_out' must be a boolean"},
      {[](nlohmann::json& j) { j["architecture"] = "gpt2"; }, "architecture 'gpt2' is not supported"},
      {[](nlohmann::json& j) { j["scheme"] = "w2a2"; }, "scheme 'w2a2'"},
      {[](nlohmann::json& j) { j["weight_bits"] = 8; }, "do not match scheme w4a4"},
      {[](nlohmann::json& j) { j["group_size"] = 33; }, "group_size 33 is odd"},
      {[](nlohmann::json& j) { j["group_size"] = "128"; }, "'group_size' must be an integer"},
      {[](nlohmann::json& j) { j["outliers"].erase("silu_mul"); }, "missing key 'outliers.silu_mul'"},
      {[](nlohmann::json& j) { j["outliers"]["attn_out"] = -4; }, "'outliers.attn_out' = -4"},
      {[](nlohmann::json& j) { j["gptq"] = 1; }, "'gptq' must be a boolean"},
      {[](nlohmann::json& j) { j["gptq_options"] = 1; }, "'gptq_options' must be an object"},
      {[](nlohmann::json& j) { j["gptq_options"].erase("damp"); }, "missing key 'gptq_options.damp'"},
      {[](nlohmann::json& j) { j["gptq_options"]["damp"] = -1; }, "'gptq_options.damp' = -1"},
      {[](nlohmann::json& j) { j["gptq_options"]["act_order"] = "yes"; },
       "'gptq_options.act_order' must be a boolean"},
      {[](nlohmann::json& j) { j["w4_full_range"] = 1; }, "'w4_full_range' must be a boolean"},
      {[](nlohmann::json& j) { j["outlier_selection"] = "awq"; }, "outlier_selection 'awq'"},
      {[](nlohmann::json& j) { j["refit_scales"] = "no"; }, "'refit_scales' must be a boolean"},
      {[](nlohmann::json& j) { j["base_model"].erase("sha256"); }, "base_model.sha256"},
      {[](nlohmann::json& j) { j["calibration"] = "x"; }, "'calibration' must be an object"},
      {[](nlohmann::json& j) { j["n_layers"] = 3; }, "missing tensor blk.2.attn_norm.perm"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    nlohmann::json j = json_;
    cases[i].first(j);
    WriteJson(j);
    ExpectRefused(cases[i].second);
  }
}

TEST_F(ReaderRefusalTest, OutlierCountDisagreesWithTensors) {
  nlohmann::json j = json_;
  j["outliers"]["silu_mul"] = 0;
  WriteJson(j);
  ExpectRefused("blk.0.ffn_down.qweight has shape [64, 32], expected [64, 48]");
}

TEST_F(ReaderRefusalTest, TensorShapes) {
  SafetensorsEntry* e = Entry("blk.1.attn_v.scales");
  ASSERT_NE(e, nullptr);
  e->shape = {16, 2};
  WriteTensors();
  ExpectRefused("blk.1.attn_v.scales has shape [16, 2], expected [32, 1]");
}

TEST_F(ReaderRefusalTest, TensorDtype) {
  SafetensorsEntry* e = Entry("blk.0.attn_q.qweight");
  e->dtype_name = "I8";
  WriteTensors();
  ExpectRefused("blk.0.attn_q.qweight has dtype I8, expected U8");
}

TEST_F(ReaderRefusalTest, MissingTensor) {
  entries_.erase(entries_.begin());
  const std::string gone = file_->tensors().begin()->first;
  WriteTensors();
  ExpectRefused("missing tensor " + gone);
}

TEST_F(ReaderRefusalTest, UnexpectedTensor) {
  entries_.push_back({"blk.0.attn_q.bias", "F32", {1}, std::string(4, '\0')});
  WriteTensors();
  ExpectRefused("unexpected tensor blk.0.attn_q.bias");
}

TEST_F(ReaderRefusalTest, NotAPermutation) {
  SafetensorsEntry* e = Entry("blk.1.silu_mul.perm");
  int32_t v = 5;
  std::memcpy(&e->bytes[0], &v, 4);
  std::memcpy(&e->bytes[4], &v, 4);
  WriteTensors();
  ExpectRefused("blk.1.silu_mul.perm is not a permutation");
}

TEST_F(ReaderRefusalTest, NonFiniteScale) {
  SafetensorsEntry* e = Entry("blk.0.ffn_up.outlier_scales");
  const float nan = NAN;
  std::memcpy(&e->bytes[8], &nan, 4);
  WriteTensors();
  ExpectRefused("blk.0.ffn_up.outlier_scales element 2");
}

TEST_F(ReaderRefusalTest, RowsDisagreeAcrossProjections) {
  // gate with 64 rows (consistently across layers) but silu_mul has 96 channels.
  for (int i = 0; i < 2; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".ffn_gate.";
    Entry(b + "qweight")->shape = {64, 16};
    Entry(b + "qweight")->bytes.resize(64 * 16);
    Entry(b + "scales")->shape = {64, 1};
    Entry(b + "scales")->bytes.resize(64 * 4);
    Entry(b + "qweight_outlier")->shape = {64, 32};
    Entry(b + "qweight_outlier")->bytes.resize(64 * 32);
    Entry(b + "outlier_scales")->shape = {64};
    Entry(b + "outlier_scales")->bytes.resize(64 * 4);
  }
  WriteTensors();
  ExpectRefused("blk.0.ffn_gate.qweight has 64 rows, expected 96");
}

}  // namespace
}  // namespace loom::quant
