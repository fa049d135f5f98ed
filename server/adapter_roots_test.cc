#include "server/adapter_roots.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

class AdapterRootsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::path(std::getenv("TEST_TMPDIR")) /
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(base_);
    fs::create_directories(base_ / "root1" / "peft_a");
    fs::create_directories(base_ / "root2");
    fs::create_directories(base_ / "outside" / "evil");
    std::ofstream(base_ / "root2" / "g.gguf") << "x";
    std::ofstream(base_ / "outside" / "evil.gguf") << "x";
    // Symlinks: one escaping the roots, one staying inside.
    fs::create_directory_symlink(base_ / "outside" / "evil", base_ / "root1" / "escape");
    fs::create_directory_symlink(base_ / "root1" / "peft_a", base_ / "root2" / "inside");
    auto r = AdapterRoots::Create({(base_ / "root1").string(), (base_ / "root2").string()});
    ASSERT_TRUE(r.ok()) << r.status();
    roots_ = std::make_unique<AdapterRoots>(*std::move(r));
  }
  std::string P(const std::string& rel) { return fs::canonical(base_ / rel).string(); }

  fs::path base_;
  std::unique_ptr<AdapterRoots> roots_;
};

TEST_F(AdapterRootsTest, ALongRequestedPathIsEchoedBoundedAndEscaped) {
  const std::string source = "/" + std::string(60000, 'p') + "\n";
  const absl::Status s = roots_->Resolve(source).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_LT(s.message().size(), 1000u) << s.message().size();
  EXPECT_EQ(s.message().find('\n'), std::string::npos);
  const absl::Status id = ValidateAdapterId(std::string(5000, '\x01'));
  EXPECT_EQ(id.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(id.message().size(), 1000u);
}

TEST_F(AdapterRootsTest, AnEscapingSymlinkIsRefusedWithoutSayingWhereItLeads) {
  const absl::Status s = roots_->FindById("escape").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(std::string(s.message()).find((base_ / "outside").string()), std::string::npos)
      << s.message();
}

TEST_F(AdapterRootsTest, RelativePathsResolveUnderTheFirstRootThatHasThem) {
  EXPECT_EQ(*roots_->Resolve("peft_a"), P("root1/peft_a"));
  EXPECT_EQ(*roots_->Resolve("g.gguf"), P("root2/g.gguf"));
  EXPECT_EQ(*roots_->Resolve("./peft_a/"), P("root1/peft_a"));
}

TEST_F(AdapterRootsTest, AbsolutePathsMustLieUnderARoot) {
  EXPECT_EQ(*roots_->Resolve((base_ / "root2/g.gguf").string()), P("root2/g.gguf"));
  EXPECT_EQ(roots_->Resolve((base_ / "outside/evil.gguf").string()).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(roots_->Resolve("/etc/passwd").status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(AdapterRootsTest, DotDotEscapesAreDeniedEvenWhenTheTargetExists) {
  EXPECT_EQ(roots_->Resolve("../outside/evil.gguf").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(roots_->Resolve("../does_not_exist").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(roots_->Resolve((base_ / "root1/../outside/evil.gguf").string()).status().code(),
            absl::StatusCode::kPermissionDenied);
  // ".." that stays inside a root is fine.
  EXPECT_EQ(*roots_->Resolve("peft_a/../peft_a"), P("root1/peft_a"));
}

TEST_F(AdapterRootsTest, SymlinksOutOfTheRootsAreDeniedAndInsideAllowed) {
  absl::StatusOr<std::string> r = roots_->Resolve("escape");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied) << r.status();
  EXPECT_NE(r.status().message().find("outside the adapter roots"), std::string::npos);
  EXPECT_EQ(*roots_->Resolve("inside"), P("root1/peft_a"));
  EXPECT_EQ(roots_->FindById("escape").status().code(), absl::StatusCode::kPermissionDenied);
}

TEST_F(AdapterRootsTest, MissingIsNotFound) {
  EXPECT_EQ(roots_->Resolve("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(roots_->FindById("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(roots_->Resolve("").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(AdapterRootsTest, FindByIdLooksForADirectoryOrAGgufFile) {
  EXPECT_EQ(*roots_->FindById("peft_a"), P("root1/peft_a"));
  EXPECT_EQ(*roots_->FindById("g"), P("root2/g.gguf"));
  EXPECT_EQ(roots_->FindById("../outside/evil").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(AdapterRootsTest, NoRootsRefusesEverything) {
  auto r = AdapterRoots::Create({});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->Resolve((base_ / "root1/peft_a").string()).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(r->FindById("peft_a").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(AdapterRootsTest, RootsMustBeExistingDirectories) {
  EXPECT_EQ(AdapterRoots::Create({(base_ / "nope").string()}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(AdapterRoots::Create({(base_ / "root2/g.gguf").string()}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(AdapterIdTest, Validation) {
  EXPECT_TRUE(ValidateAdapterId("tenant-1.v2_x").ok());
  EXPECT_TRUE(ValidateAdapterId(std::string(128, 'a')).ok());
  for (const std::string bad : {std::string(), std::string(129, 'a'), std::string(".x"),
                                std::string("a/b"), std::string("a b"), std::string("..")}) {
    EXPECT_EQ(ValidateAdapterId(bad).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace loom
