#include "agent/launch/task_launcher.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "agent/launch/cgroups.h"
#include "agent/launch/checkpoint_protocol.h"
#include "agent/launch/cpu_topology.h"
#include "agent/launch/task_launcher_test_util.h"
#include "base/strings.h"

namespace tessera {
namespace {

using launcher_testing::Clock;
using launcher_testing::kDeadline;
using launcher_testing::kPoll;
using launcher_testing::LauncherTest;
using launcher_testing::NowUs;
using launcher_testing::ProcessGone;
using launcher_testing::ReadAll;
using launcher_testing::TestLauncher;
using launcher_testing::WaitUntilGone;

TEST_F(LauncherTest, EnvironmentIsTheBasePlusTheSpecOnly) {
  ASSERT_EQ(setenv("TESSERA_LEAK_CANARY", "must-not-leak", 1), 0);
  TestLauncher launcher(NoCgroups());
  LaunchSpec spec;
  spec.id = "1.0.0";
  spec.argv = {"env"};  // found through PATH
  spec.env = {{"TESSERA_RANK", "3"}, {"LANG", "C.UTF-8"}};
  spec.log_path = root_ + "/env.log";
  spec.state_file = StateFile("1.0.0");
  auto pid = launcher.Start(spec);
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  EXPECT_GT(*pid, 0);
  auto exit = WaitExit(launcher, "1.0.0");
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code, 0);
  EXPECT_EQ(exit->pid, *pid);
  unsetenv("TESSERA_LEAK_CANARY");

  std::string log = ReadAll(spec.log_path);
  std::set<std::string> names;
  for (std::string_view line : Split(log, '\n')) {
    if (!line.empty()) {
      names.insert(std::string(line.substr(0, line.find('='))));
    }
  }
  EXPECT_NE(log.find("TESSERA_RANK=3\n"), std::string::npos) << log;
  EXPECT_NE(log.find("LANG=C.UTF-8\n"), std::string::npos) << log;  // the spec wins
  EXPECT_EQ(log.find("TESSERA_LEAK_CANARY"), std::string::npos) << log;
  const char* path = getenv("PATH");
  EXPECT_NE(log.find(std::string("PATH=") + (path ? path : "/usr/local/bin:/usr/bin:/bin")),
            std::string::npos);
  const std::set<std::string> allowed = {"PATH", "HOME",   "USER",        "LANG",
                                         "TZ",   "TMPDIR", "TESSERA_RANK"};
  for (const std::string& name : names) {
    EXPECT_TRUE(allowed.count(name) != 0) << "unexpected variable " << name;
  }
}

TEST_F(LauncherTest, ExitCodesAndSignalsAreReported) {
  TestLauncher launcher(NoCgroups());
  ASSERT_TRUE(launcher.Start(Shell("exit7", "exit 7")).ok());
  ASSERT_TRUE(launcher.Start(Shell("ok", "true")).ok());
  ASSERT_TRUE(launcher.Start(Shell("killed", "kill -KILL $$")).ok());
  auto exit7 = WaitExit(launcher, "exit7");
  auto ok = WaitExit(launcher, "ok");
  auto killed = WaitExit(launcher, "killed");
  ASSERT_TRUE(exit7 && ok && killed);
  EXPECT_EQ(exit7->exit_code, 7);
  EXPECT_EQ(exit7->signal, 0);
  EXPECT_EQ(ok->exit_code, 0);
  EXPECT_EQ(ok->signal, 0);
  EXPECT_EQ(killed->signal, SIGKILL);
  EXPECT_EQ(killed->exit_code, -1);
  EXPECT_FALSE(launcher.Running("exit7"));
  EXPECT_TRUE(launcher.Reap().empty());  // each exit is reported once
}

TEST_F(LauncherTest, SignalReachesTheWholeProcessGroup) {
  TestLauncher launcher(NoCgroups());
  const Forked task = StartWithChild(launcher, "group", "30", "wait");
  ASSERT_GT(task.leader, 0);
  const int grandchild = task.child;
  ASSERT_GT(grandchild, 0);
  EXPECT_EQ(getpgid(grandchild), task.leader);
  EXPECT_TRUE(launcher.Running("group"));
  EXPECT_TRUE(launcher.Signal("group", 0).ok());

  ASSERT_TRUE(launcher.Signal("group", SIGTERM).ok());
  auto exit = WaitExit(launcher, "group");
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->signal, SIGTERM);
  EXPECT_TRUE(WaitUntilGone(grandchild));
  EXPECT_FALSE(launcher.Running("group"));
  EXPECT_EQ(launcher.Signal("group", SIGTERM).code(), StatusCode::kNotFound);
}

