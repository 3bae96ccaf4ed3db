#include "agent/launch/task_shim.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <system_error>

#include "agent/launch/cpu_topology.h"
#include "agent/launch/pty_relay.h"
#include "agent/launch/task_launcher.h"
#include "base/file_util.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

namespace tessera {

void UniqueFd::Reset() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

namespace {

// The shim gives up on processes that do not die (e.g. stuck in the kernel) after
// kCleanupRounds * kCleanupPause.
constexpr int kCleanupRounds = 500;
constexpr long kCleanupPauseNs = 10'000'000;

// A fixed buffer for text built without allocating.
template <size_t N>
struct Text {
  std::array<char, N> chars{};
  size_t size = 0;
  bool overflow = false;

  void Add(const char* s, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      if (size + 1 >= N) {
        overflow = true;
        return;
      }
      chars[size++] = s[i];
    }
    chars[size] = '\0';
  }
  void Add(const char* s) { Add(s, std::strlen(s)); }
  void AddNumber(uint64_t v) {
    std::array<char, 24> reversed{};
    size_t n = 0;
    do {
      reversed[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    while (n > 0) {
      Add(&reversed[--n], 1);
    }
  }
  const char* c_str() const { return chars.data(); }
};

bool ParseNumber(const char* begin, const char* end, uint64_t* out) {
  if (begin == end) {
    return false;
  }
  uint64_t v = 0;
  for (const char* p = begin; p < end; ++p) {
    if (*p < '0' || *p > '9') {
      return false;
    }
    v = v * 10 + static_cast<uint64_t>(*p - '0');
  }
  *out = v;
  return true;
}

void Pause(long ns) {
  struct timespec ts {
    0, ns
  };
  while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}


// Appends whole lines to the task's state file; `durable`: on the disk before it returns
// (the launcher made the file's own entry durable when it created it).
int AppendToStateFile(const char* path, const char* text, size_t size, bool durable) {
  int fd = ::open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    return errno;
  }
  int err = 0;
  if (!WriteAllFd(fd, text, size) || (durable && ::fdatasync(fd) != 0)) {
    err = errno != 0 ? errno : EIO;
  }
  ::close(fd);
  return err;
}

void Report(int fd, int32_t kind, int32_t stage, int32_t err, int32_t value) {
  ShimReport report{kind, stage, err, value};
  (void)WriteAllFd(fd, reinterpret_cast<const char*>(&report), sizeof(report));
}

[[noreturn]] void Fail(int fd, ShimStage stage, int err, int32_t value = 0) {
  Report(fd, kReportError, stage, err, value);
  ::_exit(127);
}

// Closes every descriptor from 3 up except those in `keep` (sorted, all >= 3).
void CloseAllExcept(const int* keep, size_t n) {
  auto close_range = [](unsigned first, unsigned last) {
    if (first <= last && ::syscall(SYS_close_range, first, last, 0U) != 0) {
      for (unsigned fd = first; fd <= last && fd < 65536U; ++fd) {
        ::close(static_cast<int>(fd));  // kernels before 5.9
      }
    }
  };
  unsigned next = 3;
  for (size_t i = 0; i < n; ++i) {
    auto fd = static_cast<unsigned>(keep[i]);
    if (fd > next) {
      close_range(next, fd - 1);
    }
    next = fd + 1;
  }
  close_range(next, ~0U);
}

// Runs in the leader, started by the shim on its own stack in the shim's memory (until
// it execs). Only async-signal-safe calls; it writes nothing the shim reads.
[[noreturn]] void LeaderMain(const ShimPlan& plan, int report_fd, int log_fd, int null_fd,
                             int cgroup_fd, int tty_fd) {
  if (tty_fd >= 0) {
    // Its own session (and group) with the terminal as its controlling one, as a login's.
    if (::setsid() < 0 || ::ioctl(tty_fd, TIOCSCTTY, 0) != 0) {
      Fail(report_fd, kStageTerminal, errno);
    }
  } else if (::setpgid(0, 0) != 0) {
    Fail(report_fd, kStageGroup, errno);
  }
  if (cgroup_fd >= 0) {
    Text<24> pid;
    pid.AddNumber(static_cast<uint64_t>(::getpid()));
    if (::write(cgroup_fd, pid.c_str(), pid.size) < 0) {
      Fail(report_fd, kStageCgroup, errno);
    }
  }
  const int in = tty_fd >= 0 ? tty_fd : null_fd;
  const int out = tty_fd >= 0 ? tty_fd : log_fd;
  if (::dup2(in, STDIN_FILENO) < 0 || ::dup2(out, STDOUT_FILENO) < 0 ||
      ::dup2(out, STDERR_FILENO) < 0) {
    Fail(report_fd, kStageStdio, errno);
  }
  if (!plan.cpu_mask.empty()) {
    size_t bytes = plan.cpu_mask.size() * sizeof(unsigned long);
    if (::sched_setaffinity(0, bytes, reinterpret_cast<const cpu_set_t*>(plan.cpu_mask.data())) !=
        0) {
      Fail(report_fd, kStageAffinity, errno);
    }
  }
  if (plan.set_ids) {
    // Raw syscalls: the libc wrappers coordinate threads, and this process has one.
    gid_t groups[1] = {plan.gid};
    if (::syscall(SYS_setgroups, 1, groups) != 0 ||
        ::syscall(SYS_setresgid, plan.gid, plan.gid, plan.gid) != 0 ||
        ::syscall(SYS_setresuid, plan.uid, plan.uid, plan.uid) != 0) {
      Fail(report_fd, kStageIdentity, errno);
    }
  }
  if (plan.check_uid) {
    if (::getuid() != plan.uid || ::geteuid() != plan.uid || ::getgid() != plan.gid) {
      Fail(report_fd, kStageIdentity, EPERM);
    }
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
      Fail(report_fd, kStageIdentity, errno);
    }
  }
  // As the task's own user, so that a directory it may not enter is refused here.
  if (::chdir(plan.working_dir.c_str()) != 0) {
    Fail(report_fd, kStageWorkingDir, errno);
  }
  // The daemons keep a private umask (077); tasks get the conventional one.
  ::umask(022);
  // Everything else is close-on-exec from here: the report pipe already is.
  ::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);
  // Handlers and ignored signals of the agent must not reach the task. The forking thread
  // blocks every signal, so none can run a handler of the agent in here.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigemptyset(&dfl.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    ::sigaction(sig, &dfl, nullptr);  // fails harmlessly for SIGKILL, SIGSTOP
  }
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);  // NOLINT(concurrency-mt-unsafe): one thread here

  int err = ENOENT;
  bool denied = false;
  for (const std::string& path : plan.candidates) {
    ::execve(path.c_str(), plan.argv.data(), plan.envp.data());
    err = errno;
    if (err == EACCES) {
      denied = true;
    } else if (err != ENOENT && err != ENOTDIR && err != ESTALE && err != ELOOP &&
               err != ENAMETOOLONG) {
      break;
    }
  }
  Fail(report_fd, kStageExec, denied && err != ENOEXEC ? EACCES : err);
}

