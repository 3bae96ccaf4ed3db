#include "agent/launch/shim_start.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <filesystem>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

#include "agent/launch/shim_plan_codec.h"
#include "agent/launch/task_launcher.h"
#include "agent/launch/task_state_file.h"
#include "agent/launch/task_shim.h"
#include "base/status.h"

namespace tessera {

void ReapChild(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

Status ClearStateFile(const std::string& state_file) {
  return AppendStateLine(state_file, "clear", /*durable=*/false);
}

namespace {

// Reads the shim's reports until the pipe closes: the leader's pid, or why it failed.
StatusOr<Spawned> AwaitShimReport(const LaunchSpec& spec, const ShimPlan& plan, pid_t shim,
                                  const UniqueFd& read_end) {
  // Until EOF: the shim closes its end after reporting, the leader on exec.
  std::optional<ShimReport> error;
  pid_t leader = 0;
  ShimReport report{};
  size_t got = 0;
  while (true) {
    ssize_t n =
        ::read(read_end.get(), reinterpret_cast<char*>(&report) + got, sizeof(report) - got);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;
    }
    got += static_cast<size_t>(n);
    if (got == sizeof(report)) {
      if (report.kind == kReportLeader) {
        leader = report.value;
      } else if (!error) {
        error = report;
      }
      got = 0;
    }
  }
  if (leader > 0 && !error) {
    return Spawned{shim, leader};
  }
  // The shim exits on its own: at once, or once the failed leader's remains are gone.
  ReapChild(shim);
  (void)ClearStateFile(plan.state_file);
  if (error) {
    return ShimErrorStatus(spec, plan, *error);
  }
  return InternalError("task " + spec.id + ": its shim ended before reporting");
}
}  // namespace

StatusOr<Spawned> ForkShim(const LaunchSpec& spec, const ShimPlan& plan) {
  std::array<int, 2> fds{};
  if (::pipe2(fds.data(), O_CLOEXEC) != 0) {
    return InternalError("task " + spec.id + ": pipe: " + ErrnoText(errno));
  }
  UniqueFd read_end(fds[0]);
  UniqueFd write_end(fds[1]);
  pid_t shim = ::fork();
  if (shim == 0) {
    RunShim(plan, write_end.get());
  }
  write_end.Reset();
  if (shim < 0) {
    return ResourceExhaustedError("task " + spec.id + ": fork: " + ErrnoText(errno));
  }
  return AwaitShimReport(spec, plan, shim, read_end);
}

StatusOr<Spawned> SpawnShim(const LaunchSpec& spec, const ShimPlan& plan,
                            const std::string& program) {
  const std::string encoded = EncodeShimPlan(plan);
  UniqueFd plan_fd(::memfd_create("tessera-shim-plan", MFD_CLOEXEC));
  if (plan_fd.get() < 0) {
    return InternalError("task " + spec.id + ": memfd_create: " + ErrnoText(errno));
  }
  for (size_t done = 0; done < encoded.size();) {
    ssize_t n = ::write(plan_fd.get(), encoded.data() + done, encoded.size() - done);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return InternalError("task " + spec.id +
                           ": cannot write the shim's plan: " + ErrnoText(errno));
    }
    done += static_cast<size_t>(n);
  }
  if (::lseek(plan_fd.get(), 0, SEEK_SET) != 0) {
    return InternalError("task " + spec.id + ": lseek: " + ErrnoText(errno));
  }
  std::array<int, 2> fds{};
  if (::pipe2(fds.data(), O_CLOEXEC) != 0) {
    return InternalError("task " + spec.id + ": pipe: " + ErrnoText(errno));
  }
  UniqueFd read_end(fds[0]);
  UniqueFd write_end(fds[1]);

  // Each descriptor is first copied above the target numbers, so that no dup2 of the
  // file actions overwrites a source still to be moved.
  std::vector<std::pair<int, int>> moves = {{plan_fd.get(), kShimPlanFd},
                                            {write_end.get(), kShimReportFd},
                                            {plan.log_fd.get(), kShimLogFd},
                                            {plan.null_fd.get(), kShimNullFd}};
  if (plan.cgroup_procs_fd.get() >= 0) {
    moves.emplace_back(plan.cgroup_procs_fd.get(), kShimCgroupFd);
  }
  if (plan.pty_master_fd.get() >= 0) {
    moves.emplace_back(plan.pty_master_fd.get(), kShimPtyMasterFd);
    moves.emplace_back(plan.pty_slave_fd.get(), kShimPtySlaveFd);
    moves.emplace_back(plan.pty_listen_fd.get(), kShimPtyListenFd);
  }
  std::vector<UniqueFd> high;
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  for (const auto& [from, to] : moves) {
    high.emplace_back(::fcntl(from, F_DUPFD_CLOEXEC, kShimPtyListenFd + 1));
    if (high.back().get() < 0) {
      ::posix_spawn_file_actions_destroy(&actions);
      return InternalError("task " + spec.id + ": fcntl: " + ErrnoText(errno));
    }
    ::posix_spawn_file_actions_adddup2(&actions, high.back().get(), to);
  }
  // The shim runs with every signal blocked (it stops only by SIGKILL), as a forked one
  // inherits from the Spawner thread.
  posix_spawnattr_t attr;
  ::posix_spawnattr_init(&attr);
  sigset_t all;
  ::sigfillset(&all);
  ::posix_spawnattr_setsigmask(&attr, &all);
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  std::string name = "tessera-shim";
  char* argv[] = {name.data(), nullptr};
  char* envp[] = {nullptr};
  pid_t shim = 0;
  const int rc = ::posix_spawn(&shim, program.c_str(), &actions, &attr, argv, envp);
  ::posix_spawnattr_destroy(&attr);
  ::posix_spawn_file_actions_destroy(&actions);
  high.clear();
  write_end.Reset();
  if (rc != 0) {
    return InternalError("task " + spec.id + ": cannot run the shim " + program + ": " +
                         ErrnoText(rc));
  }
  return AwaitShimReport(spec, plan, shim, read_end);
}

std::string ShimProgramBesideThisExecutable() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) {
    return "";
  }
  std::string path = (self.parent_path() / "tessera-shim").string();
  return ::access(path.c_str(), X_OK) == 0 ? path : "";
}

}  // namespace tessera