TEST_F(LauncherTest, LeaderExitEndsTheRestOfTheTask) {
  TestLauncher launcher(NoCgroups());
  const Forked task = StartWithChild(launcher, "leader", "30", "exit 3");
  ASSERT_GT(task.leader, 0);
  const int straggler = task.child;
  ASSERT_GT(straggler, 0);
  auto exit = WaitExit(launcher, "leader");
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code, 3);
  EXPECT_TRUE(WaitUntilGone(straggler));
}

TEST_F(LauncherTest, TaskCheckpointsOnPreemption) {
  TestLauncher launcher(NoCgroups());
  std::string ckpt = root_ + "/ckpt";
  ASSERT_TRUE(ClearMarkers(ckpt).ok());
  LaunchSpec spec = Shell("train", R"(
    m="$TESSERA_CHECKPOINT_DIR/.tessera"
    trap '{ read deadline; read reason; } < "$m/preempt"; echo "deadline=$deadline reason=$reason"; echo step > "$TESSERA_CHECKPOINT_DIR/state"; touch "$m/checkpointed"; exit 0' TERM
    echo ready
    while :; do sleep 0.05; done)");
  spec.env[std::string(kCheckpointDirEnv)] = ckpt;
  ASSERT_TRUE(launcher.Start(spec).ok());
  ASSERT_TRUE(WaitForText(spec.log_path, "ready\n"));

  int64_t asked = NowUs();
  EXPECT_FALSE(CheckpointReportedSince(ckpt, asked - 3'600'000'000));
  int64_t deadline = asked + 30'000'000;
  ASSERT_TRUE(WritePreemptMarker(ckpt, deadline, "preempted by job 77").ok());
  ASSERT_TRUE(launcher.Signal("train", SIGTERM).ok());

  auto exit = WaitExit(launcher, "train");
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code, 0);
  EXPECT_EQ(exit->signal, 0);
  EXPECT_TRUE(CheckpointReportedSince(ckpt, asked));
  EXPECT_NE(ReadAll(spec.log_path)
                .find("deadline=" + std::to_string(deadline) + " reason=preempted by job 77"),
            std::string::npos)
      << ReadAll(spec.log_path);

  // The next attempt starts clean but keeps the checkpoint data.
  ASSERT_TRUE(ClearMarkers(ckpt).ok());
  EXPECT_FALSE(CheckpointReportedSince(ckpt, asked));
  EXPECT_EQ(ReadAll(ckpt + "/state"), "step\n");
}

TEST_F(LauncherTest, LogsAreAppendedAcrossRuns) {
  TestLauncher launcher(NoCgroups());
  std::string log = root_ + "/deep/nested/task.log";
  LaunchSpec first = Shell("1.0.0", "echo first; pwd");
  first.log_path = log;
  ASSERT_TRUE(launcher.Start(first).ok());
  ASSERT_TRUE(WaitExit(launcher, "1.0.0").has_value());
  LaunchSpec second = Shell("1.0.1", "echo second >&2; read x; echo \"stdin=[$x]\"");
  second.log_path = log;
  ASSERT_TRUE(launcher.Start(second).ok());
  ASSERT_TRUE(WaitExit(launcher, "1.0.1").has_value());
  // The working directory defaults to the log's; stdin is empty.
  std::string dir = std::filesystem::canonical(root_ + "/deep/nested").string();
  EXPECT_EQ(ReadAll(log), "first\n" + dir + "\nsecond\nstdin=[]\n");
}

TEST_F(LauncherTest, WorkingDirectoryIsHonoured) {
  TestLauncher launcher(NoCgroups());
  std::filesystem::create_directories(root_ + "/work");
  LaunchSpec spec = Shell("wd", "pwd");
  spec.working_dir = root_ + "/work";
  ASSERT_TRUE(launcher.Start(spec).ok());
  ASSERT_TRUE(WaitExit(launcher, "wd").has_value());
  EXPECT_EQ(ReadAll(spec.log_path), std::filesystem::canonical(root_ + "/work").string() + "\n");
}

TEST_F(LauncherTest, FailuresBeforeExecAreErrorsOfStart) {
  TestLauncher launcher(NoCgroups());
  LaunchSpec missing = Shell("missing", "");
  missing.argv = {"tessera-no-such-program-4711", "--flag"};
  auto started = launcher.Start(missing);
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.status().code(), StatusCode::kNotFound) << started.status().ToString();
  EXPECT_NE(started.status().message().find("tessera-no-such-program-4711"), std::string::npos);

  std::string script = root_ + "/not-executable.sh";
  std::ofstream(script) << "#!/bin/sh\nexit 0\n";
  LaunchSpec denied = Shell("denied", "");
  denied.argv = {script};
  EXPECT_EQ(launcher.Start(denied).status().code(), StatusCode::kPermissionDenied);

  LaunchSpec no_dir = Shell("nodir", "true");
  no_dir.working_dir = root_ + "/does/not/exist";
  EXPECT_EQ(launcher.Start(no_dir).status().code(), StatusCode::kNotFound);

  LaunchSpec bad_cpu = Shell("badcpu", "true");
  bad_cpu.cpus = {kMaxCpuId - 1};
  EXPECT_EQ(launcher.Start(bad_cpu).status().code(), StatusCode::kInvalidArgument);

  EXPECT_FALSE(launcher.Running("missing"));
  EXPECT_TRUE(launcher.Reap().empty());  // no phantom exits
  // The id is free again after a failed start.
  missing.argv = {"true"};
  EXPECT_TRUE(launcher.Start(missing).ok());
  EXPECT_TRUE(WaitExit(launcher, "missing").has_value());
}

