// A Llama-2 style HF directory (tokenizer.model) read through ModelSource::Open, and the
// same vocabulary surviving an export.
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/weights/hf_exporter.h"
#include "models/weights/hf_tokenizer.h"
#include "models/weights/model_source.h"
#include "models/weights/safetensors_writer.h"
#include "models/weights/sentencepiece_pieces.h"
#include "models/weights/sentencepiece_train_for_test.h"
#include "models/weights/tiny_llama_gguf.h"
#include "nlohmann/json.hpp"

namespace loom {
namespace {

std::string Tmp(const std::string& name) {
  const char* d = std::getenv("TEST_TMPDIR");
  return absl::StrCat(d ? d : "/tmp", "/", name);
}

std::string TrainedModel() {
  const std::string text = Tmp("corpus.txt");
  std::ofstream f(text);
  for (int k = 0; k < 200; ++k) {
    f << "the quick brown fox jumps over the lazy dog " << k << "\n"
      << "a tiny llama reads its weights from a safetensors file\n";
  }
  f.close();
  std::string error;
  const std::string model = TrainSentencePieceForTest(text, 400, &error);
  EXPECT_FALSE(model.empty()) << error;
  return model;
}

TEST(HfSentencePiece, TokenizerModelGivesALlamaVocabulary) {
  const std::string model = TrainedModel();
  ASSERT_FALSE(model.empty());
  SentencePiecePieces pieces;
  std::string error;
  ASSERT_TRUE(ReadSentencePiecePieces(model, &pieces, &error)) << error;
  const int n = static_cast<int>(pieces.pieces.size());
  ASSERT_EQ(n, 400);

  const std::string dir = Tmp("hf_spm");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  TinyLlamaOptions o;
  o.vocab = 416;  // more embeddings than pieces: the vocabulary is padded
  std::vector<SafetensorsEntry> entries;
  for (const auto& [gguf, hf, shape] :
       std::vector<std::tuple<std::string, std::string, std::vector<int64_t>>>{
           {"token_embd.weight", "model.embed_tokens.weight", {416, 64}},
           {"output_norm.weight", "model.norm.weight", {64}}}) {
    entries.push_back({hf, "BF16", shape, TinyTensorBytes(gguf, DType::kBF16, shape, 1)});
  }
  for (int l = 0; l < 2; ++l) {
    const std::string p = absl::StrCat("model.layers.", l, ".");
    const std::vector<std::pair<std::string, std::vector<int64_t>>> layer = {
        {"input_layernorm.weight", {64}}, {"self_attn.q_proj.weight", {64, 64}},
        {"self_attn.k_proj.weight", {32, 64}}, {"self_attn.v_proj.weight", {32, 64}},
        {"self_attn.o_proj.weight", {64, 64}}, {"post_attention_layernorm.weight", {64}},
        {"mlp.gate_proj.weight", {96, 64}}, {"mlp.up_proj.weight", {96, 64}},
        {"mlp.down_proj.weight", {64, 96}}};
    for (const auto& [name, shape] : layer) {
      entries.push_back({p + name, "F16", shape, TinyTensorBytes(p + name, DType::kF16, shape, 1)});
    }
  }
  ASSERT_TRUE(WriteSafetensors(dir + "/model.safetensors", entries, {}).ok());
  nlohmann::json config = {{"architectures", {"LlamaForCausalLM"}}, {"hidden_size", 64},
                           {"intermediate_size", 96}, {"num_hidden_layers", 2},
                           {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                           {"rms_norm_eps", 1e-6}, {"vocab_size", 416},
                           {"tie_word_embeddings", true}};
  ASSERT_TRUE(WriteStringToFile(dir + "/config.json", config.dump()).ok());
  ASSERT_TRUE(WriteStringToFile(dir + "/tokenizer.model", model).ok());

  auto src = ModelSource::Open(dir);
  ASSERT_TRUE(src.ok()) << src.status();
  const Vocabulary& v = (*src)->vocabulary();
  EXPECT_EQ(v.model, "llama");
  EXPECT_EQ(v.sentencepiece_model, model);
  ASSERT_EQ(v.tokens.size(), 416u);
  for (int id = 0; id < n; ++id) ASSERT_EQ(v.tokens[id], pieces.pieces[id]) << id;
  EXPECT_EQ(v.tokens[400], "[PAD400]");
  EXPECT_EQ(v.scores.size(), 416u);
  EXPECT_EQ(v.unk_id, 0);  // SentencePiece's defaults: <unk> 0, <s> 1, </s> 2
  EXPECT_EQ(v.bos_id, 1);
  EXPECT_EQ(v.eos_id, 2);
  EXPECT_EQ(v.token_types[0], TokenType::kUnknown);
  EXPECT_EQ(v.token_types[1], TokenType::kControl);
  EXPECT_EQ(v.token_types[3], TokenType::kByte);  // byte fallback pieces <0x00>...
  EXPECT_EQ(v.tokens[3], "<0x00>");
  EXPECT_TRUE(v.add_bos);
  EXPECT_EQ((*src)->tensors().at("token_embd.weight").dtype, DType::kBF16);
  EXPECT_EQ((*src)->tensors().at("blk.1.attn_k.weight").dtype, DType::kF16);
  EXPECT_FLOAT_EQ((*src)->config().rms_eps, 1e-6f);

  // tokenizer_config.json overrides add_bos.
  ASSERT_TRUE(WriteStringToFile(dir + "/tokenizer_config.json", "{\"add_bos_token\": false}").ok());
  auto src2 = ModelSource::Open(dir);
  ASSERT_TRUE(src2.ok()) << src2.status();
  EXPECT_FALSE((*src2)->vocabulary().add_bos);

  // Export keeps the SentencePiece bytes (tokenizer.model) and the weights.
  const std::string out = Tmp("hf_spm_export");
  ASSERT_TRUE(ExportHfDirectory(**src2, out, DType::kF32, 1).ok());
  auto back = ModelSource::Open(out);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)->vocabulary().sentencepiece_model, model);
  EXPECT_EQ((*back)->vocabulary().tokens, v.tokens);

  // A corrupt tokenizer.model is a clear error.
  ASSERT_TRUE(WriteStringToFile(dir + "/tokenizer.model", "not a proto at all").ok());
  auto bad = ModelSource::Open(dir);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("tokenizer.model"));
}

}  // namespace
}  // namespace loom
