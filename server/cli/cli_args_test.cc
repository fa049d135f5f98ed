#include "server/cli/cli_args.h"

#include "gtest/gtest.h"

namespace loom::cli {
namespace {

FlagSpec Spec() { return FlagSpec{{"max_tokens", "model", "top_p"}, {"chat"}}; }

TEST(CliArgsTest, DashAndUnderscoreFormsAndPositionals) {
  auto a = CliArgs::Parse({"--max-tokens", "12", "--chat", "--top_p=0.5", "hello world"},
                          Spec());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a->GetInt("max_tokens", 0), 12);
  EXPECT_TRUE(a->Has("chat"));
  EXPECT_DOUBLE_EQ(*a->GetDouble("top_p", 1), 0.5);
  ASSERT_EQ(a->positionals().size(), 1u);
  EXPECT_EQ(a->positionals()[0], "hello world");
  EXPECT_EQ(a->GetString("model", "def"), "def");
}

TEST(CliArgsTest, Errors) {
  EXPECT_FALSE(CliArgs::Parse({"--nope"}, Spec()).ok());
  EXPECT_FALSE(CliArgs::Parse({"--model"}, Spec()).ok());
  EXPECT_FALSE(CliArgs::Parse({"--chat=maybe"}, Spec()).ok());
  auto a = CliArgs::Parse({"--max-tokens", "x"}, Spec());
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->GetInt("max_tokens", 0).ok());
}

TEST(CliArgsTest, DoubleDashEndsFlags) {
  auto a = CliArgs::Parse({"--", "--chat"}, Spec());
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->Has("chat"));
  EXPECT_EQ(a->positionals()[0], "--chat");
}

}  // namespace
}  // namespace loom::cli
