// FakeModuleStep: a ModuleStep for feature modules' unit tests. The test owns the jobs
// (records and task nodes), the nodes and the clock; the step records what a module
// asked of the core (stops, republished views, rows).
#pragma once

#include <map>
#include <set>
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
    JobSubmission submission;
    bool internal = false;
    std::vector<std::string> task_nodes;
    std::string reason;  // the row's (Reason)
    int stored_restarts = 0;  // JobFacts::stored_restarts (an archived job's)
    Micros held_until = 0;    // JobFacts::held_until (a pending job's backoff)
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
  struct SignalSent {
    JobNumber job;
    int signal;
    Micros grace;
  };
  std::vector<SignalSent> signals;
  struct DrainSet {
    std::string node;
    int gpu;
    std::optional<DrainInfo> drain;
  };
  std::vector<DrainSet> drains;
  WriteBatch written;

  JobFacts FactsOf(uint64_t id) const {
    const Job& j = jobs.at(id);
    return JobFacts{JobNumber(id), j.tenant, j.queue, j.attempt, j.state, &j.record,
                    j.submission, j.internal, j.task_nodes.size(),
                    [&j](size_t t) -> const std::string& { return j.task_nodes[t]; },
                    j.stored_restarts, j.held_until};
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
  bool VisitJob(JobNumber job, const std::function<void(const JobFacts&)>& visit) const override {
    if (jobs.count(job.value()) == 0) {
      return false;
    }
    visit(FactsOf(job.value()));
    return true;
  }
  void SetDrain(const std::string& node, int gpu, std::optional<DrainInfo> drain) override {
    drains.push_back({node, gpu, drain});
    if (auto it = nodes.find(node); it != nodes.end() && gpu >= 0) {
      if (drain) {
        it->second.gpu_drains[gpu] = *drain;
      } else {
        it->second.gpu_drains.erase(gpu);
      }
    }
  }
  void Signal(JobNumber job, int signal, Micros signal_grace) override {
    signals.push_back({job, signal, signal_grace});
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
  void Put(std::string key, std::string value) override {
    written.kv.emplace_back(std::move(key), std::move(value));
  }

  // ---- jobs a module runs itself on whole nodes (ValidationRuns) ----
  // A job started by StartNodeJob joins `jobs` (running on its node, internal); the
  // test ends it by setting its state, record.phase and `outcomes`.
  std::set<std::string> queues = {"q"};
  bool core_ready = true;
  std::set<std::string> busy_nodes;  // nodes with work allocated (not idle)
  Status refuse_node_jobs = Status::Ok();
  uint64_t next_job = 1000;
  struct NodeJobStarted {
    JobNumber job;
    std::string node;
    NodeJob request;
  };
  std::vector<NodeJobStarted> node_jobs;
  std::map<uint64_t, RowOutcome> outcomes;
  std::vector<JobNumber> cancelled_pending;
  std::vector<std::string> hold_changes;

  void ForEachNode(const std::function<void(const std::string& name, const NodeInfo&)>& visit)
      const override {
    for (const auto& [name, n] : nodes) {
      visit(name, n);
    }
  }
  bool HasQueue(const std::string& queue) const override { return queues.count(queue) > 0; }
  bool CoreReady() const override { return core_ready; }
  bool NodeIdle(const std::string& node) const override {
    return nodes.count(node) > 0 && busy_nodes.count(node) == 0;
  }
  StatusOr<JobNumber> StartNodeJob(const std::string& node, const NodeJob& request) override {
    if (!refuse_node_jobs.ok()) {
      return refuse_node_jobs;
    }
    const JobNumber id(next_job++);
    Job& j = jobs[id.value()];
    j.tenant = request.tenant;
    j.queue = request.queue;
    j.internal = true;
    j.record.phase = JobPhase::kRunning;
    j.record.run_start = now_us;
    j.task_nodes = {node};
    node_jobs.push_back({id, node, request});
    return id;
  }
  RowOutcome Outcome(JobNumber job) const override {
    auto it = outcomes.find(job.value());
    return it != outcomes.end() ? it->second : RowOutcome{};
  }
  void CancelPending(JobNumber job, const std::string& reason = "") override {
    auto it = jobs.find(job.value());
    if (it != jobs.end() && it->second.record.phase == JobPhase::kPending) {
      if (!reason.empty()) {
        it->second.reason = reason;
      }
      it->second.record.phase = JobPhase::kFinished;
      it->second.state = JobState::kCancelled;
      cancelled_pending.push_back(job);
    }
  }
  void NodeHoldChanged(const std::string& node) override { hold_changes.push_back(node); }

  // ---- GPU usage accounting (Accounting) ----
  // `used_gpu_milli`: what the other modules measured of each running job's attempt (by
  // job id; FillUsage leaves the row's -1 for a job without one); `quota_gpus`: the
  // tenants of the queue configuration and their GPU quotas (TenantQuotaGpus).
  std::map<uint64_t, int64_t> used_gpu_milli;
  std::map<std::string, double> quota_gpus;
  void FillUsage(UsageRow& row, int attempt) const override {
    (void)attempt;
    if (auto it = used_gpu_milli.find(row.job); it != used_gpu_milli.end()) {
      row.used_gpu_milli = it->second;
    }
  }
  std::map<std::string, double> TenantQuotaGpus() const override { return quota_gpus; }

  // ---- pending jobs a module keeps back (JobGatesModule) ----
  // `gated`: the pending jobs Gate keeps back (Ungate lets go). Jobs in `archived` are
  // found only by FindOrLoad and LoadRow, as if read back from the store (`loads`
  // counts the reads; `load_error` fails LoadRow).
  std::set<uint64_t> gated;
  std::map<uint64_t, Job> archived;
  int loads = 0;
  Status load_error = Status::Ok();

  void ForEachJob(const std::function<void(const JobFacts&)>& visit) const override {
    for (const auto& [id, j] : jobs) {
      visit(FactsOf(id));
    }
  }
  const std::string& Reason(JobNumber job) const override {
    static const std::string kNone;
    auto it = jobs.find(job.value());
    return it != jobs.end() ? it->second.reason : kNone;
  }
  void Gate(JobNumber job) override {
    if (auto it = jobs.find(job.value()); it != jobs.end() && it->second.state == JobState::kPending) {
      gated.insert(job.value());
    }
  }
  void Ungate(JobNumber job) override { gated.erase(job.value()); }
  bool Gated(JobNumber job) const override { return gated.count(job.value()) != 0; }
  bool FindOrLoad(JobNumber job, const std::function<void(const JobFacts&)>& visit) override {
    if (VisitJob(job, visit)) {
      return true;
    }
    auto it = archived.find(job.value());
    ++loads;
    if (it == archived.end()) {
      return false;
    }
    const Job& j = it->second;
    visit(JobFacts{job, j.tenant, j.queue, j.attempt, j.state, nullptr, j.submission, j.internal,
                   0, [&j](size_t t) -> const std::string& { return j.task_nodes[t]; },
                   j.stored_restarts, j.held_until});
    return true;
  }
  StatusOr<std::optional<JobRow>> LoadRow(JobNumber job) override {
    ++loads;
    if (!load_error.ok()) {
      return load_error;
    }
    auto it = archived.find(job.value());
    if (it == archived.end()) {
      return std::optional<JobRow>();
    }
    JobRow row;
    row.id = job.value();
    row.state = std::string(JobStateName(it->second.state));
    row.attempts = it->second.attempt;
    return std::optional<JobRow>(std::move(row));
  }
};

}  // namespace tessera