struct LeaderArgs {
  const ShimPlan* plan;
  int report_fd, log_fd, null_fd, cgroup_fd, tty_fd;
};

constexpr size_t kLeaderStackBytes = 256 << 10;

int LeaderEntry(void* p) {
  const LeaderArgs& a = *static_cast<const LeaderArgs*>(p);
  LeaderMain(*a.plan, a.report_fd, a.log_fd, a.null_fd, a.cgroup_fd, a.tty_fd);
}

// How often a leased shim looks at its lease file.
constexpr long kLeasePollNs = 100'000'000;

}  // namespace

bool LeaseWatch::Expired(bool readable, int64_t age_ns, int64_t now_ns, int64_t lease_ns) {
  if (!started_) {
    started_ = true;
    good_ns_ = now_ns;
  }
  if (readable) {
    good_ns_ = now_ns;
    return age_ns > lease_ns;
  }
  return now_ns - good_ns_ > lease_ns;
}

namespace {

int64_t Nanos(const struct timespec& t) {
  return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

// The watch of the process that calls LeaseExpired; a forked child starts its own.
LeaseWatch g_lease_watch;
pid_t g_lease_watch_pid = 0;

}  // namespace

bool LeaseExpired(const ShimPlan& plan) {
  const pid_t self = ::getpid();
  if (g_lease_watch_pid != self) {
    g_lease_watch = LeaseWatch();
    g_lease_watch_pid = self;
  }
  struct stat st {};
  const bool readable = ::stat(plan.lease_file.c_str(), &st) == 0;
  struct timespec wall {};
  struct timespec mono {};
  ::clock_gettime(CLOCK_REALTIME, &wall);
  ::clock_gettime(CLOCK_MONOTONIC, &mono);
  const int64_t age_ns = readable ? Nanos(wall) - Nanos(st.st_mtim) : 0;
  return g_lease_watch.Expired(readable, age_ns, Nanos(mono), plan.lease_ns);
}

namespace {

// Waits for the leader, reaping the other children (orphans of the task) meanwhile.
// Leaves the leader a zombie, so its pid keeps naming its process group. With a lease,
// polls, and kills the task's group once the lease has expired (*fenced).
siginfo_t WaitForLeader(const ShimPlan& plan, pid_t leader, pid_t self, bool* fenced) {
  const bool leased = plan.lease_ns > 0 && !plan.lease_file.empty();
  while (true) {
    siginfo_t info;
    std::memset(&info, 0, sizeof(info));
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOWAIT | (leased ? WNOHANG : 0)) != 0) {
      if (errno == EINTR) {
        continue;
      }
      std::memset(&info, 0, sizeof(info));  // ECHILD: cannot happen while the leader is ours
      return info;
    }
    if (info.si_pid == 0) {  // nothing ended yet
      if (!*fenced && LeaseExpired(plan)) {
        *fenced = true;
        ::kill(-leader, SIGKILL);
        (void)KillTaskProcesses(self, self, self, nullptr, nullptr);
      }
      // Every signal is blocked in the shim, so a child's end leaves SIGCHLD pending:
      // wait for it rather than sleep, so the task's exit is seen at once, and look at
      // the lease at least every kLeasePollNs.
      sigset_t chld;
      ::sigemptyset(&chld);
      ::sigaddset(&chld, SIGCHLD);
      struct timespec ts {
        0, kLeasePollNs
      };
      (void)::sigtimedwait(&chld, nullptr, &ts);
      continue;
    }
    if (info.si_pid == leader) {
      return info;
    }
    int status = 0;
    ::waitpid(info.si_pid, &status, 0);
  }
}

