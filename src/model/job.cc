#include "model/job.h"

#include <string>

namespace tessera {

std::string_view TopologyScopeName(TopologyScope scope) {
  switch (scope) {
    case TopologyScope::kAny:
      return "any";
    case TopologyScope::kRack:
      return "rack";
    case TopologyScope::kBlock:
      return "block";
    case TopologyScope::kNvlinkDomain:
      return "nvlink";
    case TopologyScope::kNode:
      return "node";
  }
  return "any";
}

StatusOr<TopologyScope> ParseTopologyScope(std::string_view text) {
  for (TopologyScope s : {TopologyScope::kAny, TopologyScope::kBlock, TopologyScope::kRack,
                          TopologyScope::kNvlinkDomain, TopologyScope::kNode}) {
    if (text == TopologyScopeName(s)) {
      return s;
    }
  }
  return InvalidArgumentError("topology must be one of node, nvlink, rack, block, any; got '" +
                              std::string(text) + "'");
}

int64_t JobSpec::TotalGpuMilli(const GpuCatalog& catalog) const {
  int64_t total = 0;
  for (const TaskRequest& t : tasks) {
    total += t.TotalGpuMilli(catalog).value();
  }
  return total;
}

int JobSpec::TotalGpus() const {
  int total = 0;
  for (const TaskRequest& t : tasks) {
    total += t.gpu_count;
  }
  return total;
}

void SetShareIdentity(JobSpec& spec, uint64_t identity) {
  for (TaskRequest& t : spec.tasks) {
    t.identity = t.fractional() ? identity : 0;
  }
}

Status ValidateJobSpec(const JobSpec& spec, const GpuCatalog& catalog,
                       const RequestLimits& limits) {
  const std::string who = spec.name.empty() ? std::string("job") : "job '" + spec.name + "'";
  if (spec.queue.empty()) {
    return InvalidArgumentError(who + ": queue is required");
  }
  if (spec.tasks.empty()) {
    return InvalidArgumentError(who + ": needs at least one task");
  }
  if (spec.runtime_limit < 0 || spec.checkpoint_interval < 0 || spec.submit_time < 0) {
    return InvalidArgumentError(who +
                                ": submit time, runtime limit and checkpoint interval must be >= 0");
  }
  for (size_t i = 0; i < spec.tasks.size(); ++i) {
    Status s = ValidateTaskRequest(spec.tasks[i], catalog, limits);
    if (!s.ok()) {
      return InvalidArgumentError(who + " task " + std::to_string(i) + ": " + s.message());
    }
  }
  return Status::Ok();
}

}  // namespace tessera
