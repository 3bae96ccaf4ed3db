// Spare job directories: the next job of the same owner gets them back empty, with
// nothing a task left in them followed or kept, and nobody else gets them.
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "agent/task_sandbox.h"
#include "base/testing/temp_dir.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

class JobSandboxTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(tmp_.ok()); }

  JobSandbox Prepare(uint64_t job, int64_t uid = -1, int64_t gid = -1) {
    StatusOr<JobSandbox> box = PrepareJobSandbox(data_, job, uid, gid);
    EXPECT_TRUE(box.ok()) << box.status().message();
    return box.ok() ? *box : JobSandbox{};
  }
  static ino_t Inode(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
    return st.st_ino;
  }
  static std::set<std::string> Entries(const std::string& dir) {
    std::set<std::string> names;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      names.insert(e.path().filename().string());
    }
    return names;
  }
  std::string Spares() const { return data_ + "/jobs/.spare"; }

  testing::TempDir tmp_{"tessera-job-sandbox-test-"};
  const std::string root_ = tmp_.path();
  const std::string data_ = root_ + "/agent";
};

TEST_F(JobSandboxTest, TheNextJobOfTheSameOwnerGetsTheDirectoriesBackEmpty) {
  const JobSandbox first = Prepare(1);
  const ino_t home = Inode(first.home);
  const std::string outside = root_ + "/outside";
  std::ofstream(outside) << "keep";
  std::ofstream(first.home + "/.bashrc") << "x";
  fs::create_directories(first.tmp + "/a/b/c");
  std::ofstream(first.tmp + "/a/b/c/d") << "x";
  std::ofstream(first.dir + "/result.txt") << "x";
  fs::create_directory(first.dir + "/out");
  fs::create_symlink(outside, first.home + "/link");
  fs::create_directory_symlink(root_, first.tmp + "/dirlink");
  ASSERT_EQ(::setxattr(first.home.c_str(), "user.left", "1", 1, 0), 0) << "user xattrs on /tmp";

  RetireJobSandbox(data_, 1);
  EXPECT_FALSE(fs::exists(first.dir));
  const std::set<std::string> spares = Entries(Spares());
  ASSERT_EQ(spares.size(), 1u);
  // Kept as the agent's, closed to everyone else, until a job takes it.
  const std::string spare = Spares() + "/" + *spares.begin();
  for (const std::string& d : {spare, spare + "/home", spare + "/tmp"}) {
    struct stat st {};
    ASSERT_EQ(::stat(d.c_str(), &st), 0) << d;
    EXPECT_EQ(st.st_uid, ::geteuid()) << d;
    EXPECT_EQ(st.st_mode & 07777, 0700u) << d;
  }
  char left[8];
  EXPECT_LT(::getxattr((spare + "/home").c_str(), "user.left", left, sizeof(left)), 0)
      << "an attribute of the last job survived";

  const JobSandbox second = Prepare(2);
  EXPECT_EQ(Inode(second.home), home) << "the spare was not reused";
  EXPECT_EQ(Entries(second.dir), (std::set<std::string>{"home", "tmp"}));
  EXPECT_TRUE(Entries(second.home).empty());
  EXPECT_TRUE(Entries(second.tmp).empty());
  EXPECT_TRUE(Entries(Spares()).empty());
  // What the links pointed to is untouched.
  EXPECT_TRUE(fs::exists(outside));
  EXPECT_TRUE(fs::is_directory(root_));
}