// Reaps the shim's exited children; true while one still runs.
bool ReapChildren() {
  while (true) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0 || (pid < 0 && errno == EINTR)) {
      continue;
    }
    return pid == 0;
  }
}

// Kills and reaps everything left of the task, bounded.
void CleanUp(const ShimPlan& plan, pid_t self) {
  const char* kill_file = plan.cgroup_kill.empty() ? nullptr : plan.cgroup_kill.c_str();
  const char* procs_file = plan.cgroup_procs.empty() ? nullptr : plan.cgroup_procs.c_str();
  for (int round = 0; round < kCleanupRounds; ++round) {
    // Every process of the session descends from the shim, its leader, and one whose
    // parent dies is re-parented to the shim (a subreaper): with no child left there is
    // no descendant, so the walk of /proc (most of a short task's clean-up) is skipped.
    const pid_t scan = ReapChildren() ? self : 0;
    int live = KillTaskProcesses(scan, scan, self, kill_file, procs_file);
    const bool children = ReapChildren();
    if (live == 0 && !children) {
      return;
    }
    Pause(kCleanupPauseNs);
  }
}

// Parses a d_name of /proc as a pid.
pid_t PidOfName(const char* name) {
  uint64_t v = 0;
  if (!ParseNumber(name, name + std::strlen(name), &v) || v == 0 || v > 0x7fffffff) {
    return 0;
  }
  return static_cast<pid_t>(v);
}