TEST_F(LauncherTest, InvalidSpecsAreRejected) {
  TestLauncher launcher(NoCgroups());
  LaunchSpec spec = Shell("ok", "true");
  spec.argv.clear();
  EXPECT_EQ(launcher.Start(spec).status().code(), StatusCode::kInvalidArgument);
  for (const char* bad_id : {"", "..", ".hidden", "a/b", "a b"}) {
    LaunchSpec s = Shell("x", "true");
    s.id = bad_id;
    EXPECT_EQ(launcher.Start(s).status().code(), StatusCode::kInvalidArgument) << bad_id;
  }
  LaunchSpec bad_env = Shell("env", "true");
  bad_env.env["A=B"] = "c";
  EXPECT_EQ(launcher.Start(bad_env).status().code(), StatusCode::kInvalidArgument);
  LaunchSpec no_log = Shell("nolog", "true");
  no_log.log_path.clear();
  EXPECT_EQ(launcher.Start(no_log).status().code(), StatusCode::kInvalidArgument);
  LaunchSpec negative = Shell("neg", "true");
  negative.memory_mib = -1;
  EXPECT_EQ(launcher.Start(negative).status().code(), StatusCode::kInvalidArgument);
  LaunchSpec no_state = Shell("nostate", "true");
  no_state.state_file.clear();
  EXPECT_EQ(launcher.Start(no_state).status().code(), StatusCode::kInvalidArgument);
  LaunchSpec uid_only = Shell("uidonly", "true");
  uid_only.uid = 1000;
  EXPECT_EQ(launcher.Start(uid_only).status().code(), StatusCode::kInvalidArgument);
  LaunchSpec bad_uid = Shell("baduid", "true");
  bad_uid.uid = 1LL << 32;
  bad_uid.gid = 0;
  EXPECT_EQ(launcher.Start(bad_uid).status().code(), StatusCode::kInvalidArgument);
  LaunchSpec relative_device = Shell("reldev", "true");
  relative_device.hidden_devices = {"dev/nvidia0"};
  EXPECT_EQ(launcher.Start(relative_device).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(launcher.Signal("nobody", SIGTERM).code(), StatusCode::kNotFound);
  EXPECT_EQ(launcher.Kill("nobody").code(), StatusCode::kNotFound);
  EXPECT_EQ(launcher.Signal("nobody", 1000).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(launcher.Adopt("bad/id", root_).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(launcher.Adopt("nobody", root_ + "/no-state").code(), StatusCode::kNotFound);
  EXPECT_TRUE(launcher.Reap().empty());
}

TEST_F(LauncherTest, DuplicateIdIsRejectedUntilReaped) {
  TestLauncher launcher(NoCgroups());
  ASSERT_TRUE(launcher.Start(Shell("dup", "sleep 30")).ok());
  EXPECT_EQ(launcher.Start(Shell("dup", "true")).status().code(), StatusCode::kAlreadyExists);
  ASSERT_TRUE(launcher.Signal("dup", SIGKILL).ok());
  auto exit = WaitExit(launcher, "dup");
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->signal, SIGKILL);
  EXPECT_TRUE(launcher.Start(Shell("dup", "true")).ok());
}

TEST_F(LauncherTest, AffinityIsApplied) {
  TestLauncher launcher(NoCgroups());
  LaunchSpec spec = Shell("pinned", "cat /proc/self/status | grep Cpus_allowed_list");
  spec.cpus = {0};
  ASSERT_TRUE(launcher.Start(spec).ok());
  auto exit = WaitExit(launcher, "pinned");
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code, 0);
  EXPECT_EQ(ReadAll(spec.log_path), "Cpus_allowed_list:\t0\n");
}

TEST_F(LauncherTest, KillAllEndsRunningTasks) {
  TestLauncher launcher(NoCgroups());
  const Forked task = StartWithChild(launcher, "forever", "30", "wait");
  const int leader = task.leader;
  ASSERT_GT(leader, 0);
  const int grandchild = task.child;
  ASSERT_GT(grandchild, 0);
  ASSERT_FALSE(ProcessGone(leader));
  launcher.KillAll();
  // Reaped by the shim, which has exited: not even a zombie is left.
  EXPECT_EQ(kill(leader, 0), -1);
  EXPECT_EQ(errno, ESRCH);
  EXPECT_TRUE(ProcessGone(grandchild));
  std::vector<TaskExit> exits = launcher.Reap();
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].signal, SIGKILL);
  EXPECT_TRUE(exits[0].status_known);
  EXPECT_EQ(End("forever"), "signal 9");
}

