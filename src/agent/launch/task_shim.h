// TaskShim: the code of TaskLauncher that runs between fork and exec, plus the process
// scans both sides share. Internal to the launcher (task_launcher.cc is its only user).
//
// Per task the launcher forks a shim, which forks the task's leader:
//   shim:   closes every descriptor it does not need, stdio to /dev/null, chdir("/"),
//           setsid (its pid names the task's session), PR_SET_CHILD_SUBREAPER (every
//           orphan of the task becomes its child), no parent-death signal (it outlives the
//           agent), optionally a private mount namespace with devices hidden; forks the
//           leader, appends its "shim" line to the task's state file, reports the
//           leader's pid, waits for the leader, kills and reaps everything left of the
//           task (bounded, ~5 s), then appends how the task ended (fdatasync) and exits.
//   leader: its own process group, its cgroup, stdio, affinity, working directory, user
//           and group, default signals, exec. A failure before exec is reported with its
//           stage and errno.
// Both report on one pipe, in records of ShimReport, in either order (the leader may fail
// before the shim reports its pid); the pipe closes once the shim is done reporting and
// the leader has exec'd.
//
// Everything the children use is prepared in a ShimPlan before fork: in the child of a
// multi-threaded process only async-signal-safe calls are allowed (no allocation, no
// stdio, no locks). The functions marked async-signal-safe below keep to that, so the
// agent may use them too.
//
// Thread safety: RunShim runs in a fresh child; the other functions are reentrant but
// LeaseExpired (the calling process's one LeaseWatch).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace tessera {

struct LaunchSpec;

// An owned file descriptor.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { Reset(); }
  int get() const { return fd_; }
  void Reset();

 private:
  int fd_ = -1;
};

// Where the shim or the leader failed; sent through the report pipe with its errno.
enum ShimStage : int32_t {
  kStageShimSetup = 1,  // setsid, subreaper
  kStageDeviceNamespace,
  kStageDeviceHide,  // ShimReport::value: the index in ShimPlan::hidden
  kStageShimFork,
  kStageShimRecord,  // the state file's "shim" line
  kStageGroup,
  kStageCgroup,
  kStageStdio,
  kStageAffinity,
  kStageWorkingDir,
  kStageIdentity,
  kStageExec,
  kStageTerminal,  // setsid, TIOCSCTTY on the task's pseudo-terminal
};

inline constexpr int32_t kReportLeader = 1;  // value: the leader's pid
inline constexpr int32_t kReportError = 2;   // stage, err (and value for some stages)

struct ShimReport {
  int32_t kind = 0;
  int32_t stage = 0;
  int32_t err = 0;
  int32_t value = 0;
};

struct ShimPlan {
  // The leader.
  std::vector<std::string> argv_storage;
  std::vector<std::string> env_storage;
  std::vector<std::string> candidates;  // program paths to try, in order
  std::vector<char*> argv;
  std::vector<char*> envp;
  std::string working_dir;              // absolute
  std::vector<unsigned long> cpu_mask;  // empty: inherit affinity
  UniqueFd log_fd;
  UniqueFd null_fd;
  UniqueFd cgroup_procs_fd;  // -1: no cgroup
  bool set_ids = false;      // setgroups + setresgid + setresuid to uid/gid
  bool check_uid = false;    // getuid() must be uid, then PR_SET_NO_NEW_PRIVS
  uint32_t uid = 0;
  uint32_t gid = 0;

  // The shim (all paths absolute).
  std::string state_file;            // the task's state file (task_launcher.h), which exists
  std::string cgroup_kill;          // <cgroup>/cgroup.kill; "" without a cgroup
  std::string cgroup_procs;         // <cgroup>/cgroup.procs; "" without a cgroup
  std::string hidden_source;        // the empty 0000 file mounted over each hidden path
  std::vector<std::string> hidden;  // existing device paths to hide
  std::string lease_file;           // "": no lease
  int64_t lease_ns = 0;             // kill the task once lease_file is older than this

  // A pseudo-terminal (agent/launch/pty_relay.h), or all -1: the leader's session has the slave
  // as its controlling terminal and stdio; the shim relays the master on the listener.
  UniqueFd pty_master_fd;
  UniqueFd pty_slave_fd;
  UniqueFd pty_listen_fd;
  std::string pty_secret;  // what an attaching client must send
};

// One process's watch on its lease, failing closed: a lease file that cannot be read
// (missing, unreadable, any stat error) expires once it has been so for the lease's
// length, counted on CLOCK_MONOTONIC from the last read that succeeded or, before one,
// from the first look. That window tolerates a file missing for a moment (replaced by
// the agent) yet ends a task whose agent's data directory was deleted. A file that
// reads fine expires once its modification time is more than the lease in the past.
// Not thread-safe; async-signal-safe; constant-initialised (a static needs no
// construction at run time).
class LeaseWatch {
 public:
  // One look: `age_ns` is the file's age (now minus its mtime, CLOCK_REALTIME) when
  // `readable`, ignored otherwise; `now_ns` is CLOCK_MONOTONIC now.
  bool Expired(bool readable, int64_t age_ns, int64_t now_ns, int64_t lease_ns);

 private:
  bool started_ = false;
  int64_t good_ns_ = 0;  // CLOCK_MONOTONIC of the last good read (or the first look)
};

// Whether plan.lease_file has expired, as the calling process's LeaseWatch sees it
// (started by its first call in that process, i.e. as the shim starts to watch).
// Async-signal-safe; not thread-safe.
bool LeaseExpired(const ShimPlan& plan);

// Runs in the forked shim; never returns. Reports on `report_fd`.
[[noreturn]] void RunShim(const ShimPlan& plan, int report_fd);

// The error of Start for a failure report.
Status ShimErrorStatus(const LaunchSpec& spec, const ShimPlan& plan, const ShimReport& report);

struct ProcStat {
  char state = 0;  // 'R', 'S', 'Z', ...
  pid_t ppid = 0;
  pid_t pgrp = 0;
  pid_t session = 0;
  uint64_t starttime = 0;  // field 22, clock ticks after boot
};

// /proc/<pid>/stat. False when the process does not exist. Async-signal-safe.
bool ReadProcStat(pid_t pid, ProcStat* out);

// SIGKILLs every live (non-zombie) process other than `skip` whose session is `session`
// or whose parent is `parent` (0: that criterion is off), and, when `cgroup_procs` is
// not empty, every process of that cgroup (through `cgroup_kill` when the kernel has
// it). Returns how many live processes it found. Async-signal-safe.
int KillTaskProcesses(pid_t session, pid_t parent, pid_t skip, const char* cgroup_kill,
                      const char* cgroup_procs);

}  // namespace tessera