// The descriptors the shim keeps, in RunShim's order.
enum ShimFd : uint8_t { kReportFd, kLogFd, kNullFd, kCgroupFd, kPtyMasterFd, kTtyFd, kPtyListenFd };
constexpr size_t kShimFds = 7;

// Moves each of `fds` (-1: none) above the stdio numbers, in case the agent runs without
// them; one that cannot be moved becomes -1.
void MoveAboveStdio(int (&fds)[kShimFds]) {
  for (int& fd : fds) {
    if (fd >= 0 && fd <= STDERR_FILENO) {
      fd = ::fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
    }
  }
}

// Closes every descriptor from 3 up but `fds` (each above stdio, or -1).
void CloseAllBut(const int (&fds)[kShimFds]) {
  int keep[kShimFds];
  size_t kept = 0;
  for (int fd : fds) {
    if (fd >= 0) {
      size_t i = kept++;
      for (; i > 0 && keep[i - 1] > fd; --i) {
        keep[i] = keep[i - 1];
      }
      keep[i] = fd;
    }
  }
  CloseAllExcept(keep, kept);
}

// The shim's own process: stdio on /dev/null, its own session as the task's subreaper,
// and the GPUs the task may not use hidden in a mount namespace of its own.
void SetUpShim(const ShimPlan& plan, int report_fd, int null_fd) {
  ::dup2(null_fd, STDIN_FILENO);
  ::dup2(null_fd, STDOUT_FILENO);
  ::dup2(null_fd, STDERR_FILENO);
  // The agent may ignore SIGCHLD, which would make the kernel reap the task for us.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigemptyset(&dfl.sa_mask);
  ::sigaction(SIGCHLD, &dfl, nullptr);
  // Every other signal stays blocked (inherited from the Spawner thread): the shim is
  // stopped only by SIGKILL. Writes to a closed pipe then fail with EPIPE.
  if (::chdir("/") != 0 || ::setsid() < 0 || ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
    Fail(report_fd, kStageShimSetup, errno);
  }
  if (!plan.hidden.empty()) {
    if (::unshare(CLONE_NEWNS) != 0 ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      Fail(report_fd, kStageDeviceNamespace, errno);
    }
    for (size_t i = 0; i < plan.hidden.size(); ++i) {
      if (::mount(plan.hidden_source.c_str(), plan.hidden[i].c_str(), nullptr, MS_BIND, nullptr) !=
              0 &&
          errno != ENOENT) {
        Fail(report_fd, kStageDeviceHide, errno, static_cast<int32_t>(i));
      }
    }
  }
}