TEST_F(LauncherTest, TasksOutliveTheThreadThatStartedThem) {
  // The parent-death signal follows the forking thread; a caller's thread that ends must
  // not take its tasks along.
  TestLauncher launcher(NoCgroups());
  LaunchSpec spec = Shell("survivor", "sleep 0.3; echo survived");
  Status started;
  std::thread caller([&] { started = launcher.Start(spec).status(); });
  caller.join();
  ASSERT_TRUE(started.ok()) << started.ToString();
  auto exit = WaitExit(launcher, "survivor");
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->signal, 0);
  EXPECT_EQ(exit->exit_code, 0);
  EXPECT_EQ(ReadAll(spec.log_path), "survived\n");
}

TEST_F(LauncherTest, ConcurrentStartsAndReaps) {
  TestLauncher launcher(NoCgroups());
  constexpr int kThreads = 4;
  constexpr int kPerThread = 4;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        int code = t * kPerThread + i;
        if (!launcher.Start(Shell("c." + std::to_string(code), "exit " + std::to_string(code)))
                 .ok()) {
          ++failures[static_cast<size_t>(t)];
        }
      }
    });
  }
  // Reap on this thread while the others start.
  std::map<std::string, TaskExit> seen;
  for (auto end = Clock::now() + kDeadline;
       seen.size() < kThreads * kPerThread && Clock::now() < end;) {
    for (TaskExit& exit : launcher.Reap()) {
      EXPECT_TRUE(seen.emplace(exit.id, exit).second) << "reported twice: " << exit.id;
    }
    std::this_thread::sleep_for(kPoll);
  }
  for (auto& thread : threads) {
    thread.join();
  }
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(failures[static_cast<size_t>(t)], 0);
  }
  ASSERT_EQ(seen.size(), static_cast<size_t>(kThreads * kPerThread));
  for (int code = 0; code < kThreads * kPerThread; ++code) {
    const TaskExit& exit = seen.at("c." + std::to_string(code));
    EXPECT_EQ(exit.exit_code, code);
    EXPECT_EQ(exit.signal, 0);
  }
}

