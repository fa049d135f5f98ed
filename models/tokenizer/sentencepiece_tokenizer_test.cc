// SentencePieceTokenizer against Debian's spm_encode on models trained by spm_train (see
// the spm_test_models genrule).
#include "models/tokenizer/sentencepiece_tokenizer.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "models/tokenizer/incremental_detokenizer.h"
#include "models/tokenizer/sentencepiece_shim.h"

namespace loom {
namespace {

std::string RunfilePath(const std::string& name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  return std::string(srcdir ? srcdir : ".") + "/" + (ws ? ws : "loom") +
         "/models/tokenizer/" + name;
}

std::vector<std::string> ReadLines(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class SentencePieceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    Vocabulary v;
    v.model = "llama";
    v.sentencepiece_model = ReadFile(RunfilePath("spm_" + GetParam() + ".model"));
    auto t = Tokenizer::Create(v);
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = std::move(*t);
  }
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_P(SentencePieceTest, IdsEqualSpmEncode) {
  const auto sentences = ReadLines(RunfilePath("testdata/spm_sentences.txt"));
  const auto id_lines = ReadLines(RunfilePath("spm_" + GetParam() + ".ids"));
  ASSERT_EQ(sentences.size(), id_lines.size());
  ASSERT_GE(sentences.size(), 5u);
  for (size_t i = 0; i < sentences.size(); ++i) {
    std::vector<int32_t> want;
    std::istringstream ss(id_lines[i]);
    for (int32_t id; ss >> id;) want.push_back(id);
    auto got = tokenizer_->Encode(sentences[i], /*add_bos=*/false);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, want) << sentences[i];
  }
}

TEST_P(SentencePieceTest, DecodeRoundTripsAndStreamsTheSameText) {
  for (const std::string& s : ReadLines(RunfilePath("testdata/spm_sentences.txt"))) {
    auto ids = tokenizer_->Encode(s, false);
    ASSERT_TRUE(ids.ok());
    auto text = tokenizer_->Decode(*ids);
    ASSERT_TRUE(text.ok());
    // SentencePiece's normalizer collapses runs of spaces and trims the ends.
    std::string normalized;
    for (char c : s) {
      if (c == ' ' && (normalized.empty() || normalized.back() == ' ')) continue;
      normalized.push_back(c);
    }
    while (!normalized.empty() && normalized.back() == ' ') normalized.pop_back();
    EXPECT_EQ(*text, normalized);
    IncrementalDetokenizer d(*tokenizer_);
    std::string streamed;
    for (int32_t id : *ids) streamed += *d.Push(id);
    streamed += d.Flush();
    EXPECT_EQ(streamed, *text);
  }
}

TEST_P(SentencePieceTest, ControlSymbolTextIsPlainInUserText) {
  const std::optional<int32_t> ctrl = tokenizer_->SpecialTokenId("<ctrl>");
  ASSERT_TRUE(ctrl.has_value());
  EXPECT_TRUE(tokenizer_->IsControl(*ctrl));
  auto user = tokenizer_->Encode("<ctrl>", false);
  ASSERT_TRUE(user.ok());
  for (int32_t id : *user) EXPECT_NE(id, *ctrl);
  auto special = tokenizer_->EncodeWithSpecial("<ctrl>", false);
  ASSERT_TRUE(special.ok());
  EXPECT_EQ(*special, std::vector<int32_t>{*ctrl});
  // spm_train defaults: <unk>=0, <s>=1, </s>=2.
  EXPECT_EQ(tokenizer_->bos_id(), 1);
  EXPECT_EQ(tokenizer_->eos_id(), 2);
  EXPECT_EQ((*tokenizer_->Encode("x", true))[0], 1);
  EXPECT_TRUE(tokenizer_->adds_dummy_prefix());
}

INSTANTIATE_TEST_SUITE_P(Models, SentencePieceTest, ::testing::Values("unigram", "bpe"));

// A GGUF-style vocabulary (pieces, scores, types; no ModelProto) of the spm_train BPE
// model must tokenize like that model wherever its nmt_nfkc normalizer is the identity
// (no runs of spaces, no NFKC-affected characters).
TEST(SentencePieceFromPiecesTest, MatchesSpmEncodeWithoutTheProto) {
  std::string error;
  auto sp = spm::Processor::Load(ReadFile(RunfilePath("spm_bpe.model")), &error);
  ASSERT_NE(sp, nullptr) << error;
  Vocabulary v;
  v.model = "llama";
  for (int id = 0; id < sp->size(); ++id) {
    v.tokens.push_back(sp->Piece(id));
    v.scores.push_back(sp->Score(id));
    TokenType t = TokenType::kNormal;
    switch (sp->Kind(id)) {
      case spm::PieceKind::kControl: t = TokenType::kControl; break;
      case spm::PieceKind::kUnknown: t = TokenType::kUnknown; break;
      case spm::PieceKind::kUnused: t = TokenType::kUnused; break;
      case spm::PieceKind::kByte: t = TokenType::kByte; break;
      case spm::PieceKind::kNormal: break;
    }
    v.token_types.push_back(t);
  }
  v.bos_id = sp->bos_id();
  v.eos_id = sp->eos_id();
  auto t = Tokenizer::Create(v);
  ASSERT_TRUE(t.ok()) << t.status();
  const auto sentences = ReadLines(RunfilePath("testdata/spm_sentences.txt"));
  const auto id_lines = ReadLines(RunfilePath("spm_bpe.ids"));
  int compared = 0;
  for (size_t i = 0; i < sentences.size(); ++i) {
    if (sentences[i].find("  ") != std::string::npos || sentences[i].front() == ' ') continue;
    std::vector<int32_t> want;
    std::istringstream ss(id_lines[i]);
    for (int32_t id; ss >> id;) want.push_back(id);
    EXPECT_EQ(*(*t)->Encode(sentences[i], false), want) << sentences[i];
    ++compared;
  }
  EXPECT_GE(compared, 5);
  // No whitespace collapsing with the identity normalizer.
  EXPECT_EQ(*(*t)->Decode(*(*t)->Encode("a  b", false)), "a  b");
}

TEST(SentencePieceErrorsTest, MissingOrCorruptModel) {
  Vocabulary v;
  v.model = "llama";
  EXPECT_EQ(Tokenizer::Create(v).status().code(), absl::StatusCode::kFailedPrecondition);
  v.sentencepiece_model = "not a protobuf";
  EXPECT_EQ(Tokenizer::Create(v).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace loom