// Starts the task's leader (LeaderMain) in a process group of its own; returns once it
// has exec'd or failed.
pid_t StartLeader(const ShimPlan& plan, const int (&fds)[kShimFds]) {
  // The leader shares the shim's memory until it execs (CLONE_VM | CLONE_VFORK, as
  // posix_spawn does; the shim waits meanwhile), so that starting it does not copy the
  // agent's address space a second time. It has its own stack, file table, signal
  // handlers and credentials, and makes only system calls.
  LeaderArgs args{&plan, fds[kReportFd], fds[kLogFd], fds[kNullFd], fds[kCgroupFd], fds[kTtyFd]};
  void* stack = ::mmap(nullptr, kLeaderStackBytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  const pid_t leader = stack == MAP_FAILED
                           ? -1
                           : ::clone(LeaderEntry, static_cast<char*>(stack) + kLeaderStackBytes,
                                     CLONE_VM | CLONE_VFORK | SIGCHLD, &args);
  if (leader < 0) {
    Fail(fds[kReportFd], kStageShimFork, errno);
  }
  ::munmap(stack, kLeaderStackBytes);
  // Also from this side, so the group exists once Start returns.
  ::setpgid(leader, leader);
  return leader;
}

// Records the shim and its leader in the task's state file, for a restarted agent to
// adopt the task, and tells the agent the leader's pid (or kills the leader and reports
// the error).
void RecordLeader(const ShimPlan& plan, int report_fd, pid_t self, pid_t leader) {
  ProcStat own;
  Text<96> record;
  if (ReadProcStat(self, &own)) {
    record.Add("shim ");
    record.AddNumber(static_cast<uint64_t>(self));
    record.Add(" ");
    record.AddNumber(static_cast<uint64_t>(leader));
    record.Add(" ");
    record.AddNumber(own.starttime);
    record.Add("\n");
  }
  // Not fsynced: the record serves a restarted agent, which finds it in the page cache;
  // after a crash of the machine the shim is gone with it, and a task whose record did
  // not reach the disk is reported lost, as it should be. It is on every launch's path.
  int err = record.size == 0
                ? EIO
                : AppendToStateFile(plan.state_file.c_str(), record.c_str(), record.size,
                                    /*durable=*/false);
  if (err != 0) {
    ::kill(leader, SIGKILL);  // Start fails: a task nobody could adopt must not run
    Report(report_fd, kReportError, kStageShimRecord, err, 0);
  } else {
    Report(report_fd, kReportLeader, 0, 0, leader);
  }
}

// Records how the task ended in its state file: "fenced", "exit N" or "signal N".
void RecordOutcome(const ShimPlan& plan, bool fenced, const siginfo_t& info) {
  Text<32> outcome;
  if (fenced) {
    outcome.Add("fenced");
  } else if (info.si_code == CLD_EXITED) {
    outcome.Add("exit ");
    outcome.AddNumber(static_cast<uint64_t>(info.si_status));
  } else {
    outcome.Add("signal ");
    outcome.AddNumber(static_cast<uint64_t>(info.si_status));
  }
  outcome.Add("\n");
  // Durable: after a crash of the machine, a task that ended is reported so, not lost
  // (and not run again).
  (void)AppendToStateFile(plan.state_file.c_str(), outcome.c_str(), outcome.size,
                          /*durable=*/true);
}

}  // namespace

[[noreturn]] void RunShim(const ShimPlan& plan, int report_fd) {
  int fds[kShimFds] = {report_fd,
                       plan.log_fd.get(),
                       plan.null_fd.get(),
                       plan.cgroup_procs_fd.get(),
                       plan.pty_master_fd.get(),
                       plan.pty_slave_fd.get(),
                       plan.pty_listen_fd.get()};
  MoveAboveStdio(fds);
  report_fd = fds[kReportFd];
  const int log_fd = fds[kLogFd];
  const int null_fd = fds[kNullFd];
  const int cgroup_fd = fds[kCgroupFd];
  const int tty_fd = fds[kTtyFd];
  if (report_fd < 0 || log_fd < 0 || null_fd < 0) {
    ::_exit(127);
  }
  CloseAllBut(fds);
  SetUpShim(plan, report_fd, null_fd);

  const pid_t self = ::getpid();
  const pid_t leader = StartLeader(plan, fds);
  PtyRelay relay(fds[kPtyMasterFd], fds[kPtyListenFd], log_fd, plan.pty_secret.data(),
                 plan.pty_secret.size());
  if (tty_fd >= 0) {
    ::close(tty_fd);  // the task holds it; the relay sees EIO once no process does
  } else {
    ::close(log_fd);
  }
  if (cgroup_fd >= 0) {
    ::close(cgroup_fd);
  }
  RecordLeader(plan, report_fd, self, leader);
  ::close(report_fd);

  bool fenced = false;
  siginfo_t info = tty_fd >= 0 ? relay.Run(plan, leader, self, &fenced)
                                : WaitForLeader(plan, leader, self, &fenced);
  ::kill(-leader, SIGKILL);  // its group, while the zombie still reserves the id
  int status = 0;
  ::waitpid(leader, &status, 0);
  CleanUp(plan, self);
  RecordOutcome(plan, fenced, info);
  // The terminal's last output (into the log too) and the status, before the shim exits,
  // which the agent reports; a stalled client holds that up kPtySendTimeoutMs at most.
  if (tty_fd >= 0) {
    relay.Finish(fenced                         ? 128 + SIGKILL
                 : info.si_code == CLD_EXITED ? info.si_status
                                              : 128 + info.si_status);
  }
  ::_exit(0);
}