TEST_F(JobSandboxTest, ADirectoryOpenedToOthersIsRemovedNotKept) {
  const JobSandbox first = Prepare(1);
  std::ofstream(first.tmp + "/shared") << "x";
  ASSERT_EQ(::chmod(first.tmp.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(first.tmp.c_str(), 0700), 0);  // closed again: still kept
  RetireJobSandbox(data_, 1);
  EXPECT_EQ(Entries(Spares()).size(), 1u);

  const JobSandbox second = Prepare(2);
  ASSERT_EQ(::chmod(second.tmp.c_str(), 0757), 0);
  RetireJobSandbox(data_, 2);
  EXPECT_FALSE(fs::exists(second.dir));
  EXPECT_TRUE(Entries(Spares()).empty()) << "a directory others may hold open was kept";

  const JobSandbox third = Prepare(3);
  ASSERT_EQ(::chmod(third.dir.c_str(), 0710), 0);
  RetireJobSandbox(data_, 3);
  EXPECT_FALSE(fs::exists(third.dir));
  EXPECT_TRUE(Entries(Spares()).empty());
}

TEST_F(JobSandboxTest, ADirectoryWhoseHomeIsNoLongerADirectoryIsRemovedNotKept) {
  const JobSandbox first = Prepare(1);
  const std::string victim = root_ + "/victim";
  fs::create_directories(victim);
  std::ofstream(victim + "/file") << "keep";
  fs::remove(first.home);
  fs::create_directory_symlink(victim, first.home);

  RetireJobSandbox(data_, 1);
  EXPECT_FALSE(fs::exists(first.dir));
  EXPECT_TRUE(Entries(Spares()).empty());
  EXPECT_TRUE(fs::exists(victim + "/file")) << "the retirement followed a link";

  const JobSandbox second = Prepare(2);
  EXPECT_TRUE(fs::is_directory(fs::symlink_status(second.home)));
}

TEST_F(JobSandboxTest, AtMostTheLimitIsKept) {
  const int jobs = kMaxSpareSandboxes + 5;
  for (int j = 1; j <= jobs; ++j) {
    Prepare(j);
  }
  for (int j = 1; j <= jobs; ++j) {
    RetireJobSandbox(data_, j);
  }
  EXPECT_EQ(Entries(Spares()).size(), static_cast<size_t>(kMaxSpareSandboxes));
  EXPECT_EQ(Entries(data_ + "/jobs"), std::set<std::string>{".spare"});
}

TEST_F(JobSandboxTest, ASpareServesOnlyItsOwnOwner) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root (directories of other uids)";
  }
  const JobSandbox first = Prepare(1, 60001, 60001);
  const ino_t home = Inode(first.home);
  RetireJobSandbox(data_, 1);

  const JobSandbox other = Prepare(2, 60002, 60002);
  EXPECT_NE(Inode(other.home), home) << "another uid got the spare";
  struct stat st {};
  ASSERT_EQ(::stat(other.home.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 60002u);
  EXPECT_EQ(Entries(Spares()).size(), 1u);

  const JobSandbox same = Prepare(3, 60001, 60001);
  EXPECT_EQ(Inode(same.home), home);
  ASSERT_EQ(::stat(same.dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 60001u);
  EXPECT_EQ(st.st_gid, 60001u);
}

TEST_F(JobSandboxTest, AnEntryOfAnotherUidMeansRemoval) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root (files of other uids)";
  }
  const JobSandbox first = Prepare(1, 60001, 60001);
  const std::string planted = first.home + "/planted";
  std::ofstream(planted) << "x";
  ASSERT_EQ(::chown(planted.c_str(), 60002, 60002), 0);
  RetireJobSandbox(data_, 1);
  EXPECT_FALSE(fs::exists(first.dir));
  EXPECT_TRUE(Entries(Spares()).empty()) << "kept although another uid had put a file there";
}

TEST_F(JobSandboxTest, AJobThatHasItsDirectoriesKeepsThem) {
  Prepare(1);
  RetireJobSandbox(data_, 1);
  std::ofstream(Prepare(2).home + "/mine") << "x";
  // A second task of job 2 finds job 2's directories, not a spare's or new ones.
  const JobSandbox again = Prepare(2);
  EXPECT_TRUE(fs::exists(again.home + "/mine"));
}

}  // namespace
}  // namespace tessera
