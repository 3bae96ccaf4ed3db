#include "server/modules/module_host.h"

#include <algorithm>
#include <utility>

namespace tessera {

void ModuleHost::Add(std::unique_ptr<ControllerModule> module) {
  modules_.push_back(module.get());
  owned_.push_back(std::move(module));
}

void ModuleHost::Attach(ControllerModule& module, std::function<void()> after_cycle) {
  const size_t at = std::min(1 + attached_++, modules_.size());
  modules_.insert(modules_.begin() + static_cast<std::ptrdiff_t>(at), &module);
  if (after_cycle) {
    after_cycle_.push_back(std::move(after_cycle));
  }
}

Status ModuleHost::Load(Store& store) {
  for (ControllerModule* m : modules_) {
    TESSERA_RETURN_IF_ERROR(m->Load(store));
  }
  return Status::Ok();
}

void ModuleHost::OnStoredUsage(const std::vector<UsageRow>& rows) {
  for (ControllerModule* m : modules_) {
    m->OnStoredUsage(rows);
  }
}

void ModuleHost::BeforeCycle(ModuleStep& step) {
  for (ControllerModule* m : modules_) {
    m->BeforeCycle(step);
  }
}

void ModuleHost::BeforeDecide(ModuleStep& step) {
  for (ControllerModule* m : modules_) {
    m->BeforeDecide(step);
  }
}

void ModuleHost::OnJobAccepted(const JobFacts& job, ModuleStep& step) {
  for (ControllerModule* m : modules_) {
    m->OnJobAccepted(job, step);
  }
}

void ModuleHost::OnAttemptRunning(const JobFacts& job) const {
  for (ControllerModule* m : modules_) {
    m->OnAttemptRunning(job);
  }
}

void ModuleHost::OnOutput(JobNumber job, Micros now) {
  for (ControllerModule* m : modules_) {
    m->OnOutput(job, now);
  }
}

void ModuleHost::OnTelemetry(const NodeInfo& node, const std::vector<GpuTelemetry>& sample,
                             bool comparable, ModuleStep& step) {
  for (ControllerModule* m : modules_) {
    m->OnTelemetry(node, sample, comparable, step);
  }
}

void ModuleHost::OnUsage(UsageRow& row, int attempt, bool ended) const {
  for (ControllerModule* m : modules_) {
    m->OnUsage(row, attempt, ended);
  }
  if (ended) {
    for (ControllerModule* m : modules_) {
      m->OnIntervalEnded(row);
    }
  }
}

void ModuleHost::OnAttemptEnded(const JobFacts& job, const EndedAttempt& ended,
                                nlohmann::json& stored_attempt, const ModuleStep& step) {
  for (ControllerModule* m : modules_) {
    m->OnAttemptEnded(job, ended, stored_attempt, step);
  }
}

void ModuleHost::DescribeJob(const JobFacts& job, nlohmann::json& out) const {
  for (const ControllerModule* m : modules_) {
    m->DescribeJob(job, out);
  }
}

void ModuleHost::DescribeQueue(const std::string& queue, const std::string& queues_yaml,
                               nlohmann::json& out) {
  for (ControllerModule* m : modules_) {
    m->DescribeQueue(queue, queues_yaml, out);
  }
}

void ModuleHost::WriteMetrics(const ModuleStep& step, MetricsWriter& w) const {
  for (const ControllerModule* m : modules_) {
    m->WriteMetrics(step, w);
  }
}

std::string ModuleHost::NodeHold(const std::string& node) const {
  for (const ControllerModule* m : modules_) {
    if (std::string why = m->NodeHold(node); !why.empty()) {
      return why;
    }
  }
  return "";
}

void ModuleHost::OnLaunch(const std::string& tenant, const JobSubmission& job,
                          TaskLaunch& launch) const {
  for (const ControllerModule* m : modules_) {
    m->OnLaunch(tenant, job, launch);
  }
}

bool ModuleHost::OnTaskReport(const TaskReport& report) {
  bool changed = false;
  for (ControllerModule* m : modules_) {
    changed = m->OnTaskReport(report) || changed;
  }
  return changed;
}

std::string ModuleHost::JobNote(JobNumber job, int attempt) const {
  for (const ControllerModule* m : modules_) {
    if (std::string note = m->JobNote(job, attempt); !note.empty()) {
      return note;
    }
  }
  return "";
}

void ModuleHost::OnJobEvent(const JobRecord& job, const LifecycleEvent& event,
                            const QueueTree& tree) {
  for (ControllerModule* m : modules_) {
    m->OnJobEvent(job, event, tree);
  }
}

void ModuleHost::OnNodeJoined(const NodeInventory& inventory, ModuleStep& step) {
  for (ControllerModule* m : modules_) {
    m->OnNodeJoined(inventory, step);
  }
}

void ModuleHost::OnNodeRemoved(const std::string& name, ModuleStep& step) {
  for (ControllerModule* m : modules_) {
    m->OnNodeRemoved(name, step);
  }
}

void ModuleHost::Start() {
  for (ControllerModule* m : modules_) {
    m->Start();
  }
}

void ModuleHost::Stop() {
  for (auto it = modules_.rbegin(); it != modules_.rend(); ++it) {
    (*it)->Stop();
  }
}

void ModuleHost::AfterCycle() {
  for (const std::function<void()>& after : after_cycle_) {
    after();
  }
}

}  // namespace tessera
