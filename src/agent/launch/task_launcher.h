// TaskLauncher: runs the tasks of a node as real processes, with their environment,
// CPU affinity, cgroup v2 limits, logs, signals, Unix identity and device fence, such that
// they survive a restart of the agent and can be re-adopted by the next one.
//
// Contract:
// - Each task has a shim: a process the launcher forks that leads the task's session
//   (setsid), is the subreaper of everything the task spawns, and has no parent-death
//   signal, so it outlives the agent. The shim forks the task's leader, which leads its
//   own process group. stdin is /dev/null; stdout and stderr are appended to
//   LaunchSpec::log_path, which the launcher opens (so the task needs no access to it).
// - When the leader exits, the shim SIGKILLs everything left of the task: the leader's
//   process group, every process of its session, every orphan reparented to it and, with
//   cgroups, every process of the task's cgroup (which catches processes that left both
//   session and group); it reaps them (giving up after ~5 s on processes that do not
//   die) and only then appends how the task ended ("exit CODE", "signal SIG" or
//   "fenced") to the task's state file (agent/launch/task_state_file.h), fdatasync'ed, and
//   exits. That line is the durable record of how a task ended; it exists only once
//   nothing of the task is left.
// - The shim's line in the state file ("shim SHIM_PID LEADER_PID SHIM_STARTTIME", the
//   start time being field 22 of /proc/SHIM_PID/stat, which tells a live shim from a
//   reused pid) is appended by the shim itself before Start returns; a "cgroup" line
//   names the task's cgroup, if any. With them a later launcher (a restarted agent) can
//   Adopt the task. A start appends "clear" first when an earlier start of the same
//   state file left lines, and so does a start whose shim ran and then failed (one that
//   failed before its shim ran leaves at most a "cgroup" line, which adopts nothing).
// - Reap reports a task only once its shim has exited, so no process of it remains. A
//   shim that died without writing the end (SIGKILLed) leaves the task's status unknown;
//   its leftovers are killed (session, cgroup) before the task is reported.
// - The environment is a minimal base taken from the agent once, at construction (PATH,
//   HOME, USER, LANG, TZ, TMPDIR where set; PATH defaults to /usr/local/bin:/usr/bin:/bin),
//   overlaid with LaunchSpec::env. Nothing else of the agent's environment leaks in.
//   argv[0] without a '/' is searched in the task's PATH (empty PATH entries are skipped);
//   with a '/', a relative argv[0] is relative to the working directory.
// - Identity: with LaunchSpec::uid >= 0 the leader drops to uid/gid (supplementary
//   groups: just gid) and sets PR_SET_NO_NEW_PRIVS before exec. The launcher applies no
//   policy (the agent refuses uid 0); a launcher that is not root can only run tasks as
//   its own uid and gid.
// - Device fence: each existing path of LaunchSpec::hidden_devices is covered, in a
//   private mount namespace of the shim and the task, by `hidden-device` beside the state
//   file, an empty regular file of mode 0000 owned by the agent's user (one for all the
//   tasks of that directory), so a non-root task gets EACCES opening it; the rest of the
//   filesystem is the agent's.
// - Failures before the program runs (no such program, permission, bad working directory,
//   CPUs that do not exist, identity, device fence) are errors of Start, carried from the
//   shim and the leader by a close-on-exec pipe; Start never reports them as exit code 127.
// - The destructor leaves tasks running (an agent restart keeps them); KillAll ends them.
//   A task's cgroup is removed once the task has been reaped.
// - Cgroups (Options::use_cgroups): see cgroups.h. When they are not usable the launcher
//   records a warning once and runs tasks without CPU and memory limits. The leader, not
//   the shim, joins the cgroup, so the shim can empty it with cgroup.kill.
// - Shims are waited for by pid, never with waitpid(-1), so other code of the agent may
//   run its own child processes.
// Thread safety: all public methods are thread-safe; the destructor must not race them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "agent/launch/cgroups.h"
#include "base/mutex.h"
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
  // Required: the task's state file (agent/launch/task_state_file.h), created with mode 0600
  // if missing (and its directory with it); its lines other than the launcher's are the
  // caller's. A relative path is taken from the agent's working directory.
  std::string state_file;
  int64_t uid = -1;  // >= 0: run as this uid (gid then required); -1: as the agent
  int64_t gid = -1;  // >= 0 with uid
  // Device nodes the task must not open (absolute paths); missing ones are skipped.
  std::vector<std::string> hidden_devices;
  // Self-fencing: with lease_us > 0 the shim kills the task once lease_file's
  // modification time is more than lease_us in the past (the agent renews it with each
  // answer of the controller), even when no agent runs; the end line then says
  // "fenced". A missing lease file does not expire. lease_file must be absolute.
  std::string lease_file;
  int64_t lease_us = 0;
  // Non-empty: the task runs on a pseudo-terminal its shim relays to a client that
  // sends this secret (agent/launch/pty_relay.h); PtyPort names the port it listens on.
  std::string pty_secret;
  // The one address that port is bound on: numeric IPv4 or IPv6, the node's address as
  // its clients reach it (the controller hands out the address it sees the agent at).
  // "": loopback, 127.0.0.1 (a single-machine cluster, `tessera up`).
  std::string pty_address;
};

