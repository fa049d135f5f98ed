#include "models/tokenizer/pre_tokenizer.h"

#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace loom {
namespace {

using ::testing::ElementsAre;

std::vector<std::string> Split(const PreTokenizer& pt, const std::string& text) {
  std::vector<std::string_view> pieces;
  absl::Status s = pt.Split(text, &pieces);
  EXPECT_TRUE(s.ok()) << s;
  return std::vector<std::string>(pieces.begin(), pieces.end());
}

// Expected splits follow from the GPT-2 regex alternatives, tried in order at each
// position: contractions, ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+', '\s+(?!\S)', '\s+'.
TEST(PreTokenizerTest, Gpt2Words) {
  auto pt = PreTokenizer::Create("gpt2");
  ASSERT_TRUE(pt.ok()) << pt.status();
  EXPECT_THAT(Split(**pt, "Hello world"), ElementsAre("Hello", " world"));
  EXPECT_THAT(Split(**pt, "I'm they'll"), ElementsAre("I", "'m", " they", "'ll"));
  // Contractions are case-sensitive in the GPT-2 regex: "'M" is punctuation then a letter.
  EXPECT_THAT(Split(**pt, "I'M"), ElementsAre("I", "'", "M"));
  EXPECT_THAT(Split(**pt, "abc123 def"), ElementsAre("abc", "123", " def"));
  EXPECT_THAT(Split(**pt, "x+=1;"), ElementsAre("x", "+=", "1", ";"));
  EXPECT_THAT(Split(**pt, "caf\u00e9 na\u00efve"), ElementsAre("caf\u00e9", " na\u00efve"));
}

TEST(PreTokenizerTest, Gpt2Whitespace) {
  auto pt = PreTokenizer::Create("gpt2");
  ASSERT_TRUE(pt.ok()) << pt.status();
  // '\s+(?!\S)' leaves the last space of a run to attach to the next word.
  EXPECT_THAT(Split(**pt, "a   b"), ElementsAre("a", "  ", " b"));
  // A newline cannot be the optional leading ' ', so it stands alone.
  EXPECT_THAT(Split(**pt, "a\n\nb"), ElementsAre("a", "\n", "\n", "b"));
  // Trailing whitespace is one piece.
  EXPECT_THAT(Split(**pt, "x  \t"), ElementsAre("x", "  \t"));
  // U+3000 (ideographic space) and U+00A0 are whitespace; U+200B is not.
  EXPECT_THAT(Split(**pt, "a\u3000\u3000b"), ElementsAre("a", "\u3000", "\u3000", "b"));
  EXPECT_THAT(Split(**pt, "a\u200bb"), ElementsAre("a", "\u200b", "b"));
}

TEST(PreTokenizerTest, SmollmSplitsEveryDigit) {
  auto pt = PreTokenizer::Create("smollm");
  ASSERT_TRUE(pt.ok()) << pt.status();
  EXPECT_THAT(Split(**pt, "abc123 def"), ElementsAre("abc", "1", "2", "3", " def"));
  // The digit split happens first, so the space before a digit cannot join it.
  EXPECT_THAT(Split(**pt, "x 12"), ElementsAre("x", " ", "1", "2"));
  EXPECT_THAT(Split(**pt, "3.14"), ElementsAre("3", ".", "1", "4"));
  // Non-ASCII numbers (\p{N}): superscript two, Arabic-Indic digits.
  EXPECT_THAT(Split(**pt, "x\u00b2\u0663\u0664"), ElementsAre("x", "\u00b2", "\u0663", "\u0664"));
}

TEST(PreTokenizerTest, PiecesConcatenateToInput) {
  auto pt = PreTokenizer::Create("smollm");
  ASSERT_TRUE(pt.ok()) << pt.status();
  const std::vector<std::string> alphabet = {"a", "Z", " ", "  ", "\n", "\t", "7", "'s",
                                             "'", ".", "\u00e9", "\u4f60", "\U0001F600",
                                             "\u3000", "\u0663"};
  std::mt19937 rng(42);
  for (int iter = 0; iter < 500; ++iter) {
    std::string text;
    const int n = rng() % 20;
    for (int i = 0; i < n; ++i) text += alphabet[rng() % alphabet.size()];
    std::string joined;
    for (const std::string& p : Split(**pt, text)) {
      EXPECT_FALSE(p.empty());
      joined += p;
    }
    EXPECT_EQ(joined, text);
  }
}

TEST(PreTokenizerTest, RejectsInvalidUtf8AndUnknownNames) {
  auto pt = PreTokenizer::Create("gpt2");
  ASSERT_TRUE(pt.ok()) << pt.status();
  std::vector<std::string_view> pieces;
  EXPECT_EQ(pt.value()->Split("a\xff", &pieces).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PreTokenizer::Create("qwen2").status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(PreTokenizer::FromPatterns({"("}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace loom
