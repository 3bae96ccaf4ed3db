// Which device nodes a task may not open: GPUs by device minor, MIG capabilities by the
// driver's capability files. Plain files stand in for the device nodes (only their
// existence matters here; the isolation end-to-end test opens real character devices).
#include "agent/task_sandbox.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

namespace tessera {
namespace {

class HiddenGpuDevicesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tessera-sandbox-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dev_ = root_ + "/dev";
    caps_ = root_ + "/capabilities";
    std::filesystem::create_directories(dev_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  void Touch(const std::string& path, const std::string& text = "") {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path) << text;
  }
  // GPU `minor`'s MIG instance gi/ci, opened by capability minors gi_cap and ci_cap.
  void MigCaps(int minor, int gi, int ci, int gi_cap, int ci_cap) {
    const std::string base =
        caps_ + "/gpu" + std::to_string(minor) + "/mig/gi" + std::to_string(gi);
    Touch(base + "/access",
          "DeviceFileMinor: " + std::to_string(gi_cap) + "\nDeviceFileMode: 292\n");
    Touch(base + "/ci" + std::to_string(ci) + "/access",
          "DeviceFileMinor: " + std::to_string(ci_cap) + "\nDeviceFileMode: 292\n");
    Touch(dev_ + "/nvidia-caps/nvidia-cap" + std::to_string(gi_cap));
    Touch(dev_ + "/nvidia-caps/nvidia-cap" + std::to_string(ci_cap));
  }
  std::vector<std::string> Names(const std::vector<std::string>& paths) {
    std::vector<std::string> out;
    for (const std::string& p : paths) {
      out.push_back(p.substr(dev_.size() + 1));
    }
    return out;
  }