bool ReadProcStat(pid_t pid, ProcStat* out) {
  Text<40> path;
  path.Add("/proc/");
  path.AddNumber(static_cast<uint64_t>(pid));
  path.Add("/stat");
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return false;
  }
  std::array<char, 1024> buf{};
  size_t size = 0;
  while (size < buf.size()) {
    ssize_t n = ::read(fd, buf.data() + size, buf.size() - size);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;
    }
    size += static_cast<size_t>(n);
  }
  ::close(fd);
  // "pid (comm) state ppid pgrp session ...": comm may hold anything, even ')'.
  const char* end = buf.data() + size;
  const char* p = end;
  while (p > buf.data() && *(p - 1) != ')') {
    --p;  // ends right after the last ')', at a space
  }
  if (p == buf.data() || p + 2 > end) {
    return false;
  }
  ProcStat stat;
  int field = 2;
  bool have_start = false;
  while (p < end && *p == ' ') {
    ++p;
    ++field;
    const char* token = p;
    while (p < end && *p != ' ' && *p != '\n') {
      ++p;
    }
    uint64_t v = 0;
    if (field == 3) {
      stat.state = token < p ? *token : 0;
    } else if (field >= 4 && field <= 6) {
      if (!ParseNumber(token, p, &v)) {
        return false;
      }
      (field == 4 ? stat.ppid : field == 5 ? stat.pgrp : stat.session) = static_cast<pid_t>(v);
    } else if (field == 22) {
      if (!ParseNumber(token, p, &v)) {
        return false;
      }
      stat.starttime = v;
      have_start = true;
      break;
    }
  }
  if (!have_start) {
    return false;
  }
  *out = stat;
  return true;
}

