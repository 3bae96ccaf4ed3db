// The agent's durable bookkeeping of its tasks (see task_records.h): re-attaching what
// earlier agents left, forgetting what the controller has recorded, renewing the lease
// the tasks' supervisors fence themselves by, and the identity a task runs as.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "agent/agent.h"
#include "agent/task_records.h"
#include "agent/task_sandbox.h"

namespace tessera {
StatusOr<std::pair<int64_t, int64_t>> Agent::RunAs(const TaskLaunch& l) {
  if (::geteuid() != 0) {
    // An unprivileged agent cannot change identity: tasks share its uid.
    if (!warned_same_uid_) {
      warned_same_uid_ = true;
      std::cerr << "tessera agent: not root: tasks run as the agent's own uid " << ::geteuid()
                << ", not as their tenants', and can read what the agent can\n";
    }
    return std::pair<int64_t, int64_t>{-1, -1};
  }
  if (l.uid < 0 || l.gid < 0 || l.uid == 0) {
    if (options_.allow_root_tasks) {
      return std::pair<int64_t, int64_t>{l.uid, l.gid};
    }
    return PermissionDeniedError(
        l.uid == 0 ? "the task would run as root; this agent refuses that (--allow-root-tasks "
                     "permits it)"
                   : "the controller gave no uid to run the task as; this agent does not run "
                     "tenant tasks as root (--allow-root-tasks permits it)");
  }
  return std::pair<int64_t, int64_t>{l.uid, l.gid};
}

void Agent::Recover() {
  for (const std::string& id : ListTaskRecords(options_.data_dir)) {
    const std::string path = TaskRecordPath(options_.data_dir, id);
    StatusOr<TaskRecord> rec = LoadTaskRecord(path);
    if (!rec.ok()) {
      // Nothing to report it with, but whatever runs of it must not hold GPUs unseen.
      std::cerr << "tessera agent: " << path << ": " << rec.status().message()
                << "; killing what runs of that task\n";
      if (launcher_->Adopt(id, path).ok()) {
        (void)launcher_->Kill(id);
        orphans_.insert(id);
      }
      continue;
    }
    LocalTask t;
    t.launch = rec->launch;
    t.id = id;
    t.record = path;
    t.log_path = rec->log_path;
    seen_.insert(id);
    if (std::optional<std::string> why = ReadTaskMarker(path, "failed")) {
      t.exited = true;
      t.failed_to_start = true;
      t.exit_code = 0;  // it never ran (FailLaunch)
      t.message = *why;
      tasks_[id] = std::move(t);
      continue;
    }
    t.gpu_use = rec->gpu_use;
    t.mig = rec->mig;
    Status adopted = launcher_->Adopt(id, path);
    if (!adopted.ok()) {
      // Recorded but never started (the agent stopped in between): nothing ran.
      t.exited = true;
      t.lost = true;
      t.message = "the agent stopped before the task started";
      t.gpu_use.clear();
      tasks_[id] = std::move(t);
      continue;
    }
    for (const auto& [g, milli] : t.gpu_use) {
      gpu_used_[g] += milli;
    }
    std::vector<GpuLoad> load;
    for (const auto& [g, milli] : t.gpu_use) {
      load.push_back({g, "", milli, t.launch.gpu_memory_mib});
    }
    if (!load.empty()) {
      backend_->SetTaskLoad(id, std::move(load));
    }
    std::cerr << "tessera agent: re-attached task " << id << " left by an earlier agent\n";
    tasks_[id] = std::move(t);
  }
}

void Agent::Delivered(const std::vector<std::pair<std::string, int64_t>>& shipped,
                      const std::vector<TaskReport>& reported) {
  for (const auto& [id, offset] : shipped) {
    auto it = tasks_.find(id);
    if (it != tasks_.end()) {
      it->second.log_shipped = offset;
    }
  }
  Acknowledge(reported);
}

void Agent::Acknowledge(const std::vector<TaskReport>& reported) {
  std::set<uint64_t> jobs;
  for (const TaskReport& r : reported) {
    if (r.state == TaskState::kRunning) {
      continue;
    }
    auto it = tasks_.find(TaskRecordId(r.key));
    if (it == tasks_.end() || !it->second.exited) {
      continue;
    }
    if (!it->second.record.empty()) {  // a stop for a task it never had left none
      RemoveTaskRecord(it->second.record);
    }
    jobs.insert(r.key.job);
    tasks_.erase(it);
  }
  for (uint64_t job : jobs) {
    const bool more = std::any_of(tasks_.begin(), tasks_.end(),
                                  [&](const auto& kv) { return kv.second.launch.key.job == job; });
    if (!more) {
      RetireJobSandbox(options_.data_dir, job);
    }
  }
}

void Agent::Renew(Micros sent_wall_us) {
  if (lease_ <= 0) {
    return;
  }
  // The lease file's time is when the last answered request was sent; each task's
  // supervisor kills the task once it is older than the lease (TaskLauncher).
  const std::string path = options_.data_dir + "/lease";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return;
  }
  timespec times[2];
  times[0].tv_sec = times[1].tv_sec = sent_wall_us / 1'000'000;
  times[0].tv_nsec = times[1].tv_nsec = (sent_wall_us % 1'000'000) * 1000;
  (void)::futimens(fd, times);
  ::close(fd);
}

}  // namespace tessera
