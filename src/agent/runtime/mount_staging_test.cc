#include "agent/runtime/mount_staging.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace tessera {
namespace {

// Needs root (mount); skipped otherwise, as the other mount tests.
class MountStagingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "needs root to bind-mount";
    }
    dir_ = testing::TempDir() + "mount_staging_test_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir_ + "/allowed/data/sub");
    std::filesystem::create_directories(dir_ + "/secret");
    std::filesystem::create_directories(dir_ + "/stage");
    std::ofstream(dir_ + "/allowed/data/file") << "data\n";
    std::ofstream(dir_ + "/secret/file") << "secret\n";
    std::filesystem::create_directory_symlink(dir_ + "/secret", dir_ + "/allowed/link");
    std::filesystem::create_directory_symlink(dir_ + "/secret", dir_ + "/allowed/data/inner");
  }
  void TearDown() override {
    if (!dir_.empty()) {
      UnstageMounts(dir_ + "/stage");
      std::filesystem::remove_all(dir_);
    }
  }
  std::string dir_;
};

TEST_F(MountStagingTest, BindsTheCheckedDirectoryAndNotWhatItsPathBecomesLater) {
  const std::string staged = dir_ + "/stage/0";
  ASSERT_TRUE(StageMount(dir_ + "/allowed", dir_ + "/allowed/data", staged).ok());
  // The path now leads elsewhere: the staged mount is still the directory checked.
  std::filesystem::rename(dir_ + "/allowed/data", dir_ + "/allowed/moved");
  std::filesystem::create_directory_symlink(dir_ + "/secret", dir_ + "/allowed/data");
  std::ifstream in(staged + "/file");
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "data");
  UnstageMounts(dir_ + "/stage");
  EXPECT_FALSE(std::filesystem::exists(staged));
}

TEST_F(MountStagingTest, RefusesLinksEscapesAndWhatIsNotThere) {
  EXPECT_EQ(StageMount(dir_ + "/allowed", dir_ + "/allowed/link", dir_ + "/stage/1").code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(StageMount(dir_ + "/allowed", dir_ + "/allowed/data/inner", dir_ + "/stage/2").code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(StageMount(dir_ + "/allowed", dir_ + "/secret", dir_ + "/stage/3").code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(StageMount(dir_ + "/allowed", dir_ + "/allowed/none", dir_ + "/stage/4").code(),
            StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/stage/1"));
}

}  // namespace
}  // namespace tessera