int KillTaskProcesses(pid_t session, pid_t parent, pid_t skip, const char* cgroup_kill,
                      const char* cgroup_procs) {
  int live = 0;
  if (session > 0 || parent > 0) {
    int dir = ::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      alignas(8) std::array<char, 4096> buf{};
      while (true) {
        long n = ::syscall(SYS_getdents64, dir, buf.data(), buf.size());
        if (n <= 0) {
          break;
        }
        // struct linux_dirent64: u64 ino, s64 off, u16 reclen, u8 type, char name[].
        for (long off = 0; off < n;) {
          unsigned short reclen = 0;
          std::memcpy(&reclen, buf.data() + off + 16, sizeof(reclen));
          pid_t pid = PidOfName(buf.data() + off + 19);
          off += reclen;
          if (pid <= 1 || pid == skip) {
            continue;
          }
          ProcStat stat;
          if (!ReadProcStat(pid, &stat) || stat.state == 'Z' || stat.state == 'X') {
            continue;
          }
          if ((session > 0 && stat.session == session) || (parent > 0 && stat.ppid == parent)) {
            ::kill(pid, SIGKILL);
            ++live;
          }
        }
      }
      ::close(dir);
    }
  }
  if (cgroup_procs != nullptr && cgroup_procs[0] != '\0') {
    bool killed = false;
    if (cgroup_kill != nullptr && cgroup_kill[0] != '\0') {
      int fd = ::open(cgroup_kill, O_WRONLY | O_CLOEXEC);
      if (fd >= 0) {
        killed = ::write(fd, "1", 1) == 1;
        ::close(fd);
      }
    }
    // Counts what is still listed, and kills it where cgroup.kill is missing (< 5.14).
    int fd = ::open(cgroup_procs, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      std::array<char, 4096> buf{};
      uint64_t pid = 0;
      bool in_number = false;
      auto flush = [&] {
        // 0: a process outside this pid namespace; never init.
        if (in_number && pid > 1 && pid <= 0x7fffffff && static_cast<pid_t>(pid) != skip) {
          if (!killed) {
            ::kill(static_cast<pid_t>(pid), SIGKILL);
          }
          ++live;
        }
        pid = 0;
        in_number = false;
      };
      while (true) {
        ssize_t n = ::read(fd, buf.data(), buf.size());
        if (n < 0 && errno == EINTR) {
          continue;
        }
        if (n <= 0) {
          break;
        }
        for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
          if (buf[i] >= '0' && buf[i] <= '9') {
            pid = pid * 10 + static_cast<uint64_t>(buf[i] - '0');
            in_number = true;
          } else {
            flush();
          }
        }
      }
      flush();
      ::close(fd);
    }
  }
  return live;
}

Status ShimErrorStatus(const LaunchSpec& spec, const ShimPlan& plan, const ShimReport& report) {
  std::string task = "task " + spec.id + ": ";
  std::string text = std::generic_category().message(report.err);
  switch (report.stage) {
    case kStageExec:
      if (report.err == ENOENT) {
        return NotFoundError(task + "cannot run '" + spec.argv[0] + "': no such program");
      }
      if (report.err == EACCES) {
        return PermissionDeniedError(task + "cannot run '" + spec.argv[0] + "': permission denied");
      }
      return FailedPreconditionError(task + "cannot run '" + spec.argv[0] + "': " + text);
    case kStageWorkingDir:
      if (report.err == ENOENT || report.err == ENOTDIR) {
        return NotFoundError(task + "no working directory " + plan.working_dir);
      }
      return FailedPreconditionError(task + "cannot enter working directory: " + text);
    case kStageAffinity:
      if (report.err == EINVAL) {
        return InvalidArgumentError(task + "none of cpus " + FormatCpuList(spec.cpus) +
                                    " is usable on this machine");
      }
      return InternalError(task + "cannot set the CPU affinity: " + text);
    case kStageIdentity:
      return PermissionDeniedError(task + "cannot run as uid " + std::to_string(plan.uid) +
                                   " gid " + std::to_string(plan.gid) + ": " + text);
    case kStageDeviceNamespace:
      return FailedPreconditionError(task +
                                     "cannot make a mount namespace to hide devices: " + text);
    case kStageDeviceHide: {
      size_t i = static_cast<size_t>(report.value);
      std::string path = i < plan.hidden.size() ? plan.hidden[i] : "a device";
      return FailedPreconditionError(task + "cannot hide " + path + ": " + text);
    }
    case kStageShimRecord:
      return InternalError(task + "cannot write " + plan.state_file + ": " + text);
    case kStageShimFork:
      return ResourceExhaustedError(task + "fork: " + text);
    case kStageCgroup:
      return InternalError(task + "cannot enter its cgroup: " + text);
    case kStageStdio:
      return InternalError(task + "cannot redirect stdio: " + text);
    case kStageGroup:
      return InternalError(task + "cannot create its process group: " + text);
    case kStageTerminal:
      return InternalError(task + "cannot take its terminal: " + text);
    case kStageShimSetup:
      return InternalError(task + "cannot set up its supervising process: " + text);
    default:
      return InternalError(task + "failed before exec: " + text);
  }
}

}  // namespace tessera