TEST_F(LauncherTest, UnusableCgroupParentWarnsOnceAndRunsWithoutLimits) {
  TaskLauncher::Options options;
  options.cgroup_parent = root_ + "/not-a-cgroup";
  TestLauncher launcher(WithShim(options));
  std::vector<std::string> warnings = launcher.Warnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("CPU and memory limits are not enforced"), std::string::npos)
      << warnings[0];
  LaunchSpec spec = Shell("limited", "exit 0");
  spec.cpu_milli = 500;
  spec.memory_mib = 64;
  ASSERT_TRUE(launcher.Start(spec).ok());
  EXPECT_EQ(launcher.CgroupOf("limited"), "");
  auto exit = WaitExit(launcher, "limited");
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code, 0);
  EXPECT_EQ(launcher.Warnings().size(), 1u);
}

TEST_F(LauncherTest, DisabledCgroupsWarnOnlyWhenLimitsAreAsked) {
  TestLauncher launcher(NoCgroups());
  EXPECT_TRUE(launcher.Warnings().empty());
  for (const char* id : {"a", "b"}) {
    LaunchSpec spec = Shell(id, "true");
    spec.memory_mib = 64;
    ASSERT_TRUE(launcher.Start(spec).ok());
    ASSERT_TRUE(WaitExit(launcher, id).has_value());
  }
  EXPECT_EQ(
      launcher.Warnings(),
      std::vector<std::string>{"cgroups are disabled: CPU and memory limits are not enforced"});
}

TEST_F(LauncherTest, CgroupLimitsAreSetWhenTheMachineAllows) {
  TestLauncher launcher;  // auto: a child of this process's own cgroup
  LaunchSpec spec = Shell("7.0.0", "cat /proc/self/cgroup; sleep 30");
  spec.cpu_milli = 500;
  spec.memory_mib = 64;
  auto pid = launcher.Start(spec);
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();  // limits or not, the task runs
  std::string dir = launcher.CgroupOf("7.0.0");
  std::vector<std::string> warnings = launcher.Warnings();
  if (dir.empty() || !std::filesystem::exists(dir + "/memory.max")) {
    ASSERT_TRUE(launcher.Signal("7.0.0", SIGKILL).ok());
    ASSERT_TRUE(WaitExit(launcher, "7.0.0").has_value());
    ASSERT_FALSE(warnings.empty()) << "no cgroup and no warning saying why";
    GTEST_SKIP() << "cgroup v2 limits are not available here: " << Join(warnings, "; ");
  }
  EXPECT_EQ(ReadAll(dir + "/memory.max"), "67108864\n");
  EXPECT_EQ(ReadAll(dir + "/cpu.max"), "50000 100000\n");
  EXPECT_NE(ReadAll(dir + "/cgroup.procs").find(std::to_string(*pid)), std::string::npos);
  ASSERT_TRUE(WaitForText(spec.log_path, "/task-7.0.0\n"));
  ASSERT_TRUE(launcher.Signal("7.0.0", SIGKILL).ok());
  ASSERT_TRUE(WaitExit(launcher, "7.0.0").has_value());
  bool removed = false;
  for (auto end = Clock::now() + kDeadline; !removed && Clock::now() < end;) {
    removed = !std::filesystem::exists(dir);
    if (!removed) {
      std::this_thread::sleep_for(kPoll);
      (void)launcher.Reap();  // retries the removal
    }
  }
  EXPECT_TRUE(removed) << dir;
}

