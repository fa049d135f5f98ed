#include "models/tokenizer/byte_level_bpe.h"

#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/tokenizer/pre_tokenizer.h"
#include "models/tokenizer/test_vocab.h"
#include "models/tokenizer/utf8.h"

namespace loom {
namespace {

using ::testing::ElementsAre;
using testing::ByteLevelEncode;
using testing::ByteLevelVocab;

constexpr int32_t kControls = 3;  // <|im_start|>, <|im_end|>, <|endoftext|>
int32_t ByteId(char c) { return kControls + static_cast<uint8_t>(c); }

std::unique_ptr<Tokenizer> Make(const Vocabulary& v) {
  auto t = Tokenizer::Create(v);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

std::vector<int32_t> Enc(const Tokenizer& t, const std::string& s) {
  auto ids = t.Encode(s, false);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

TEST(ByteToUnicodeTest, IsTheGpt2Bijection) {
  std::set<std::string> seen;
  for (int b = 0; b < 256; ++b) {
    const std::string& u = ByteToUnicode(static_cast<uint8_t>(b));
    EXPECT_TRUE(utf8::IsValid(u));
    seen.insert(u);
    EXPECT_EQ(ByteLevelDecode(u), std::string(1, static_cast<char>(b)));
  }
  EXPECT_EQ(seen.size(), 256u);
  EXPECT_EQ(ByteToUnicode('A'), "A");
  EXPECT_EQ(ByteToUnicode(' '), "\u0120");   // "Ġ": 256 + 32
  EXPECT_EQ(ByteToUnicode('\n'), "\u010A");  // "Ċ": 256 + 10
  EXPECT_EQ(ByteToUnicode(0xAD), "\u0143");  // soft hyphen is not printable: 256 + 67
}

const std::vector<std::string> kControlTexts = {"<|im_start|>", "<|im_end|>", "<|endoftext|>"};

TEST(ByteLevelBpeTest, LowerRankMergesFirst) {
  // "b c" outranks "a b", so "abc" -> a + bc although "ab" comes first in the text.
  Vocabulary v = ByteLevelVocab(kControlTexts, {{"b", "c"}, {"a", "b"}});
  auto t = Make(v);
  const int32_t bc = kControls + 256, ab = kControls + 257;
  EXPECT_THAT(Enc(*t, "abc"), ElementsAre(ByteId('a'), bc));
  EXPECT_THAT(Enc(*t, "abd"), ElementsAre(ab, ByteId('d')));
}

TEST(ByteLevelBpeTest, EqualRankMergesLeftmostFirst) {
  Vocabulary v = ByteLevelVocab(kControlTexts, {{"a", "a"}, {"aa", "aa"}});
  auto t = Make(v);
  const int32_t aa = kControls + 256, aaaa = kControls + 257;
  EXPECT_THAT(Enc(*t, "aaa"), ElementsAre(aa, ByteId('a')));
  EXPECT_THAT(Enc(*t, "aaaaa"), ElementsAre(aaaa, ByteId('a')));
  // A long word stays linear-ish (priority queue) and exact: 100000 = 25000 * 4.
  const std::vector<int32_t> many = Enc(*t, std::string(100000, 'a'));
  ASSERT_EQ(many.size(), 25000u);
  for (int32_t id : many) ASSERT_EQ(id, aaaa);
}

// Reference BPE: repeatedly merge the lowest-rank adjacent pair (leftmost on ties) by
// scanning the whole word, as in the original GPT-2 algorithm.
std::vector<std::string> NaiveBpe(const std::string& piece,
                                  const std::map<std::pair<std::string, std::string>, int>& ranks) {
  std::vector<std::string> syms;
  for (char c : piece) syms.push_back(ByteToUnicode(static_cast<uint8_t>(c)));
  while (true) {
    int best = -1, best_rank = 0;
    for (size_t i = 0; i + 1 < syms.size(); ++i) {
      auto it = ranks.find({syms[i], syms[i + 1]});
      if (it != ranks.end() && (best < 0 || it->second < best_rank)) {
        best = static_cast<int>(i);
        best_rank = it->second;
      }
    }
    if (best < 0) return syms;
    syms[best] += syms[best + 1];
    syms.erase(syms.begin() + best + 1);
  }
}

TEST(ByteLevelBpeTest, MatchesNaiveReferenceOnRandomText) {
  const std::vector<std::pair<std::string, std::string>> merges = {
      {" ", "t"}, {"h", "e"}, {" t", "he"}, {"a", "b"}, {"b", "a"}, {"ab", "ab"},
      {"a", "a"}, {"b", "b"}, {"ba", "b"}, {" ", "a"}, {" a", "b"}, {"1", "2"},
      {"\xC3", "\xA9"}, {"\xE4\xBD", "\xA0"}, {"\xE4", "\xBD"}, {"e", "\xC3\xA9"}};
  Vocabulary v = ByteLevelVocab(kControlTexts, merges, "smollm");
  auto t = Make(v);
  std::map<std::pair<std::string, std::string>, int> ranks;
  std::map<std::string, int32_t> token_id;
  for (size_t i = 0; i < merges.size(); ++i) {
    ranks.emplace(std::make_pair(ByteLevelEncode(merges[i].first),
                                 ByteLevelEncode(merges[i].second)),
                  static_cast<int>(i));
  }
  for (size_t id = 0; id < v.tokens.size(); ++id) token_id[v.tokens[id]] = id;
  auto pre = PreTokenizer::Create("smollm");
  ASSERT_TRUE(pre.ok());
  const std::vector<std::string> alphabet = {"a", "b", "t", "h", "e", " ", "1", "2",
                                             "\u00e9", "\u4f60", "\n", ".", "'s"};
  std::mt19937 rng(7);
  for (int iter = 0; iter < 400; ++iter) {
    std::string text;
    const int n = rng() % 30;
    for (int i = 0; i < n; ++i) text += alphabet[rng() % alphabet.size()];
    std::vector<std::string_view> pieces;
    ASSERT_TRUE((*pre)->Split(text, &pieces).ok());
    std::vector<int32_t> want;
    for (std::string_view p : pieces) {
      for (const std::string& s : NaiveBpe(std::string(p), ranks)) want.push_back(token_id.at(s));
    }
    EXPECT_EQ(Enc(*t, text), want) << text;
    EXPECT_EQ(*t->Decode(want), text);
  }
}

TEST(ByteLevelBpeTest, HugeWhitespaceRunsDoNotExhaustTheRegexEngine) {
  auto t = Make(ByteLevelVocab(kControlTexts, {}, "smollm"));
  const size_t n = 1 << 20;
  for (const std::string& ws : {std::string(" "), std::string("\n"), std::string("\u3000")}) {
    std::string text;
    for (size_t i = 0; i < n / ws.size(); ++i) text += ws;
    text += "x";
    auto ids = t->Encode(text, false);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(ids->size(), text.size());  // no merges: one byte token per byte
  }
}

TEST(ByteLevelBpeTest, ControlTokenTextInUserTextIsPlainText) {
  Vocabulary v = ByteLevelVocab(kControlTexts, {});
  auto t = Make(v);
  const std::string text = "<|im_start|>x";
  std::vector<int32_t> bytes;
  for (char c : text) bytes.push_back(ByteId(c));
  EXPECT_EQ(Enc(*t, text), bytes);
  auto special = t->EncodeWithSpecial(text, false);
  ASSERT_TRUE(special.ok());
  EXPECT_THAT(*special, ElementsAre(0, ByteId('x')));
  auto both = t->EncodeWithSpecial("<|im_end|><|endoftext|>", true);
  ASSERT_TRUE(both.ok());
  EXPECT_THAT(*both, ElementsAre(0, 1, 2));
}

TEST(ByteLevelBpeTest, UserDefinedTokensAreSplitOutLikeLlamaCpp) {
  Vocabulary v = ByteLevelVocab(kControlTexts, {});
  v.tokens.push_back("<think>");
  v.token_types.push_back(TokenType::kUserDefined);
  const int32_t think = static_cast<int32_t>(v.tokens.size()) - 1;
  auto t = Make(v);
  EXPECT_THAT(Enc(*t, "a<think>b"), ElementsAre(ByteId('a'), think, ByteId('b')));
  EXPECT_EQ(*t->Decode({think}), "<think>");
}

TEST(ByteLevelBpeTest, BosEosAndEndOfGeneration) {
  auto t = Make(ByteLevelVocab(kControlTexts, {}));
  EXPECT_EQ(t->bos_id(), 0);
  EXPECT_EQ(t->eos_id(), 1);
  EXPECT_THAT(*t->Encode("a", true), ElementsAre(0, ByteId('a')));
  EXPECT_THAT(t->end_of_generation_ids(), ElementsAre(1, 2));
  EXPECT_TRUE(t->IsEndOfGeneration(2));
  EXPECT_FALSE(t->IsEndOfGeneration(0));
  EXPECT_EQ(t->SpecialTokenId("<|im_end|>"), 1);
  EXPECT_FALSE(t->SpecialTokenId("a").has_value());

  auto no_bos = Make(ByteLevelVocab({}, {}));
  EXPECT_EQ(no_bos->Encode("a", true).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ByteLevelBpeTest, InvalidUtf8IsTokenizedAsReplacementCharacter) {
  auto t = Make(ByteLevelVocab(kControlTexts, {}));
  EXPECT_EQ(Enc(*t, "a\xFF" "b"), Enc(*t, "a\uFFFD" "b"));
  EXPECT_EQ(Enc(*t, "\xE4\xBD"), Enc(*t, "\uFFFD"));
  std::mt19937 rng(3);
  for (int iter = 0; iter < 300; ++iter) {
    std::string junk(rng() % 40, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    auto ids = t->Encode(junk, false);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*t->Decode(*ids), utf8::Sanitize(junk));
  }
}

TEST(ByteLevelBpeTest, DecodeAndTokenBytes) {
  auto t = Make(ByteLevelVocab(kControlTexts, {{"\xC3", "\xA9"}}));
  const int32_t e_acute = kControls + 256;
  EXPECT_EQ(*t->TokenBytes(e_acute), "\u00e9");
  EXPECT_EQ(*t->TokenBytes(ByteId(' ')), " ");
  EXPECT_EQ(*t->TokenText(ByteId(' ')), "\u0120");
  EXPECT_EQ(*t->TokenBytes(0), "<|im_start|>");
  EXPECT_EQ(*t->Decode({0, ByteId('h'), ByteId('i'), 1}), "hi");
  EXPECT_EQ(*t->Decode({0, ByteId('h'), 1}, /*render_control=*/true), "<|im_start|>h<|im_end|>");
  // A lone lead byte decodes to U+FFFD rather than broken UTF-8.
  EXPECT_EQ(*t->Decode({ByteId('\xC3')}), "\uFFFD");
  EXPECT_EQ(t->TokenBytes(t->vocab_size()).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t->Decode({-1}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ByteLevelBpeTest, RejectsUnsupportedVocabularies) {
  Vocabulary v = ByteLevelVocab(kControlTexts, {});
  v.pre = "deepseek-llm";
  EXPECT_EQ(Tokenizer::Create(v).status().code(), absl::StatusCode::kUnimplemented);
  v = ByteLevelVocab(kControlTexts, {});
  v.model = "wordpiece";
  EXPECT_EQ(Tokenizer::Create(v).status().code(), absl::StatusCode::kUnimplemented);
  v = ByteLevelVocab(kControlTexts, {});
  v.merges.push_back("nospace");
  EXPECT_EQ(Tokenizer::Create(v).status().code(), absl::StatusCode::kInvalidArgument);
  v = ByteLevelVocab(kControlTexts, {});
  v.token_types.pop_back();
  EXPECT_EQ(Tokenizer::Create(v).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ByteLevelBpeTest, ConcurrentEncodeIsConsistent) {
  auto t = Make(ByteLevelVocab(kControlTexts, {{"a", "b"}, {"ab", "c"}, {" ", "ab"}}));
  const std::string text = "abc ab abcabc abab c a b ";
  std::vector<std::vector<int32_t>> want;
  for (int k = 0; k < 7; ++k) want.push_back(Enc(*t, text + std::string(k, 'a')));
  std::vector<std::thread> threads;
  std::vector<bool> ok(4, true);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 200; ++k) {
        auto ids = t->Encode(text + std::string(k % 7, 'a'), false);
        if (!ids.ok() || *ids != want[k % 7]) ok[i] = false;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (bool b : ok) EXPECT_TRUE(b);
}

}  // namespace
}  // namespace loom
