// FakeModuleStep: a ModuleStep for feature modules' unit tests. The test owns the jobs
// (records and task nodes), the nodes and the clock; the step records what a module
// asked of the core (stops, republished views, rows).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "server/modules/controller_module.h"
#include "server/node_registry.h"

namespace tessera {

class FakeModuleStep final : public ModuleStep {
 public:
  struct Job {
    std::string tenant = "t", queue = "q";
    int attempt = 1;
    JobState state = JobState::kRunning;
    JobRecord record;
    std::vector<std::string> task_nodes;
  };
  Micros now_us = 0;
  std::string yaml;
  std::map<uint64_t, Job> jobs;
  std::map<std::string, NodeInfo> nodes;
  Micros timeout = 30'000'000;
  Micros grace = 30'000'000;
  struct StopAsked {
    JobNumber job;
    StopRequest request;
    std::string reason;
  };
  std::vector<StopAsked> stops;
  std::vector<JobNumber> republished;
  WriteBatch written;

  JobFacts FactsOf(uint64_t id) const {
    const Job& j = jobs.at(id);
    return JobFacts{JobNumber(id), j.tenant, j.queue, j.attempt, j.state, &j.record,
                    j.task_nodes.size(),
                    [&j](size_t t) -> const std::string& { return j.task_nodes[t]; }};
  }

  Micros now() const override { return now_us; }
  const std::string& queues_yaml() const override { return yaml; }
  void ForEachRunningJob(const std::function<void(const JobFacts&)>& visit) const override {
    for (const auto& [id, j] : jobs) {
      if (j.state == JobState::kRunning || j.state == JobState::kStopping) {
        visit(FactsOf(id));
      }
    }
  }
  const NodeInfo* Node(const std::string& name) const override {
    auto it = nodes.find(name);
    return it != nodes.end() ? &it->second : nullptr;
  }
  Micros node_timeout() const override { return timeout; }
  Micros stop_grace() const override { return grace; }
  void Stop(JobNumber job, const StopRequest& request, const std::string& reason) override {
    stops.push_back({job, request, reason});
  }
  void Republish(JobNumber job) override { republished.push_back(job); }
  WriteBatch& batch() override { return written; }
};

}  // namespace tessera
