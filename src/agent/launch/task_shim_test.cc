// The launcher's shim, with real processes: descendants die with the leader, tasks
// survive the launcher and are adopted by the next one, a task fences itself when its
// lease cannot be read, tasks run as another user and cannot open hidden device nodes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/launch/task_launcher.h"
#include "agent/launch/task_launcher_test_util.h"
#include "agent/launch/task_shim.h"
#include "base/strings.h"

namespace tessera {
namespace {

using launcher_testing::Clock;
using launcher_testing::kDeadline;
using launcher_testing::kPoll;
using launcher_testing::LauncherTest;
using launcher_testing::ProcessGone;
using launcher_testing::ReadAll;
using launcher_testing::TestLauncher;
using launcher_testing::WaitUntilGone;

constexpr int64_t kTenant = 200123;

std::vector<int> ParsePids(const std::string& text) {
  std::vector<int> pids;
  for (std::string_view line : Split(text, '\n')) {
    auto pid = ParseInt64(Trim(line));
    if (pid.ok() && *pid > 0) {
      pids.push_back(static_cast<int>(*pid));
    }
  }
  return pids;
}

TEST_F(LauncherTest, EveryDescendantDiesWithTheLeader) {
  TestLauncher launcher(NoCgroups());
  std::string pids = root_ + "/workers.pid";
  // Two workers in the group, one in a session of its own, and one in its own session
  // whose child is not an orphan (its parent lives until killed).
  LaunchSpec spec =
      Shell("workers", "sleep 100 & echo $! >> " + pids + "; sleep 100 & echo $! >> " + pids +
                           "; setsid sleep 100 & echo $! >> " + pids +
                           "; setsid sh -c 'sleep 100 & echo $! >> " + pids +
                           "; wait' & while [ $(wc -l < " + pids +
                           ") -lt 4 ]; do sleep 0.01; done; exec sleep 0.2");
  ASSERT_TRUE(launcher.Start(spec).ok());
  ASSERT_TRUE(WaitForText(pids, "\n"));
  std::vector<int> workers;
  for (auto end = Clock::now() + kDeadline; workers.size() < 4 && Clock::now() < end;) {
    workers = ParsePids(ReadAll(pids));
    std::this_thread::sleep_for(kPoll);
  }
  ASSERT_EQ(workers.size(), 4u) << ReadAll(pids);
  for (int pid : workers) {
    EXPECT_FALSE(ProcessGone(pid)) << pid;
  }
  bool left = false;  // the setsid worker really left the session
  for (auto end = Clock::now() + kDeadline; !left && Clock::now() < end;) {
    left = getsid(workers[2]) != getsid(workers[0]);
    std::this_thread::sleep_for(kPoll);
  }
  EXPECT_TRUE(left);
  auto exit = WaitExit(launcher, "workers");
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code, 0);
  EXPECT_TRUE(exit->status_known);
  // Reported only once nothing of the task is left: no waiting here.
  for (int pid : workers) {
    EXPECT_TRUE(ProcessGone(pid)) << "worker " << pid << " survived its task";
  }
  EXPECT_EQ(End("workers"), "exit 0");
}

TEST_F(LauncherTest, TaskSurvivesTheLauncherAndIsAdopted) {
  LaunchSpec spec = Shell("adopt.1", "echo ready; while :; do sleep 0.05; done");
  int leader = 0;
  {
    TaskLauncher first(NoCgroups());
    auto pid = first.Start(spec);
    ASSERT_TRUE(pid.ok()) << pid.status().ToString();
    leader = *pid;
    ASSERT_TRUE(WaitForText(spec.log_path, "ready\n"));
  }
  std::vector<int64_t> shim = ShimRecord("adopt.1");
  ASSERT_EQ(shim.size(), 3u);
  EXPECT_EQ(shim[1], leader);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(ProcessGone(leader)) << "the launcher's destructor ended the task";
  EXPECT_FALSE(ProcessGone(static_cast<int>(shim[0])));

  TestLauncher second(NoCgroups());
  ASSERT_TRUE(second.Adopt("adopt.1", StateFile("adopt.1")).ok());
  EXPECT_EQ(second.Adopt("adopt.1", StateFile("adopt.1")).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(second.Start(spec).status().code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(second.Running("adopt.1"));
  EXPECT_TRUE(second.Reap().empty());
  ASSERT_TRUE(second.Signal("adopt.1", SIGTERM).ok());
  auto exit = WaitExit(second, "adopt.1");
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(exit->status_known);
  EXPECT_EQ(exit->signal, SIGTERM);
  EXPECT_EQ(exit->exit_code, -1);
  EXPECT_EQ(exit->pid, leader);
  EXPECT_EQ(End("adopt.1"), "signal 15");
  EXPECT_TRUE(ProcessGone(leader));
  EXPECT_FALSE(second.Running("adopt.1"));
}

TEST_F(LauncherTest, ExitWithoutALauncherIsReportedOnAdoption) {
  std::string go = root_ + "/go";
  LaunchSpec spec = Shell("adopt.2", "while [ ! -e " + go + " ]; do sleep 0.01; done; exit 7");
  {
    TaskLauncher first(NoCgroups());
    ASSERT_TRUE(first.Start(spec).ok());
  }
  std::ofstream(go) << "go\n";
  ASSERT_TRUE(WaitForEnd("adopt.2"));
  EXPECT_EQ(End("adopt.2"), "exit 7");

  TestLauncher second(NoCgroups());
  ASSERT_TRUE(second.Adopt("adopt.2", StateFile("adopt.2")).ok());
  EXPECT_TRUE(second.Running("adopt.2"));  // until reaped
  EXPECT_EQ(second.Signal("adopt.2", SIGTERM).code(), StatusCode::kNotFound);
  auto exit = WaitExit(second, "adopt.2");
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(exit->status_known);
  EXPECT_EQ(exit->exit_code, 7);
  EXPECT_EQ(exit->signal, 0);
}

TEST_F(LauncherTest, AdoptingAKilledShimKillsTheRestWithStatusUnknown) {
  Forked task;
  {
    TaskLauncher first(NoCgroups());
    task = StartWithChild(first, "adopt.3", "100", "while :; do sleep 0.05; done");
  }
  const int leader = task.leader;
  const int worker = task.child;
  ASSERT_GT(leader, 0);
  ASSERT_GT(worker, 0);
  const int shim = KillShim("adopt.3");
  ASSERT_GT(shim, 1);
  ASSERT_TRUE(WaitUntilGone(shim));
  EXPECT_FALSE(ProcessGone(leader));  // the task runs on, unsupervised
  EXPECT_FALSE(ProcessGone(worker));

  TestLauncher second(NoCgroups());
  ASSERT_TRUE(second.Adopt("adopt.3", StateFile("adopt.3")).ok());
  auto exit = WaitExit(second, "adopt.3");
  ASSERT_TRUE(exit.has_value());
  EXPECT_FALSE(exit->status_known);
  EXPECT_EQ(exit->exit_code, -1);
  EXPECT_EQ(exit->signal, 0);
  EXPECT_TRUE(ProcessGone(leader));
  EXPECT_TRUE(ProcessGone(worker));
  EXPECT_NE(ReadTaskState(StateFile("adopt.3")).shim, "");
  EXPECT_EQ(End("adopt.3"), "") << "a killed shim wrote an end";
}

TEST_F(LauncherTest, KilledShimOfAnOwnTaskIsReportedWithStatusUnknown) {
  TestLauncher launcher(NoCgroups());
  const Forked task = StartWithChild(launcher, "own.3", "100", "wait");
  ASSERT_GT(task.leader, 0);
  const int worker = task.child;
  ASSERT_GT(worker, 0);
  ASSERT_GT(KillShim("own.3"), 1);
  auto exit = WaitExit(launcher, "own.3");
  ASSERT_TRUE(exit.has_value());
  EXPECT_FALSE(exit->status_known);
  EXPECT_TRUE(ProcessGone(task.leader));
  EXPECT_TRUE(ProcessGone(worker));
}

TEST_F(LauncherTest, KillEndsOneTask) {
  TestLauncher launcher(NoCgroups());
  ASSERT_TRUE(launcher.Start(Shell("victim", "sleep 100")).ok());
  ASSERT_TRUE(launcher.Start(Shell("bystander", "sleep 100")).ok());
  ASSERT_TRUE(launcher.Kill("victim").ok());
  auto exit = WaitExit(launcher, "victim");
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->signal, SIGKILL);
  EXPECT_TRUE(launcher.Running("bystander"));
}

// The shim is the program the launcher was told to spawn, or a fork of this one.
TEST_F(LauncherTest, TheShimIsTheConfiguredProgram) {
  TestLauncher launcher(NoCgroups());
  StatusOr<int> leader = launcher.Start(Shell("which-shim", "sleep 100"));
  ASSERT_TRUE(leader.ok()) << leader.status().message();
  std::string stat = ReadAll("/proc/" + std::to_string(*leader) + "/stat");
  size_t paren = stat.rfind(')');
  ASSERT_NE(paren, std::string::npos);
  int shim = std::atoi(stat.c_str() + paren + 4);  // ") S PPID"
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/" + std::to_string(shim) + "/exe", ec);
  ASSERT_FALSE(ec) << ec.message();
  const char* program = std::getenv("TESSERA_TEST_SHIM_PROGRAM");  // NOLINT
  if (program != nullptr) {
    EXPECT_EQ(exe, std::filesystem::canonical(program));
  } else {
    EXPECT_EQ(exe, std::filesystem::read_symlink("/proc/self/exe"));
  }
  ASSERT_TRUE(launcher.Kill("which-shim").ok());
  ASSERT_TRUE(WaitExit(launcher, "which-shim").has_value());
}

constexpr int64_t kSecondNs = 1'000'000'000;

TEST(LeaseWatchTest, AReadableLeaseExpiresByItsAge) {
  LeaseWatch watch;
  EXPECT_FALSE(watch.Expired(true, kSecondNs - 1, 0, kSecondNs));
  EXPECT_TRUE(watch.Expired(true, kSecondNs + 1, 10, kSecondNs));
  EXPECT_FALSE(watch.Expired(true, 0, 20, kSecondNs));  // renewed
}

TEST(LeaseWatchTest, AnUnreadableLeaseExpiresALeaseAfterTheLastGoodRead) {
  LeaseWatch watch;
  EXPECT_FALSE(watch.Expired(true, 0, 5 * kSecondNs, kSecondNs));
  EXPECT_FALSE(watch.Expired(false, 0, 5 * kSecondNs + kSecondNs / 2, kSecondNs));
  EXPECT_FALSE(watch.Expired(false, 0, 6 * kSecondNs, kSecondNs));  // a brief absence
  EXPECT_TRUE(watch.Expired(false, 0, 6 * kSecondNs + 1, kSecondNs));
  // Readable again: counted from this read.
  EXPECT_FALSE(watch.Expired(true, 0, 7 * kSecondNs, kSecondNs));
  EXPECT_FALSE(watch.Expired(false, 0, 8 * kSecondNs, kSecondNs));
  EXPECT_TRUE(watch.Expired(false, 0, 8 * kSecondNs + 1, kSecondNs));
}

TEST(LeaseWatchTest, ALeaseNeverReadExpiresALeaseAfterTheFirstLook) {
  LeaseWatch watch;
  EXPECT_FALSE(watch.Expired(false, 0, 3 * kSecondNs, kSecondNs));
  EXPECT_FALSE(watch.Expired(false, 0, 4 * kSecondNs, kSecondNs));
  EXPECT_TRUE(watch.Expired(false, 0, 4 * kSecondNs + 1, kSecondNs));
}

constexpr std::chrono::milliseconds kLease{1000};

// Writes a fresh lease file beside `path` and renames it over `path`.
void RenewByRename(const std::string& path) {
  const std::string next = path + ".next";
  std::ofstream(next) << "lease\n";
  ASSERT_EQ(std::rename(next.c_str(), path.c_str()), 0) << std::strerror(errno);
}

// The agent's data directory (and so its lease file) is deleted while a task runs: the
// task fences itself about a lease later rather than running on forever.
TEST_F(LauncherTest, ATaskWhoseLeaseFileIsDeletedFencesItself) {
  TestLauncher launcher(NoCgroups());
  const std::string lease = root_ + "/lease";
  RenewByRename(lease);
  LaunchSpec spec = Shell("orphaned", "echo ready; exec sleep 100");
  spec.lease_file = lease;
  spec.lease_us = std::chrono::microseconds(kLease).count();
  ASSERT_TRUE(launcher.Start(spec).ok());
  ASSERT_TRUE(WaitForText(spec.log_path, "ready\n"));
  RenewByRename(lease);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the shim has read it
  ASSERT_TRUE(launcher.Running("orphaned"));
  ASSERT_EQ(::unlink(lease.c_str()), 0);
  const auto deleted = Clock::now();
  auto exit = WaitExit(launcher, "orphaned");
  ASSERT_TRUE(exit.has_value()) << "the task outlived its deleted lease";
  const auto waited = Clock::now() - deleted;
  EXPECT_TRUE(exit->fenced);
  EXPECT_EQ(exit->signal, SIGKILL);
  EXPECT_EQ(End("orphaned"), "fenced");
  // Not at once (the last good read was at most a poll before the deletion), and about
  // a lease later.
  EXPECT_GE(waited, kLease - std::chrono::milliseconds(150));
  EXPECT_LE(waited, 3 * kLease);
}

// The lease file replaced by rename again and again, and missing now and then for less
// than a lease: the task runs on.
TEST_F(LauncherTest, ALeaseReplacedOrBrieflyMissingDoesNotFence) {
  TestLauncher launcher(NoCgroups());
  const std::string lease = root_ + "/lease";
  RenewByRename(lease);
  LaunchSpec spec = Shell("renewed", "echo ready; exec sleep 100");
  spec.lease_file = lease;
  spec.lease_us = std::chrono::microseconds(kLease).count();
  ASSERT_TRUE(launcher.Start(spec).ok());
  ASSERT_TRUE(WaitForText(spec.log_path, "ready\n"));
  for (int round = 0; round < 6; ++round) {
    for (int i = 0; i < 5; ++i) {
      RenewByRename(lease);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_EQ(::unlink(lease.c_str()), 0);
    std::this_thread::sleep_for(kLease / 4);
    RenewByRename(lease);
  }
  EXPECT_TRUE(launcher.Running("renewed"));
  EXPECT_TRUE(launcher.Reap().empty());
  EXPECT_EQ(End("renewed"), "");
  ASSERT_TRUE(launcher.Kill("renewed").ok());
  auto exit = WaitExit(launcher, "renewed");
  ASSERT_TRUE(exit.has_value());
  EXPECT_FALSE(exit->fenced);
}

class ShimAsRootTest : public LauncherTest {
 protected:
  void SetUp() override {
    if (geteuid() != 0) {
      GTEST_SKIP() << "needs root (uid switching)";
    }
    LauncherTest::SetUp();
    ASSERT_EQ(chmod(root_.c_str(), 0755), 0);  // the tenant may traverse it
  }
};

TEST_F(ShimAsRootTest, TaskRunsAsTheTenant) {
  TestLauncher launcher(NoCgroups());
  std::string secret = root_ + "/secret";
  std::ofstream(secret) << "root only\n";
  ASSERT_EQ(chmod(secret.c_str(), 0600), 0);
  LaunchSpec spec = Shell("tenant",
                          "id -u; id -g; id -G; grep NoNewPrivs /proc/self/status; "
                          "exec cat " +
                              secret);
  spec.uid = kTenant;
  spec.gid = kTenant;
  spec.working_dir = "/";
  ASSERT_TRUE(launcher.Start(spec).ok());
  auto exit = WaitExit(launcher, "tenant");
  ASSERT_TRUE(exit.has_value());
  EXPECT_NE(exit->exit_code, 0);
  EXPECT_EQ(exit->signal, 0);
  std::string log = ReadAll(spec.log_path);
  EXPECT_EQ(log.rfind("200123\n200123\n200123\nNoNewPrivs:\t1\n", 0), 0u) << log;
  EXPECT_EQ(log.find("root only"), std::string::npos) << log;
  EXPECT_NE(log.find("Permission denied"), std::string::npos) << log;
}

TEST_F(ShimAsRootTest, AnotherUidNeedsRoot) {
  // A launcher that is not root, in a child that gave up root.
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) {
      _exit(2);
    }
    TaskLauncher launcher(NoCgroups());
    LaunchSpec spec = Shell("other", "true");
    spec.state_file = "/tmp/other.task";  // never created: refused before
    spec.uid = kTenant;
    spec.gid = kTenant;
    auto started = launcher.Start(spec);
    _exit(started.status().code() == StatusCode::kPermissionDenied &&
                  started.status().message().find("not root") != std::string::npos
              ? 0
              : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST_F(ShimAsRootTest, HiddenDevicesCannotBeOpened) {
  std::string dev = root_ + "/dev";
  ASSERT_EQ(mkdir(dev.c_str(), 0755), 0);
  for (const char* name : {"nvidia0", "nvidia1"}) {
    std::string path = dev + "/" + name;
    ASSERT_EQ(mknod(path.c_str(), S_IFCHR | 0666, makedev(1, 3)), 0) << std::strerror(errno);
    ASSERT_EQ(chmod(path.c_str(), 0666), 0);
  }
  TestLauncher launcher(NoCgroups());
  LaunchSpec spec = Shell("fenced", "cat " + dev + "/nvidia0 && echo open0=ok; cat " + dev +
                                        "/nvidia1 && echo open1=ok; true");
  spec.uid = kTenant;
  spec.gid = kTenant;
  spec.working_dir = "/";
  spec.hidden_devices = {dev + "/nvidia1", dev + "/nvidia7"};  // nvidia7 does not exist
  ASSERT_TRUE(launcher.Start(spec).ok());
  auto exit = WaitExit(launcher, "fenced");
  ASSERT_TRUE(exit.has_value());
  std::string log = ReadAll(spec.log_path);
  EXPECT_NE(log.find("open0=ok\n"), std::string::npos) << log;
  EXPECT_EQ(log.find("open1=ok"), std::string::npos) << log;
  EXPECT_NE(log.find("Permission denied"), std::string::npos) << log;

  // The agent's view is unchanged.
  struct stat st {};
  ASSERT_EQ(stat((dev + "/nvidia1").c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(st.st_rdev, makedev(1, 3));
  EXPECT_EQ(ReadAll("/proc/self/mountinfo").find(dev), std::string::npos);

  // A path that cannot be covered fails Start, naming it.
  LaunchSpec bad = Shell("unfenceable", "true");
  bad.hidden_devices = {dev};  // a directory: a file cannot be mounted over it
  auto started = launcher.Start(bad);
  EXPECT_EQ(started.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(started.status().message().find(dev), std::string::npos) << started.status().ToString();
  EXPECT_FALSE(launcher.Running("unfenceable"));
}

}  // namespace
}  // namespace tessera
