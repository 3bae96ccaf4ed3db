// tessera-shim: a task's shim (agent/launch/task_shim.h) as its own small program. The agent
// starts it with posix_spawn (agent/launch/shim_start.h), the plan on descriptor 3 and the
// task's descriptors on 4 to 10 (agent/launch/shim_plan_codec.h); it is not meant to be run by
// hand, and says so when it is.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "agent/launch/shim_plan_codec.h"
#include "agent/launch/task_shim.h"

int main() {
  using namespace tessera;
  if (::fcntl(kShimPlanFd, F_GETFD) < 0 || ::fcntl(kShimReportFd, F_GETFD) < 0) {
    std::fputs("tessera-shim: run by the agent for each task, not by hand\n", stderr);
    return 2;
  }
  // As in a forked shim: the report pipe closes when the leader execs.
  for (int fd : {kShimReportFd, kShimLogFd, kShimNullFd, kShimCgroupFd, kShimPtyMasterFd,
                 kShimPtySlaveFd, kShimPtyListenFd}) {
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  std::string bytes;
  char buffer[16384];
  while (true) {
    ssize_t n = ::read(kShimPlanFd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      ShimReport report{kReportError, kStageShimSetup, errno, 0};
      (void)!::write(kShimReportFd, &report, sizeof(report));
      return 127;
    }
    if (n == 0) {
      break;
    }
    bytes.append(buffer, static_cast<size_t>(n));
  }
  ::close(kShimPlanFd);
  ShimPlan plan;
  bool has_cgroup_fd = false;
  bool has_pty = false;
  if (!DecodeShimPlan(bytes, &plan, &has_cgroup_fd, &has_pty).ok()) {
    ShimReport report{kReportError, kStageShimSetup, EINVAL, 0};
    (void)!::write(kShimReportFd, &report, sizeof(report));
    return 127;
  }
  plan.log_fd = UniqueFd(kShimLogFd);
  plan.null_fd = UniqueFd(kShimNullFd);
  if (has_cgroup_fd) {
    plan.cgroup_procs_fd = UniqueFd(kShimCgroupFd);
  }
  if (has_pty) {
    plan.pty_master_fd = UniqueFd(kShimPtyMasterFd);
    plan.pty_slave_fd = UniqueFd(kShimPtySlaveFd);
    plan.pty_listen_fd = UniqueFd(kShimPtyListenFd);
  }
  RunShim(plan, kShimReportFd);
}
