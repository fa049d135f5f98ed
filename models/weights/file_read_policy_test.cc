#include "models/weights/file_read_policy.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace loom {
namespace {

class FileReadPolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/loom_read_policy_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    root_ = base_ + "/root";
    outside_ = base_ + "/outside";
    ASSERT_EQ(::mkdir(root_.c_str(), 0755), 0);
    ASSERT_EQ(::mkdir(outside_.c_str(), 0755), 0);
    Write(root_ + "/inside.bin", "inside bytes");
    Write(outside_ + "/secret.txt", "SECRET-OUTSIDE-BYTES");
    policy_.roots = {root_};
  }
  void TearDown() override { std::system(("rm -rf " + base_).c_str()); }
  static void Write(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
  }

  std::string base_, root_, outside_;
  FileReadPolicy policy_;
};

TEST_F(FileReadPolicyTest, OpensARegularFileUnderARoot) {
  absl::StatusOr<ReadOnlyFile> f = OpenFileForRead(root_ + "/inside.bin", policy_);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_GE(f->fd(), 0);
  EXPECT_EQ(f->size(), 12u);
}

TEST_F(FileReadPolicyTest, RefusesAFileSymlinkLeadingOutsideWithoutNamingTheTarget) {
  ASSERT_EQ(::symlink((outside_ + "/secret.txt").c_str(), (root_ + "/link.bin").c_str()), 0);
  absl::StatusOr<ReadOnlyFile> f = OpenFileForRead(root_ + "/link.bin", policy_);
  ASSERT_EQ(f.status().code(), absl::StatusCode::kPermissionDenied) << f.status();
  EXPECT_EQ(std::string(f.status().message()).find(outside_), std::string::npos)
      << f.status();
}

TEST_F(FileReadPolicyTest, RefusesADirectorySymlinkInAnEarlierComponent) {
  ASSERT_EQ(::symlink(outside_.c_str(), (root_ + "/adapter").c_str()), 0);
  absl::StatusOr<ReadOnlyFile> f = OpenFileForRead(root_ + "/adapter/secret.txt", policy_);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kPermissionDenied) << f.status();
}

TEST_F(FileReadPolicyTest, AllowsASymlinkThatStaysUnderARoot) {
  ASSERT_EQ(::symlink((root_ + "/inside.bin").c_str(), (root_ + "/alias.bin").c_str()), 0);
  EXPECT_TRUE(OpenFileForRead(root_ + "/alias.bin", policy_).ok());
}

TEST_F(FileReadPolicyTest, ARootIsAPathPrefixOnlyAtAComponentBoundary) {
  FileReadPolicy p;
  p.roots = {"/srv/adapters"};
  EXPECT_TRUE(p.Allows("/srv/adapters"));
  EXPECT_TRUE(p.Allows("/srv/adapters/a/b"));
  EXPECT_FALSE(p.Allows("/srv/adapters2/a"));
  EXPECT_FALSE(p.Allows("/srv"));
  EXPECT_TRUE(FileReadPolicy().Allows("/anything"));
}

TEST_F(FileReadPolicyTest, AFifoIsRefusedWithoutBlocking) {
  // Without O_NONBLOCK the open would wait for a writer forever (the test would time out).
  const std::string fifo = root_ + "/adapter_model.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  absl::StatusOr<ReadOnlyFile> f = OpenFileForRead(fifo, policy_);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kFailedPrecondition) << f.status();
}

TEST_F(FileReadPolicyTest, AFileOverTheSizeLimitIsRefusedBeforeReading) {
  policy_.max_bytes = 11;
  absl::StatusOr<ReadOnlyFile> f = OpenFileForRead(root_ + "/inside.bin", policy_);
  ASSERT_EQ(f.status().code(), absl::StatusCode::kResourceExhausted) << f.status();
  EXPECT_NE(std::string(f.status().message()).find("12 bytes"), std::string::npos);
  EXPECT_NE(std::string(f.status().message()).find("11 byte limit"), std::string::npos);
}

TEST_F(FileReadPolicyTest, MissingIsNotFoundAndNoRootsAllowsAnywhere) {
  EXPECT_EQ(OpenFileForRead(root_ + "/missing", policy_).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(OpenFileForRead(outside_ + "/secret.txt", FileReadPolicy()).ok());
}

}  // namespace
}  // namespace loom
