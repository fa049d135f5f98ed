#include "models/sampling/stop_checker.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace loom {
namespace {

StopChecker Make(std::vector<std::string> stops, std::vector<int32_t> ids = {},
                 int max_tokens = 1000) {
  absl::StatusOr<StopChecker> checker = StopChecker::Create(std::move(stops), std::move(ids),
                                                            max_tokens);
  EXPECT_TRUE(checker.ok()) << checker.status();
  return *std::move(checker);
}

constexpr int32_t kTextToken = 100;  // any id that is not a stop id

TEST(StopCheckerTest, StopStringSpanningTokens) {
  StopChecker c = Make({"###"});
  StopChecker::Step s = c.Update(kTextToken, "Hello #");
  EXPECT_EQ(s.text, "Hello ");
  EXPECT_FALSE(s.finished);
  EXPECT_EQ(c.held_text(), "#");
  s = c.Update(kTextToken, "#");
  EXPECT_EQ(s.text, "");
  EXPECT_EQ(c.held_text(), "##");
  s = c.Update(kTextToken, "# world");
  EXPECT_EQ(s.text, "");
  EXPECT_TRUE(s.finished);
  EXPECT_EQ(s.reason, FinishReason::kStop);
  EXPECT_EQ(s.stop_string_index, 0);
  EXPECT_EQ(FinishReasonName(s.reason), "stop");
  EXPECT_EQ(c.Flush(), "");  // the stop string and what follows are dropped
}

TEST(StopCheckerTest, HeldPrefixIsReleasedWhenItStopsMatching) {
  StopChecker c = Make({"END"});
  EXPECT_EQ(c.Update(kTextToken, "The E").text, "The ");
  EXPECT_EQ(c.Update(kTextToken, "N").text, "");
  const StopChecker::Step s = c.Update(kTextToken, "ergy");
  EXPECT_EQ(s.text, "ENergy");
  EXPECT_FALSE(s.finished);
  EXPECT_EQ(c.held_text(), "");
}

TEST(StopCheckerTest, OverlappingStopStrings) {
  {
    StopChecker c = Make({"ab", "b"});
    EXPECT_EQ(c.Update(kTextToken, "xa").text, "x");
    const StopChecker::Step s = c.Update(kTextToken, "b");
    EXPECT_TRUE(s.finished);
    EXPECT_EQ(s.text, "");  // "ab" starts before "b": nothing of it is released
    EXPECT_EQ(s.stop_string_index, 0);
  }
  {
    StopChecker c = Make({"ab", "b"});
    const StopChecker::Step s = c.Update(kTextToken, "cbab");
    EXPECT_TRUE(s.finished);
    EXPECT_EQ(s.text, "c");  // earliest occurrence is the "b" at 1
    EXPECT_EQ(s.stop_string_index, 1);
  }
  {
    // "b" completes while "abc" is still a prefix: the stop fires at the first completion.
    StopChecker c = Make({"abc", "b"});
    EXPECT_EQ(c.Update(kTextToken, "a").text, "");
    const StopChecker::Step s = c.Update(kTextToken, "b");
    EXPECT_TRUE(s.finished);
    EXPECT_EQ(s.text, "a");
    EXPECT_EQ(s.stop_string_index, 1);
  }
  {
    StopChecker c = Make({"ab", "b"});
    EXPECT_EQ(c.Update(kTextToken, "a").text, "");
    EXPECT_EQ(c.Update(kTextToken, "c").text, "ac");
  }
}

TEST(StopCheckerTest, Utf8MultiByteText) {
  {
    StopChecker c = Make({"é!"});  // C3 A9 21
    EXPECT_EQ(c.Update(kTextToken, "café").text, "caf");
    EXPECT_EQ(c.held_text(), "é");
    EXPECT_EQ(c.Update(kTextToken, " ok").text, "é ok");
  }
  {
    StopChecker c = Make({"日本"});
    EXPECT_EQ(c.Update(kTextToken, "今日").text, "今");
    const StopChecker::Step s = c.Update(kTextToken, "本語");
    EXPECT_TRUE(s.finished);
    EXPECT_EQ(s.text, "");
  }
  {
    // Same lead byte E6 as 日 (E6 97 A5) but a different character: released whole.
    StopChecker c = Make({"日本"});
    EXPECT_EQ(c.Update(kTextToken, "本日は").text, "本日は");
  }
}

TEST(StopCheckerTest, MaxTokensFinishesWithLengthAndReleasesHeldText) {
  StopChecker c = Make({"xyz"}, {}, 3);
  EXPECT_FALSE(c.Update(kTextToken, "a").finished);
  EXPECT_FALSE(c.Update(kTextToken, "b").finished);
  const StopChecker::Step s = c.Update(kTextToken, "cx");
  EXPECT_TRUE(s.finished);
  EXPECT_EQ(s.reason, FinishReason::kLength);
  EXPECT_EQ(FinishReasonName(s.reason), "length");
  EXPECT_EQ(s.text, "cx");
  EXPECT_EQ(c.generated_tokens(), 3);
  // Finished: later calls change nothing.
  const StopChecker::Step after = c.Update(kTextToken, "more");
  EXPECT_TRUE(after.finished);
  EXPECT_EQ(after.reason, FinishReason::kLength);
  EXPECT_EQ(after.text, "");
  EXPECT_EQ(c.generated_tokens(), 3);
}

TEST(StopCheckerTest, StopStringOnLastTokenBeatsLength) {
  StopChecker c = Make({"!"}, {}, 2);
  c.Update(kTextToken, "hi");
  const StopChecker::Step s = c.Update(kTextToken, "!");
  EXPECT_EQ(s.reason, FinishReason::kStop);
  EXPECT_EQ(s.text, "");
}

TEST(StopCheckerTest, StopIdEndsWithoutItsTextAndReleasesHeld) {
  const int32_t kEos = 2;
  StopChecker c = Make({"##"}, {7, kEos}, 1);
  // max_tokens 1 but the stop id wins on the same token.
  StopChecker c2 = Make({"##"}, {7, kEos}, 5);
  EXPECT_EQ(c2.Update(kTextToken, "a#").text, "a");
  const StopChecker::Step s = c2.Update(kEos, "</s>");
  EXPECT_TRUE(s.finished);
  EXPECT_EQ(s.reason, FinishReason::kStop);
  EXPECT_EQ(s.stop_token, kEos);
  EXPECT_EQ(s.stop_string_index, -1);
  EXPECT_EQ(s.text, "#");
  const StopChecker::Step s1 = c.Update(kEos, "</s>");
  EXPECT_EQ(s1.reason, FinishReason::kStop);
  EXPECT_EQ(s1.text, "");
}

TEST(StopCheckerTest, FlushReleasesHeldText) {
  StopChecker c = Make({"<|end|>"});
  EXPECT_EQ(c.Update(kTextToken, "answer <|en").text, "answer ");
  EXPECT_EQ(c.Flush(), "<|en");
  EXPECT_EQ(c.Flush(), "");
  EXPECT_FALSE(c.finished());
}

TEST(StopCheckerTest, CreateValidates) {
  EXPECT_EQ(StopChecker::Create({"ok", ""}, {}, 10).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StopChecker::Create({"\xC3"}, {}, 10).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StopChecker::Create({"\xC0\xAF"}, {}, 10).status().code(),  // overlong '/'
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StopChecker::Create({}, {}, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(StopChecker::Create({"é", "日本", "😀"}, {}, 1).ok());
}

// Randomised check against a whole-text reference: after token j the checker has seen
// text[0:end_j]; it must stop at the first j whose prefix contains a stop string, releasing
// exactly the text before the earliest occurrence; before that, released + held == seen.
TEST(StopCheckerTest, MatchesWholeTextReference) {
  std::mt19937_64 rng(2024);
  auto random_string = [&rng](int min_len, int max_len) {
    std::string s(min_len + rng() % (max_len - min_len + 1), 'a');
    for (char& ch : s) ch = "abc"[rng() % 3];
    return s;
  };
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<std::string> stops;
    for (int i = 0, n = 1 + rng() % 3; i < n; ++i) stops.push_back(random_string(1, 4));
    const std::string text = random_string(0, 30);
    StopChecker c = Make(stops);
    std::string released;
    size_t end = 0;
    bool finished = false;
    while (end < text.size()) {
      const size_t len = 1 + rng() % 4;
      const std::string piece = text.substr(end, len);
      end += piece.size();
      const StopChecker::Step s = c.Update(kTextToken, piece);
      released += s.text;
      const std::string seen = text.substr(0, end);
      size_t first = std::string::npos;
      for (const std::string& stop : stops) first = std::min(first, seen.find(stop));
      if (first != std::string::npos) {
        ASSERT_TRUE(s.finished) << trial;
        EXPECT_EQ(released, seen.substr(0, first)) << trial;
        finished = true;
        break;
      }
      ASSERT_FALSE(s.finished) << trial;
      EXPECT_EQ(released + c.held_text(), seen) << trial;
      // Held text is exactly the longest suffix of `seen` that is a proper stop prefix.
      auto is_proper_prefix = [&stops](const std::string& x) {
        for (const std::string& stop : stops) {
          if (stop.size() > x.size() && stop.compare(0, x.size(), x) == 0) return true;
        }
        return false;
      };
      size_t longest = 0;
      for (size_t k = 1; k <= seen.size(); ++k) {
        if (is_proper_prefix(seen.substr(seen.size() - k))) longest = k;
      }
      EXPECT_EQ(c.held_text().size(), longest) << trial;
    }
    if (!finished) {
      EXPECT_EQ(released + c.Flush(), text) << trial;
    }
  }
}

}  // namespace
}  // namespace loom
