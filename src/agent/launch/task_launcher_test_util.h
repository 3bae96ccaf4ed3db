// Shared by the launcher's tests: a temporary directory per test, task specs, bounded
// polling of real processes and files.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/launch/task_launcher.h"
#include "agent/launch/task_state_file.h"
#include "base/strings.h"

namespace tessera::launcher_testing {

using Clock = std::chrono::steady_clock;

inline constexpr std::chrono::milliseconds kDeadline{5000};
inline constexpr std::chrono::milliseconds kPoll{5};

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

inline int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// True when `pid` no longer runs: gone, or a zombie nobody has reaped yet.
inline bool ProcessGone(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) {
    return true;
  }
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  size_t paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() || text[paren + 2] == 'Z' ||
         text[paren + 2] == 'X';
}

inline bool WaitUntilGone(int pid) {
  for (auto end = Clock::now() + kDeadline; Clock::now() < end;) {
    if (ProcessGone(pid)) {
      return true;
    }
    std::this_thread::sleep_for(kPoll);
  }
  return ProcessGone(pid);
}

// Kills what a test leaves running: the launcher's destructor does not.
class TestLauncher : public TaskLauncher {
 public:
  using TaskLauncher::TaskLauncher;
  ~TestLauncher() {
    KillAll();
    (void)Reap();
  }
};

class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tessera-launch-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override {
    // A test that failed half-way may leave a task that no launcher knows: adopt and end it.
    std::error_code ec;
    {
      TaskLauncher sweeper(NoCgroups());
      for (const auto& entry : std::filesystem::directory_iterator(root_ + "/state", ec)) {
        (void)sweeper.Adopt(entry.path().filename().string(), entry.path().string());
      }
      sweeper.KillAll();
      (void)sweeper.Reap();
    }
    std::filesystem::remove_all(root_, ec);
  }

  LaunchSpec Shell(const std::string& id, const std::string& script) {
    LaunchSpec spec;
    spec.id = id;
    spec.argv = {"/bin/sh", "-c", script};
    spec.log_path = root_ + "/logs/" + id + ".log";
    spec.state_file = StateFile(id);
    return spec;
  }

  std::string StateFile(const std::string& id) { return root_ + "/state/" + id + ".task"; }

  // How the task ended, as its state file says ("exit 0", "signal 9", "fenced"); "" when
  // it does not say.
  std::string End(const std::string& id) { return ReadTaskState(StateFile(id)).end; }

  // Polls until the state file says how the task ended.
  bool WaitForEnd(const std::string& id) {
    for (auto end = Clock::now() + kDeadline; Clock::now() < end;) {
      if (!End(id).empty()) {
        return true;
      }
      std::this_thread::sleep_for(kPoll);
    }
    return false;
  }

  // The shim line's fields: shim pid, leader pid, shim start time.
  std::vector<int64_t> ShimRecord(const std::string& id) {
    std::vector<int64_t> fields;
    const std::string text = ReadTaskState(StateFile(id)).shim;
    for (std::string_view field : Split(Trim(text), ' ')) {
      auto value = ParseInt64(field);
      fields.push_back(value.ok() ? *value : -1);
    }
    return fields;
  }

  // Polls Reap until `id` ends or the deadline passes; keeps other exits for later.
  std::optional<TaskExit> WaitExit(TaskLauncher& launcher, const std::string& id) {
    for (auto end = Clock::now() + kDeadline;;) {
      for (TaskExit& exit : launcher.Reap()) {
        exits_[exit.id] = exit;
      }
      if (auto it = exits_.find(id); it != exits_.end()) {
        return it->second;
      }
      if (Clock::now() >= end) {
        return std::nullopt;
      }
      std::this_thread::sleep_for(kPoll);
    }
  }

  // Polls until the file at `path` contains `text`.
  bool WaitForText(const std::string& path, const std::string& text) {
    for (auto end = Clock::now() + kDeadline; Clock::now() < end;) {
      if (ReadAll(path).find(text) != std::string::npos) {
        return true;
      }
      std::this_thread::sleep_for(kPoll);
    }
    return false;
  }

  int ReadPid(const std::string& path) {
    if (!WaitForText(path, "\n")) {
      return -1;
    }
    auto pid = ParseInt64(ReadAll(path));
    return pid.ok() ? static_cast<int>(*pid) : -1;
  }

  // The pids of a task that StartWithChild started: its leader and its background
  // `sleep` (-1: not known).
  struct Forked {
    int leader = -1;
    int child = -1;
  };

  // Starts task `id` as `sleep SECONDS & echo $! > FILE; THEN` and reads the child's pid
  // from FILE. A failed start is a test failure.
  Forked StartWithChild(TaskLauncher& launcher, const std::string& id, const std::string& seconds,
                        const std::string& then) {
    const std::string pid_file = root_ + "/" + id + ".child.pid";
    auto pid =
        launcher.Start(Shell(id, "sleep " + seconds + " & echo $! > " + pid_file + "; " + then));
    if (!pid.ok()) {
      ADD_FAILURE() << pid.status().ToString();
      return {};
    }
    return {*pid, ReadPid(pid_file)};
  }

  // Kills the shim of task `id` with SIGKILL; its pid, or -1 (a test failure) when its
  // state file names no shim or the kill fails.
  int KillShim(const std::string& id) {
    std::vector<int64_t> shim = ShimRecord(id);
    if (shim.size() != 3u || shim[0] <= 1) {
      ADD_FAILURE() << "no shim pid in " << StateFile(id);
      return -1;
    }
    const int pid = static_cast<int>(shim[0]);
    if (kill(pid, SIGKILL) != 0) {
      ADD_FAILURE() << "kill " << pid << ": " << std::strerror(errno);
      return -1;
    }
    return pid;
  }

  // The suite runs twice (CMakeLists.txt): shims forked, and shims spawned from the
  // tessera-shim that TESSERA_TEST_SHIM_PROGRAM names.
  static TaskLauncher::Options WithShim(TaskLauncher::Options options) {
    if (const char* program = std::getenv("TESSERA_TEST_SHIM_PROGRAM")) {  // NOLINT
      options.shim_program = program;
    }
    return options;
  }

  TaskLauncher::Options NoCgroups() {
    TaskLauncher::Options options;
    options.use_cgroups = false;
    return WithShim(options);
  }

  std::string root_;
  std::map<std::string, TaskExit> exits_;
};

}  // namespace tessera::launcher_testing
