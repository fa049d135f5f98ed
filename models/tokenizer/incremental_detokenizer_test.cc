#include "models/tokenizer/incremental_detokenizer.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "models/tokenizer/test_vocab.h"
#include "models/tokenizer/utf8.h"

namespace loom {
namespace {

constexpr int32_t kControls = 2;
int32_t ByteId(char c) { return kControls + static_cast<uint8_t>(c); }

class IncrementalDetokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = Tokenizer::Create(testing::ByteLevelVocab({"<s>", "</s>"}, {}));
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = std::move(*t);
  }
  // Pushes each id; returns the per-push outputs.
  std::vector<std::string> Stream(IncrementalDetokenizer& d, const std::string& bytes) {
    std::vector<std::string> out;
    for (char c : bytes) {
      auto piece = d.Push(ByteId(c));
      EXPECT_TRUE(piece.ok());
      out.push_back(*piece);
    }
    return out;
  }
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(IncrementalDetokenizerTest, HoldsSplitEmojiUntilComplete) {
  IncrementalDetokenizer d(*tokenizer_);
  // U+1F600 is F0 9F 98 80: nothing until the fourth byte.
  const auto out = Stream(d, "a\xF0\x9F\x98\x80" "b");
  ASSERT_EQ(out.size(), 6u);
  EXPECT_EQ(out[0], "a");
  EXPECT_EQ(out[1], "");
  EXPECT_EQ(out[2], "");
  EXPECT_EQ(out[3], "");
  EXPECT_EQ(out[4], "\U0001F600");
  EXPECT_EQ(out[5], "b");
  EXPECT_EQ(d.Flush(), "");
}

TEST_F(IncrementalDetokenizerTest, CjkSplitMidCharacter) {
  IncrementalDetokenizer d(*tokenizer_);
  const auto head = Stream(d, "\xE4\xBD");  // first two bytes of 你
  EXPECT_EQ(head[0] + head[1], "");
  EXPECT_EQ(d.pending_bytes(), 2u);
  const auto tail = Stream(d, "\xA0\xE5\xA5\xBD");  // rest of 你, then 好
  EXPECT_EQ(tail[0], "\u4f60");
  EXPECT_EQ(tail[1] + tail[2], "");
  EXPECT_EQ(tail[3], "\u597d");
  EXPECT_EQ(d.pending_bytes(), 0u);
}

TEST_F(IncrementalDetokenizerTest, InvalidSequencesBecomeReplacementCharacters) {
  IncrementalDetokenizer d(*tokenizer_);
  // A lead byte interrupted by ASCII: U+FFFD then the ASCII, as soon as it is known.
  auto out = Stream(d, "\xE4\xBD" "x");
  EXPECT_EQ(out[2], "\uFFFDx");
  out = Stream(d, "\xFF");
  EXPECT_EQ(out[0], "\uFFFD");
  // A truncated character at the end of the stream is flushed as U+FFFD.
  out = Stream(d, "\xF0\x9F");
  EXPECT_EQ(out[0] + out[1], "");
  EXPECT_EQ(d.Flush(), "\uFFFD");
  EXPECT_EQ(d.pending_bytes(), 0u);
}

TEST_F(IncrementalDetokenizerTest, ControlTokensAreSilentByDefault) {
  IncrementalDetokenizer quiet(*tokenizer_);
  EXPECT_EQ(*quiet.Push(1), "");
  IncrementalDetokenizer loud(*tokenizer_, {/*render_control=*/true});
  EXPECT_EQ(*loud.Push(1), "</s>");
  EXPECT_EQ(quiet.Push(-5).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(IncrementalDetokenizerTest, StreamEqualsDecodeOnRandomBytes) {
  std::mt19937 rng(11);
  const std::vector<std::string> alphabet = {"a", "\xC3\xA9", "\xE4\xBD\xA0", "\xF0\x9F\x98\x80",
                                             "\xFF", "\x80", "\xE4", "\xF0\x9F"};
  for (int iter = 0; iter < 300; ++iter) {
    std::string bytes;
    for (int i = rng() % 12; i > 0; --i) bytes += alphabet[rng() % alphabet.size()];
    std::vector<int32_t> ids;
    for (char c : bytes) ids.push_back(ByteId(c));
    IncrementalDetokenizer d(*tokenizer_);
    std::string streamed;
    for (int32_t id : ids) {
      auto piece = d.Push(id);
      ASSERT_TRUE(piece.ok());
      EXPECT_TRUE(utf8::IsValid(*piece));
      streamed += *piece;
    }
    streamed += d.Flush();
    EXPECT_EQ(streamed, *tokenizer_->Decode(ids));
    EXPECT_EQ(streamed, utf8::Sanitize(bytes));
  }
}

}  // namespace
}  // namespace loom