  std::string root_, dev_, caps_;
};

TEST_F(HiddenGpuDevicesTest, HidesOtherCardsByDeviceMinorNotIndex) {
  // Minors 1, 3, 5 (as the fake NVML numbers GPUs 0-2); /dev/nvidia0 is not a GPU here.
  for (int minor : {0, 1, 3, 5}) {
    Touch(dev_ + "/nvidia" + std::to_string(minor));
  }
  auto hidden = HiddenGpuDevices(dev_, caps_, {1, 3, 5}, {{3}});
  ASSERT_TRUE(hidden.ok()) << hidden.status().message();
  EXPECT_EQ(Names(*hidden), (std::vector<std::string>{"nvidia1", "nvidia5"}));
  // A minor without a node is nothing to hide.
  std::filesystem::remove(dev_ + "/nvidia5");
  hidden = HiddenGpuDevices(dev_, caps_, {1, 3, 5}, {});
  ASSERT_TRUE(hidden.ok());
  EXPECT_EQ(Names(*hidden), (std::vector<std::string>{"nvidia1", "nvidia3"}));
}

TEST_F(HiddenGpuDevicesTest, AMigTaskKeepsOnlyItsOwnInstancesCapabilities) {
  Touch(dev_ + "/nvidia0");
  Touch(dev_ + "/nvidia1");
  Touch(dev_ + "/nvidia-caps/nvidia-cap1");  // mig/config
  Touch(dev_ + "/nvidia-caps/nvidia-cap2");  // mig/monitor
  MigCaps(0, 1, 0, 12, 13);
  MigCaps(0, 2, 0, 21, 22);
  MigCaps(1, 1, 0, 111, 112);
  auto hidden = HiddenGpuDevices(dev_, caps_, {0, 1}, {{0, 2, 0}});
  ASSERT_TRUE(hidden.ok()) << hidden.status().message();
  EXPECT_EQ(Names(*hidden), (std::vector<std::string>{
                                "nvidia-caps/nvidia-cap1", "nvidia-caps/nvidia-cap111",
                                "nvidia-caps/nvidia-cap112", "nvidia-caps/nvidia-cap12",
                                "nvidia-caps/nvidia-cap13", "nvidia-caps/nvidia-cap2", "nvidia1"}));
  // A whole-card task gets no capability at all.
  hidden = HiddenGpuDevices(dev_, caps_, {0, 1}, {{1}});
  ASSERT_TRUE(hidden.ok());
  EXPECT_EQ(hidden->size(), 9u);  // nvidia0 and all 8 capabilities
  EXPECT_EQ(Names(*hidden).front(), "nvidia-caps/nvidia-cap1");
  EXPECT_EQ(Names(*hidden).back(), "nvidia0");
}

TEST_F(HiddenGpuDevicesTest, AnInstanceWhoseCapabilitiesCannotBeFoundIsRefused) {
  Touch(dev_ + "/nvidia0");
  MigCaps(0, 1, 0, 12, 13);
  // No capability files for GPU instance 3.
  auto hidden = HiddenGpuDevices(dev_, caps_, {0}, {{0, 3, 0}});
  ASSERT_FALSE(hidden.ok());
  EXPECT_EQ(hidden.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(hidden.status().message().find("gi3/access"), std::string::npos)
      << hidden.status().message();
  // Ids the driver did not give.
  hidden = HiddenGpuDevices(dev_, caps_, {0}, {{0, 1, -1}});
  ASSERT_FALSE(hidden.ok());
  EXPECT_EQ(hidden.status().code(), StatusCode::kFailedPrecondition);
  // A damaged access file.
  Touch(caps_ + "/gpu0/mig/gi1/ci0/access", "DeviceFileMinor: x\n");
  hidden = HiddenGpuDevices(dev_, caps_, {0}, {{0, 1, 0}});
  ASSERT_FALSE(hidden.ok());
  EXPECT_NE(hidden.status().message().find("no DeviceFileMinor"), std::string::npos)
      << hidden.status().message();
}

TEST_F(HiddenGpuDevicesTest, WithoutCapabilityNodesMigNeedsNothingMore) {
  // A machine (or fake GPUs) without /dev/nvidia-caps: only cards are fenced.
  Touch(dev_ + "/nvidia0");
  Touch(dev_ + "/nvidia1");
  auto hidden = HiddenGpuDevices(dev_, caps_, {0, 1}, {{0, 4, 0}});
  ASSERT_TRUE(hidden.ok()) << hidden.status().message();
  EXPECT_EQ(Names(*hidden), std::vector<std::string>{"nvidia1"});
}

// The agents of two nodes make a shared checkpoint root at once: the one that finds it
// made goes on, as the task's uid, through it at once. So a directory MakeDirs makes
// must never be seen under its name with the mode the daemons' umask (077) narrows it
// to (it was made 0700 and widened a moment later: the other agent's task failed to
// start with "cannot remove .../checkpoints/N/.tessera/preempt: Permission denied").
TEST(MakeDirsTest, ADirectoryNeverAppearsNarrowerThanItsMode) {
  char tmpl[] = "/tmp/tessera-makedirs-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  const mode_t old_umask = ::umask(077);
  int narrower = 0;
  for (int i = 0; i < 100; ++i) {
    const std::string dir = root + "/c" + std::to_string(i) + "/checkpoints";
    std::atomic<bool> done{false};
    std::atomic<int> first_seen{-1};
    std::thread watcher([&] {
      struct stat st {};
      while (!done.load()) {
        if (::lstat(dir.c_str(), &st) == 0) {
          first_seen = static_cast<int>(st.st_mode & 07777);
          return;
        }
      }
    });
    Status made = MakeDirs(dir, 0711);
    done = true;
    watcher.join();
    ASSERT_TRUE(made.ok()) << made.message();
    struct stat st {};
    ASSERT_EQ(::lstat(dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0711u);
    if (first_seen.load() != -1 && first_seen.load() != 0711) {
      ++narrower;
    }
  }
  ::umask(old_umask);
  EXPECT_EQ(narrower, 0) << "directories seen before they had their mode";
  // Nothing made aside is left behind.
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    EXPECT_EQ(e.path().filename().string().find(".new-"), std::string::npos) << e.path();
  }
  std::filesystem::remove_all(root);
}

TEST(MakeDirsTest, AnExistingDirectoryKeepsItsModeAndAFileIsRefused) {
  char tmpl[] = "/tmp/tessera-makedirs-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  ASSERT_EQ(::mkdir((root + "/mine").c_str(), 0750), 0);
  ASSERT_EQ(::chmod((root + "/mine").c_str(), 0750), 0);
  ASSERT_TRUE(MakeDirs(root + "/mine/a/b", 0711).ok());
  struct stat st {};
  ASSERT_EQ(::lstat((root + "/mine").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
  ASSERT_EQ(::lstat((root + "/mine/a/b").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0711u);
  std::ofstream(root + "/file") << "x";
  Status s = MakeDirs(root + "/file/sub", 0711);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.message();
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace tessera
