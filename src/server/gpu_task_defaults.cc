#include "server/gpu_task_defaults.h"

#include <algorithm>
#include <iostream>

namespace tessera {

void GpuTaskDefaults::SetQueues(std::string_view yaml) {
  if (yaml == yaml_ && !yaml_.empty()) {
    return;
  }
  yaml_ = std::string(yaml);
  StatusOr<std::map<std::string, PerGpuDefaults>> read = QueuePerGpuDefaults(yaml_);
  if (!read.ok()) {
    std::cerr << "tessera server: the queues' per-GPU defaults do not read ("
              << read.status().message() << "); the embedded ones apply\n";
    by_queue_.clear();
    return;
  }
  by_queue_ = std::move(read).value();
}

void GpuTaskDefaults::SetNodes(const NodeRegistry& nodes) {
  room_.clear();
  for (const auto& [name, node] : nodes.all()) {
    const NodeSpec& spec = node.inventory.spec;
    std::map<GpuModelId, int64_t> gpus;
    for (const GpuSpec& g : spec.gpus) {
      ++gpus[g.model];
    }
    for (const auto& [model, n] : gpus) {
      PerGpuRoom& r = room_[model];
      r.cpu_milli = std::max(r.cpu_milli, spec.cpu.value() / n);
      r.memory_mib = std::max(r.memory_mib, spec.memory.value() / n);
      r.node_cpu_milli = std::max(r.node_cpu_milli, spec.cpu.value());
      r.node_memory_mib = std::max(r.node_memory_mib, spec.memory.value());
    }
  }
}

void GpuTaskDefaults::ApplyAll(std::string_view yaml, std::span<JobSubmission> jobs) {
  SetQueues(yaml);
  for (JobSubmission& job : jobs) {
    Apply(job);
  }
}

void GpuTaskDefaults::Apply(JobSubmission& job) const {
  auto it = by_queue_.find(job.spec.queue);
  ApplyPerGpuDefaults(job, it == by_queue_.end() ? PerGpuDefaults{} : it->second, room_,
                      *catalog_);
}

}  // namespace tessera
