// TaskLauncher: runs the tasks of a node as real processes, with their environment,
// CPU affinity, cgroup v2 limits, logs and signals.
//
// Contract:
// - Each task is a process group led by the process Start forks (setpgid), so a signal
//   reaches everything the task spawned unless it left the group on purpose. stdin is
//   /dev/null; stdout and stderr are appended to LaunchSpec::log_path.
// - The environment is a minimal base taken from the agent once, at construction (PATH,
//   HOME, USER, LANG, TZ, TMPDIR where set; PATH defaults to /usr/local/bin:/usr/bin:/bin),
//   overlaid with LaunchSpec::env. Nothing else of the agent's environment leaks in.
//   argv[0] without a '/' is searched in the task's PATH (empty PATH entries are skipped);
//   with a '/', a relative argv[0] is relative to the working directory.
// - Failures before the program runs (no such program, permission, bad working directory,
//   CPUs that do not exist) are errors of Start, carried from the child by a close-on-exec
//   pipe; Start never reports them as an exit code 127.
// - A task ends when its leader exits. Reap then kills what is left of its process group
//   and, with cgroups, of its cgroup (which catches processes that left the group), and
//   removes the cgroup.
// - Tasks die with the agent: each leader gets PR_SET_PDEATHSIG SIGKILL, and the forks are
//   made by a thread the launcher owns for its whole life (the death signal follows the
//   forking thread, not the process). Grandchildren have no death signal; cgroups left
//   behind by a crashed agent are emptied and removed when the next launcher starts.
//   Tasks do not survive an agent restart: the controller re-runs them from checkpoints.
// - The destructor kills (SIGKILL to the group) and reaps every task not yet reaped.
// - Cgroups (Options::use_cgroups): see cgroups.h. When they are not usable the launcher
//   records a warning once and runs tasks without CPU and memory limits.
// - Children are waited for by pid, never with waitpid(-1), so other code of the agent may
//   run its own child processes.
// Thread safety: all public methods are thread-safe; the destructor must not race them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "agent/cgroups.h"
#include "base/status.h"

namespace tessera {

struct LaunchSpec {
  // e.g. "42.0.1" (job.task.attempt): 1-200 characters of [A-Za-z0-9._-], not starting
  // with '.'; unique among running tasks; names the cgroup ("task-42.0.1").
  std::string id;
  std::vector<std::string> argv;           // argv[0] searched in the task's PATH
  std::map<std::string, std::string> env;  // over the minimal base environment
  std::string working_dir;                 // "": the directory of log_path
  std::string log_path;                    // stdout+stderr appended (parents created)
  std::vector<int> cpus;                   // CPU affinity; empty: inherit the agent's
  int64_t cpu_milli = 0;                   // cgroup v2 cpu.max quota; 0: none
  int64_t memory_mib = 0;                  // cgroup v2 memory.max; 0: none
};

struct TaskExit {
  std::string id;
  int pid = 0;
  int exit_code = 0;  // the exit status when signal == 0; -1 otherwise
  int signal = 0;     // the signal that killed the leader; 0 when it exited
};

class TaskLauncher {
 public:
  struct Options {
    // Directory of the cgroup that receives task cgroups. "": auto, a "tessera" child of
    // the agent's own cgroup when cgroup v2 is mounted and writable.
    std::string cgroup_parent;
    // false: never touch cgroups (no limits, no warning about them).
    bool use_cgroups = true;
    // true: put tasks in cgroups even where neither the cpu nor the memory controller is
    // available (hybrid v1/v2 hosts), for containment: when a task ends, every process
    // it spawned is killed, including those that left its process group.
    bool cgroups_without_controllers = false;
  };

  TaskLauncher();  // default Options
  explicit TaskLauncher(Options options);
  ~TaskLauncher();
  TaskLauncher(const TaskLauncher&) = delete;
  TaskLauncher& operator=(const TaskLauncher&) = delete;

  // Starts the task; returns the pid of its leader (also its process group id).
  // InvalidArgument for a bad spec or CPUs that are not usable; AlreadyExists for the id
  // of a task not yet reaped; NotFound for a missing program or working directory;
  // PermissionDenied when the program cannot be executed; Internal otherwise.
  StatusOr<int> Start(const LaunchSpec& spec);

  // Sends `signal` (0 only checks) to the task's whole process group. NotFound when the
  // id is unknown or its exit was already reaped.
  Status Signal(std::string_view id, int signal);

  // Non-blocking: the tasks whose leader ended since the last call.
  std::vector<TaskExit> Reap();

  // True from a successful Start until Reap reports the task's end.
  bool Running(std::string_view id) const;

  // The task's cgroup directory; "" when it has none (cgroups unusable or disabled) or
  // the task is not running.
  std::string CgroupOf(std::string_view id) const;

  // Why isolation is weaker than asked, e.g. "cgroup v2 not writable at
  // /sys/fs/cgroup/...: CPU and memory limits are not enforced". Each reason once.
  std::vector<std::string> Warnings() const;

 private:
  struct Task {
    int pid = 0;
    std::string cgroup_dir;
  };
  class Spawner;

  void AddWarning(std::string text);  // requires mu_
  void RetryCgroupRemovals();         // requires mu_

  const Options options_;
  std::map<std::string, std::string> base_env_;
  std::unique_ptr<CgroupTree> cgroups_;  // null when use_cgroups is false
  std::unique_ptr<Spawner> spawner_;

  mutable std::mutex mu_;
  std::map<std::string, Task, std::less<>> tasks_;  // started, not yet reaped
  std::set<std::string, std::less<>> starting_;     // ids inside Start
  std::vector<std::string> pending_cgroup_removals_;
  std::vector<std::string> warnings_;
};

}  // namespace tessera