struct TaskExit {
  std::string id;
  int pid = 0;
  int exit_code = 0;  // the exit status when signal == 0; -1 otherwise
  int signal = 0;     // the signal that killed the leader; 0 when it exited
  // false: the shim died without recording how the task ended (exit_code -1, signal 0).
  bool status_known = true;
  // The shim killed the task because its lease expired (exit_code -1, signal 9).
  bool fenced = false;
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
    // The tessera-shim program to posix_spawn for each task (agent/launch/shim_start.h); "":
    // fork the shim from this process instead, which costs a copy of its address space.
    std::string shim_program;
  };

  TaskLauncher();  // default Options
  explicit TaskLauncher(Options options);
  ~TaskLauncher();  // leaves tasks running; see KillAll
  TaskLauncher(const TaskLauncher&) = delete;
  TaskLauncher& operator=(const TaskLauncher&) = delete;

  // Starts the task; returns the pid of its leader (also its process group id).
  // InvalidArgument for a bad spec or CPUs that are not usable; AlreadyExists for the id
  // of a task not yet reaped, or a state file whose shim still runs; NotFound for a missing
  // program or working directory; PermissionDenied when the program cannot be executed
  // or the identity cannot be taken (a launcher that is not root asked for another uid);
  // FailedPrecondition when a device cannot be hidden; Internal otherwise.
  StatusOr<int> Start(const LaunchSpec& spec);

  // Re-attaches the task an earlier launcher started with this id and state file. A live
  // shim (its pid runs with the recorded start time): the task counts as running. A
  // shim that is gone: Reap reports the status its end line says, or, without one, the status
  // as unknown, after killing what is left of the task (its session and cgroup).
  // NotFound when the state file has no shim line (since its last clear); AlreadyExists
  // for an id already known; InvalidArgument for a bad id or an unreadable shim line.
  Status Adopt(const std::string& id, const std::string& state_file);

  // Sends `signal` (0 only checks) to the task's leader's process group. NotFound when the
  // id is unknown or its exit was already reaped, or the group is gone.
  Status Signal(std::string_view id, int signal);

  // SIGKILLs the task's process group, session and cgroup; does not wait. Reap reports
  // its end. NotFound when the id is unknown or already reaped.
  Status Kill(std::string_view id);

  // Kill for every task not yet reaped, then waits (bounded, ~5 s) until their shims
  // have exited; Reap reports them.
  void KillAll();

  // Non-blocking: the tasks whose shim ended since the last call.
  std::vector<TaskExit> Reap();

  // Waits up to `timeout_ms` for a task's shim to end (then Reap has it to report), on
  // pidfds, so that an agent reports an exit the moment it happens; true when one did.
  // Each end wakes it once. Returns early (false) on Interrupt or when a task starts.
  // One caller at a time (the agent's exit watcher).
  bool WaitForExit(int timeout_ms);
  void Interrupt();

  // The TCP port of the task's terminal (LaunchSpec::pty_secret); 0 when it has none, is
  // unknown, or was adopted (the port is not recorded).
  int PtyPort(std::string_view id) const;

  // True from a successful Start or Adopt until Reap reports the task's end.
  bool Running(std::string_view id) const;

  // The task's cgroup directory; "" when it has none (cgroups unusable or disabled) or
  // the task is not running.
  std::string CgroupOf(std::string_view id) const;

  // Why isolation is weaker than asked, e.g. "cgroup v2 not writable at
  // /sys/fs/cgroup/...: CPU and memory limits are not enforced". Each reason once.
  std::vector<std::string> Warnings() const;

 private:
  struct Task {
    int shim_pid = 0;
    int leader_pid = 0;
    uint64_t shim_starttime = 0;
    bool child = false;  // the shim is this process's child: waited for by pid
    std::string state_file;
    std::string cgroup_dir;
    bool ended = false;         // the shim is gone; `outcome` holds the exit
    bool leftovers = false;     // ended without an end line: kill until nothing is left
    int64_t give_up_at_ms = 0;  // steady clock; leftovers that do not die by then stay
    TaskExit outcome;
    int pidfd = -1;         // the shim's, opened by WaitForExit
    bool end_seen = false;  // WaitForExit saw the pidfd ready: not watched again
    int pty_port = 0;
  };
  class Spawner;

  void AddWarning(std::string text) REQUIRES(mu_);
  void RetryCgroupRemovals() REQUIRES(mu_);
  bool ShimEnded(Task& task) REQUIRES(mu_);  // `task` is one of tasks_
  void CloseWatchFds() REQUIRES(mu_);        // the destructor's

  const Options options_;
  std::map<std::string, std::string> base_env_;
  std::unique_ptr<CgroupTree> cgroups_;  // null when use_cgroups is false
  std::unique_ptr<Spawner> spawner_;

  mutable Mutex mu_;
  std::map<std::string, Task, std::less<>> tasks_ GUARDED_BY(mu_);  // started, not yet reaped
  std::set<std::string, std::less<>> starting_ GUARDED_BY(mu_);     // ids inside Start
  std::vector<std::string> pending_cgroup_removals_ GUARDED_BY(mu_);
  std::vector<std::string> warnings_ GUARDED_BY(mu_);
  // WaitForExit's: an eventfd that interrupts it (made by the constructor, closed by the
  // destructor), and the pidfds of reaped tasks, which it closes (not Reap: a poll may
  // still hold them).
  int wake_fd_ = -1;
  std::vector<int> retired_pidfds_ GUARDED_BY(mu_);
};

}  // namespace tessera