// Containment through a real cgroup v2 directory, which even a hybrid v1/v2 host offers:
// the task is placed in its cgroup before exec, a process that escaped its process group
// is still killed when the task ends, and the cgroup is removed.
TEST_F(LauncherTest, CgroupContainsProcessesThatLeaveTheGroup) {
  auto mount = FindCgroup2Mount(ReadAll("/proc/self/mountinfo"));
  auto own_path = ParseCgroupV2Path(ReadAll("/proc/self/cgroup"));
  if (!mount.ok() || !own_path.ok()) {
    GTEST_SKIP() << "no cgroup v2 here: " << mount.status().ToString() << " "
                 << own_path.status().ToString();
  }
  auto own = CgroupDirectory(*mount, *own_path);
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  std::string parent = *own + "/tessera-test-" + std::to_string(getpid());
  if (mkdir(parent.c_str(), 0755) != 0) {
    GTEST_SKIP() << "cgroup v2 not writable at " << *own << ": " << std::strerror(errno);
  }
  std::string dir;
  std::string pid_file = root_ + "/escaped.pid";
  int escaped = -1;
  {
    TaskLauncher::Options options;
    options.cgroup_parent = parent;
    options.cgroups_without_controllers = true;
    TestLauncher launcher(WithShim(options));
    LaunchSpec spec = Shell("9.1.0", "cat /proc/self/cgroup; setsid sh -c 'echo $$ > " + pid_file +
                                         "; exec sleep 30' & wait");
    auto pid = launcher.Start(spec);
    ASSERT_TRUE(pid.ok()) << pid.status().ToString() << " " << Join(launcher.Warnings(), "; ");
    dir = launcher.CgroupOf("9.1.0");
    ASSERT_EQ(dir, parent + "/task-9.1.0") << Join(launcher.Warnings(), "; ");
    escaped = ReadPid(pid_file);
    ASSERT_GT(escaped, 0);
    EXPECT_NE(getpgid(escaped), *pid);  // outside the task's process group
    EXPECT_NE(ReadAll(dir + "/cgroup.procs").find(std::to_string(escaped)), std::string::npos);
    ASSERT_TRUE(WaitForText(spec.log_path, "/task-9.1.0\n"));

    ASSERT_TRUE(launcher.Signal("9.1.0", SIGKILL).ok());  // reaches the leader's group only
    ASSERT_TRUE(WaitExit(launcher, "9.1.0").has_value());
    EXPECT_TRUE(WaitUntilGone(escaped));
    bool removed = false;
    for (auto end = Clock::now() + kDeadline; !removed && Clock::now() < end;) {
      (void)launcher.Reap();  // retries the removal
      removed = !std::filesystem::exists(dir);
      if (!removed) {
        std::this_thread::sleep_for(kPoll);
      }
    }
    EXPECT_TRUE(removed) << dir;
  }
  if (escaped > 1 && !ProcessGone(escaped)) {
    kill(escaped, SIGKILL);
  }
  EXPECT_EQ(rmdir(parent.c_str()), 0) << std::strerror(errno);
}

}  // namespace
}  // namespace tessera
