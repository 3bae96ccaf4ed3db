// TaskLauncher: waiting for tasks to end, and the accessors of what it runs (declared in
// task_launcher.h).
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <vector>

#include "agent/launch/task_launcher.h"

namespace tessera {

bool TaskLauncher::WaitForExit(int timeout_ms) {
  std::vector<pollfd> fds;
  std::vector<std::string> ids;  // parallel to fds[1..]
  bool gone = false;
  {
    MutexLock lock(mu_);
    for (int fd : retired_pidfds_) {
      ::close(fd);
    }
    retired_pidfds_.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    for (auto& [id, task] : tasks_) {
      if (task.ended || task.end_seen) {
        continue;
      }
      if (task.pidfd < 0) {
        // A reused pid would only wake the agent early: Reap checks the start time.
        task.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, task.shim_pid, 0));
        if (task.pidfd < 0) {
          task.end_seen = true;  // already gone (ESRCH): the next Reap reports it
          gone = true;
          continue;
        }
      }
      fds.push_back({task.pidfd, POLLIN, 0});
      ids.push_back(id);
    }
  }
  if (gone) {
    return true;
  }
  const int n = ::poll(fds.data(), fds.size(), timeout_ms);
  if (n <= 0) {
    return false;
  }
  if ((fds[0].revents & POLLIN) != 0) {
    uint64_t count = 0;
    (void)!::read(wake_fd_, &count, sizeof(count));
  }
  bool ended = false;
  MutexLock lock(mu_);
  for (size_t i = 1; i < fds.size(); ++i) {
    if (fds[i].revents == 0) {
      continue;
    }
    ended = true;
    auto it = tasks_.find(ids[i - 1]);
    if (it != tasks_.end()) {
      it->second.end_seen = true;
    }
  }
  return ended;
}

void TaskLauncher::Interrupt() {
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
}

void TaskLauncher::CloseWatchFds() {
  for (int fd : retired_pidfds_) {
    ::close(fd);
  }
  retired_pidfds_.clear();
  for (auto& [id, task] : tasks_) {
    if (task.pidfd >= 0) {
      ::close(task.pidfd);
      task.pidfd = -1;
    }
  }
  if (wake_fd_ >= 0) {
    ::close(wake_fd_);
  }
}

bool TaskLauncher::Running(std::string_view id) const {
  MutexLock lock(mu_);
  return tasks_.find(id) != tasks_.end();
}

std::string TaskLauncher::CgroupOf(std::string_view id) const {
  MutexLock lock(mu_);
  auto it = tasks_.find(id);
  return it == tasks_.end() ? std::string() : it->second.cgroup_dir;
}

std::vector<std::string> TaskLauncher::Warnings() const {
  MutexLock lock(mu_);
  return warnings_;
}

}  // namespace tessera
