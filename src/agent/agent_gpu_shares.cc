#include "agent/agent_gpu_shares.h"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>
#include <utility>

#include "agent/task_sandbox.h"
#include "model/node.h"

namespace tessera {

AgentGpuShares::AgentGpuShares(AgentGpuSharesOptions o) : data_dir_(o.data_dir) {
  StatusOr<std::string> found =
      FindCudaLimiter(o.cuda_limiter, o.exe_dir.empty() ? ThisExecutableDir() : o.exe_dir);
  if (found.ok() && !found->empty()) {
    StatusOr<std::string> installed = InstallCudaLimiter(*found, o.data_dir);
    if (installed.ok()) {
      limiter_ = *installed;
    } else {
      limiter_problem_ = installed.status().message();
    }
  } else if (!found.ok()) {
    limiter_problem_ = found.status().message();
  }
  if (!limiter_problem_.empty()) {
    std::cerr << "tessera agent: warning: " << limiter_problem_
              << "; tasks on shared GPUs run without the CUDA limiter (MPS limits only)\n";
  }
  // Made even with MPS off: its first Reconcile stops daemons an earlier agent left.
  mps_enabled_ = o.mps_control != "none";
  mps_multi_user_ = o.mps_multi_user;
  MpsSupervisorOptions mo;
  mo.root = o.data_dir + "/mps";
  if (mps_enabled_ && !o.mps_control.empty()) {
    mo.program = o.mps_control;
  }
  mps_ = std::make_unique<MpsSupervisor>(
      mo, o.clock, o.ops != nullptr ? std::move(o.ops) : MakeSystemMpsProcessOps());
}

AgentGpuShares::~AgentGpuShares() { Stop(false); }

void AgentGpuShares::OnInventory(const std::vector<DiscoveredGpu>& gpus) {
  MutexLock lock(mu_);
  if (stopped_) {
    return;
  }
  modes_.clear();
  std::vector<SharedGpu> shared;
  for (const DiscoveredGpu& g : gpus) {
    if (modes_.size() <= static_cast<size_t>(g.index)) {
      modes_.resize(static_cast<size_t>(g.index) + 1, SharingMode::kExclusive);
    }
    modes_[static_cast<size_t>(g.index)] = g.mode;
    if (g.mode == SharingMode::kShared) {
      shared.push_back(SharedGpu{g.index, g.uuid, g.mig_enabled});
    }
  }
  // Refusals are logged and listed in problems().
  (void)mps_->Reconcile(mps_enabled_ ? shared : std::vector<SharedGpu>{});
  WriteStatus();
}

void AgentGpuShares::Poll() {
  MutexLock lock(mu_);
  if (mps_ != nullptr && !stopped_) {
    mps_->Poll();
    WriteStatus();
  }
}

void AgentGpuShares::Stop(bool stop_daemons) {
  MutexLock lock(mu_);
  if (stopped_) {
    return;
  }
  stopped_ = true;
  if (mps_ != nullptr) {
    mps_->Shutdown(stop_daemons);
  }
}

void AgentGpuShares::AddEnv(const TaskLaunch& launch,
                            std::map<std::string, std::string>* env) const {
  MutexLock lock(mu_);
  std::optional<MpsDirs> mps;
  if (mps_ != nullptr && launch.gpus.size() == 1) {
    mps = mps_->Serving(launch.gpus[0]);
  }
  AddGpuShareEnv(launch, modes_, limiter_, mps, env);
}

std::vector<std::pair<std::string, std::string>> AgentGpuShares::Labels() const {
  MutexLock lock(mu_);
  if (std::find(modes_.begin(), modes_.end(), SharingMode::kShared) == modes_.end()) {
    return {};
  }
  std::string mps = "off";
  if (mps_enabled_) {
    const std::vector<MpsDaemonStatus> daemons = mps_->status();
    mps = std::all_of(daemons.begin(), daemons.end(),
                      [](const MpsDaemonStatus& s) { return s.problem.empty(); })
              ? "on"
              : "unavailable";
  }
  std::vector<std::pair<std::string, std::string>> labels = {
      {"cuda-limiter", limiter_.empty() ? "off" : "on"}, {std::string(kMpsLabel), mps}};
  if (mps_multi_user_ && mps == "on") {
    labels.emplace_back(std::string(kMpsMultiUserLabel), "on");
  }
  return labels;
}

std::vector<MpsDaemonStatus> AgentGpuShares::mps_status() const {
  MutexLock lock(mu_);
  return mps_ != nullptr ? mps_->status() : std::vector<MpsDaemonStatus>{};
}

std::vector<std::string> AgentGpuShares::problems() const {
  MutexLock lock(mu_);
  std::vector<std::string> out;
  if (!limiter_problem_.empty()) {
    out.push_back(limiter_problem_);
  }
  if (mps_ != nullptr) {
    for (const MpsDaemonStatus& s : mps_->status()) {
      if (!s.problem.empty()) {
        out.push_back(s.problem);
      }
    }
  }
  return out;
}

void AgentGpuShares::WriteStatus() {
  // For the admin on the node: the limiter, one line per shared GPU, and the problems;
  // written when it changes, only on nodes with shared GPUs.
  if (std::find(modes_.begin(), modes_.end(), SharingMode::kShared) == modes_.end()) {
    return;
  }
  std::ostringstream out;
  out << "limiter " << (limiter_.empty() ? "none" : limiter_) << "\n";
  if (!limiter_problem_.empty()) {
    out << "problem " << limiter_problem_ << "\n";
  }
  for (const MpsDaemonStatus& s :
       mps_ != nullptr ? mps_->status() : std::vector<MpsDaemonStatus>{}) {
    out << "gpu " << s.gpu << " " << s.uuid << " pid " << s.pid << " restarts " << s.restarts
        << " pipe " << s.dirs.pipe << "\n";
    if (!s.problem.empty()) {
      out << "problem " << s.problem << "\n";
    }
  }
  if (out.str() == written_status_ || !MakeDirs(data_dir_ + "/mps", 0755).ok()) {
    return;
  }
  std::ofstream file(data_dir_ + "/mps/status", std::ios::trunc);
  file << out.str();
  written_status_ = out.str();
}

}  // namespace tessera
