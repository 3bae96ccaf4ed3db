// Agent: launching tasks (declared in agent.h). A launch is prepared under the agent's
// lock (its GPUs reserved, its sandbox planned) and the task is then listed as starting;
// the slow part (its durable record, the fork of its shim) runs on a launch thread
// without the lock, so that launches overlap each other and the node's reports.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <utility>

#include "agent/agent.h"
#include "agent/task_records.h"

namespace tessera {

void Agent::Launch(const TaskLaunch& l) {
  const std::string id = TaskRecordId(l.key);
  auto spec = std::make_shared<LaunchSpec>();
  {
    MutexLock lock(mu_);
    if (!seen_.insert(id).second || tasks_.count(id) > 0) {
      return;  // a resend
    }
    LocalTask t;
    t.launch = l;
    t.launch.registry_auth.clear();  // a tenant's secret: for the pull (Spawn) alone
    t.id = id;
    t.record = TaskRecordPath(options_.data_dir, id);
    if (Status prepared = PrepareTask(t, spec.get()); !prepared.ok()) {
      FailLaunch(std::move(t), prepared.message());
      return;
    }
    t.starting = true;
    tasks_[id] = std::move(t);
  }
  const std::string& auth = l.registry_auth;
  {
    MutexLock lock(launch_mu_);
    if (!launchers_.empty()) {
      (l.container.empty() ? launch_queue_ : image_queue_).push_back([this, id, spec, auth] {
        Spawn(id, *spec, auth);
      });
      ++launches_in_flight_;
      launch_cv_.NotifyAll();  // both queues wait on one condition
      return;
    }
  }
  Spawn(id, *spec, auth);
}

void Agent::FailLaunch(LocalTask t, std::string message) {
  std::cerr << "tessera agent: task " << t.id << " failed to start: " << message << "\n";
  t.exited = true;
  t.failed_to_start = true;
  // No exit code: the program never ran (127 would read as "command not found" whatever
  // the cause, e.g. a MIG instance the driver would not create); the message says why.
  t.exit_code = 0;
  t.message = std::move(message);
  ReleaseTask(t);
  // Durable, so that the failure is reported even if this agent restarts first.
  TaskRecord rec{t.launch, t.log_path, {}, {}};
  if (SaveTaskRecord(t.record, rec).ok()) {
    (void)WriteTaskMarker(t.record, "failed", t.message);
  }
  const std::string id = t.id;
  tasks_[id] = std::move(t);
}

Status Agent::PrepareTask(LocalTask& t, LaunchSpec* spec) {
  const TaskLaunch& l = t.launch;
  TESSERA_ASSIGN_OR_RETURN(const auto run_as, RunAs(l));
  const auto [uid, gid] = run_as;
  TESSERA_RETURN_IF_ERROR(ReserveGpus(t));
  std::vector<std::string> visible;
  std::vector<GpuDeviceGrant> granted;
  TESSERA_RETURN_IF_ERROR(GrantDevices(t, &visible, &granted));
  std::string note;
  TESSERA_ASSIGN_OR_RETURN(*spec, BuildLaunchSpec(t, uid, gid, visible, granted, &note));
  t.log_path = spec->log_path;
  if (!note.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options_.data_dir + "/logs", ec);
    std::ofstream(spec->log_path, std::ios::app) << note;
  }
  return Status::Ok();
}

void Agent::Spawn(const std::string& id, LaunchSpec spec, const std::string& registry_auth) {
  TaskRecord record;
  {
    MutexLock lock(mu_);
    auto it = tasks_.find(id);
    if (it == tasks_.end()) {
      return;
    }
    record = TaskRecord{it->second.launch, it->second.log_path, it->second.gpu_use, it->second.mig};
  }
  // A container's image is pulled first (minutes, perhaps): the task is starting meanwhile.
  Status started = PrepareImage(id, record.launch, registry_auth);
  // Recorded before it starts: a restarted agent must know of every task that may run.
  if (started.ok()) {
    started = SaveTaskRecord(TaskRecordPath(options_.data_dir, id), record);
  }
  if (started.ok()) {
    StatusOr<int> pid = launcher_->Start(spec);
    if (!pid.ok() && !spec.cpus.empty() && pid.status().code() == StatusCode::kInvalidArgument) {
      spec.cpus.clear();  // the NUMA node's CPUs are not ours to use (a container)
      pid = launcher_->Start(spec);
    }
    started = pid.status();
    if (started.ok() && launcher_->PtyPort(id) > 0) {
      ReportSoon();  // where its terminal listens: `tessera run --pty` waits for it
    }
  }
  MutexLock lock(mu_);
  auto it = tasks_.find(id);
  if (it == tasks_.end()) {
    return;
  }
  LocalTask& t = it->second;
  t.starting = false;
  t.progress.clear();
  if (!started.ok()) {
    LocalTask failed = std::move(t);
    tasks_.erase(it);
    FailLaunch(std::move(failed), started.message());
    return;
  }
  std::vector<GpuLoad> load;
  for (const auto& [g, milli] : t.gpu_use) {
    load.push_back({g, "", milli, t.launch.gpu_memory_mib});
  }
  for (const auto& [g, uuid] : t.mig) {
    load.push_back({g, uuid, kMilliPerGpu, t.launch.gpu_memory_mib});
  }
  if (!load.empty()) {
    backend_->SetTaskLoad(t.id, std::move(load));
  }
  if (t.signalled_at > 0) {
    (void)launcher_->Signal(id, t.stop_signal);  // asked to stop while it was starting
  }
}

void Agent::LaunchLoop(std::deque<std::function<void()>>* queue) {
  MutexLock lock(launch_mu_);
  while (true) {
    launch_cv_.Wait(launch_mu_, [this, queue]() REQUIRES(launch_mu_) {
      return launch_stopping_ || !queue->empty();
    });
    if (queue->empty()) {
      return;
    }
    std::function<void()> job = std::move(queue->front());
    queue->pop_front();
    lock.Unlock();
    job();
    lock.Lock();
    --launches_in_flight_;
    launch_cv_.NotifyAll();
  }
}

void Agent::StartLaunchers() {
  MutexLock lock(launch_mu_);
  launch_stopping_ = false;
  for (int i = 0; i < kLaunchThreads; ++i) {
    launchers_.emplace_back([this] { LaunchLoop(&launch_queue_); });
    launchers_.emplace_back([this] { LaunchLoop(&image_queue_); });
  }
}

void Agent::StopLaunchers() {
  std::vector<std::thread> launchers;  // joined without the lock, which they need to end
  {
    MutexLock lock(launch_mu_);
    launch_cv_.Wait(launch_mu_, [this]() REQUIRES(launch_mu_) { return launches_in_flight_ == 0; });
    launch_stopping_ = true;
    launchers.swap(launchers_);
  }
  launch_cv_.NotifyAll();
  for (std::thread& t : launchers) {
    t.join();
  }
}

}  // namespace tessera
