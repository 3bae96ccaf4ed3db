// A task's state file: whole lines only, "clear" forgets what the launcher wrote before,
// and the directories of earlier versions read the same.
#include "agent/launch/task_state_file.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/launch/task_launcher.h"
#include "base/testing/temp_dir.h"

namespace tessera {
namespace {

class TaskStateFileTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(tmp_.ok()); }

  void Write(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
  }

  testing::TempDir tmp_{"tessera-state-file-test-"};
  const std::string root_ = tmp_.path();
  const std::string path_ = root_ + "/1.0.1.task";
};

TEST_F(TaskStateFileTest, OnlyWholeLinesCount) {
  using namespace std::string_literals;
  const std::string text = "{\"launch\":1}\n\0\0\0shim 1 2 3\nexit 0"s;
  std::vector<std::string_view> lines = StateFileLines(text);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "{\"launch\":1}");
  EXPECT_EQ(lines[1], "shim 1 2 3");

  Write(path_, text);
  const TaskStateLines state = ReadTaskState(path_);
  EXPECT_EQ(state.shim, "1 2 3");
  EXPECT_EQ(state.end, "") << "a line cut off by a crash was read";
}

TEST_F(TaskStateFileTest, TheLastValueSinceTheLastClearHolds) {
  Write(path_,
        "{\"launch\":1}\ncgroup /sys/fs/cgroup/a\nshim 10 11 12\nexit 3\nfailed no\nclear\n"
        "shim 20 21 22\nlost agent stopped\nsignal 9\nshim 30 31 32\n");
  TaskStateLines state = ReadTaskState(path_);
  EXPECT_EQ(state.shim, "30 31 32");
  EXPECT_EQ(state.cgroup, "") << "the cgroup of the cleared start";
  EXPECT_EQ(state.end, "signal 9");
  EXPECT_TRUE(state.any);

  Write(path_, "{\"launch\":1}\nshim 10 11 12\nfenced\nclear\nfailed why\n");
  state = ReadTaskState(path_);
  EXPECT_EQ(state.shim, "");
  EXPECT_EQ(state.end, "");
  EXPECT_FALSE(state.any);

  Write(path_, "exit 0\nexit\nexitx 2\n");
  EXPECT_EQ(ReadTaskState(path_).end, "exit 0") << "a key without its value, or a longer key";
}

TEST_F(TaskStateFileTest, AppendsAreWholeLinesToAFileThatExists) {
  EXPECT_EQ(AppendStateLine(path_, "clear", false).code(), StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(path_));
  Write(path_, "{}\n");
  ASSERT_TRUE(AppendStateLine(path_, "shim 1 2 3", false).ok());
  ASSERT_TRUE(AppendStateLine(path_, "exit 4", true).ok());
  std::ifstream in(path_);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "{}\nshim 1 2 3\nexit 4\n");
}

TEST_F(TaskStateFileTest, AnEarlierVersionsDirectoryReadsTheSame) {
  const std::string dir = root_ + "/1.0.1";
  std::filesystem::create_directories(dir);
  Write(dir + "/shim", "10 11 12\n");
  Write(dir + "/cgroup", "/sys/fs/cgroup/t\n");
  TaskStateLines state = ReadTaskState(dir);
  EXPECT_EQ(state.shim, "10 11 12");
  EXPECT_EQ(state.cgroup, "/sys/fs/cgroup/t");
  EXPECT_EQ(state.end, "");
  Write(dir + "/exit", "exit 7");
  EXPECT_EQ(ReadTaskState(dir).end, "") << "an exit file cut off";
  Write(dir + "/exit", "exit 7\n");
  EXPECT_EQ(ReadTaskState(dir).end, "exit 7");
}

// A task an earlier version started, whose shim has ended: its exit file is reported.
TEST_F(TaskStateFileTest, ALauncherAdoptsATaskOfAnEarlierVersion) {
  const pid_t gone = ::fork();
  ASSERT_GE(gone, 0);
  if (gone == 0) {
    ::_exit(0);
  }
  ASSERT_EQ(::waitpid(gone, nullptr, 0), gone);
  const std::string dir = root_ + "/old.1";
  std::filesystem::create_directories(dir);
  Write(dir + "/shim", std::to_string(gone) + " " + std::to_string(gone) + " 1\n");
  Write(dir + "/exit", "exit 7\n");
  TaskLauncher::Options options;
  options.use_cgroups = false;
  TaskLauncher launcher(options);
  ASSERT_TRUE(launcher.Adopt("old.1", dir).ok());
  std::vector<TaskExit> exits = launcher.Reap();
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].id, "old.1");
  EXPECT_TRUE(exits[0].status_known);
  EXPECT_EQ(exits[0].exit_code, 7);
  EXPECT_EQ(launcher.Adopt("old.2", root_ + "/old.2.task").code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace tessera
