// Controller: the feature modules' hooks (modules/controller_module.h) and the locked
// step they act through. Modules see jobs and nodes as const views and change the core
// only through Step: a stop goes through the attempt machine (StopJob), a row through
// the step's durable batch.
#include <string>

#include "server/controller.h"

namespace tessera {

class Controller::Step final : public ModuleStep {
 public:
  // `out` null: a read-only step (metrics, views); Stop, Republish and batch are not
  // called on one.
  Step(Controller& c, Micros now, Pending* out) : c_(c), now_(now), out_(out) {}

  Micros now() const override { return now_; }
  const std::string& queues_yaml() const override {
    c_.mu_.AssertHeld();
    return c_.core_.queues_yaml();
  }
  void ForEachRunningJob(const std::function<void(const JobFacts&)>& visit) const override {
    c_.mu_.AssertHeld();
    for (const auto& [id, job] : c_.jobs_.all()) {
      const JobState state = c_.jobs_.StateOf(job);
      if (job.durable && (state == JobState::kRunning || state == JobState::kStopping)) {
        visit(c_.FactsOf(job));
      }
    }
  }
  const NodeInfo* Node(const std::string& name) const override {
    c_.mu_.AssertHeld();
    auto it = c_.nodes_.all().find(name);
    return it != c_.nodes_.all().end() ? &it->second : nullptr;
  }
  Micros node_timeout() const override { return c_.options_.node_timeout; }
  Micros stop_grace() const override { return c_.options_.stop_grace; }
  void Stop(JobNumber id, const StopRequest& request, const std::string& reason) override {
    c_.mu_.AssertHeld();
    LiveJob* job = c_.jobs_.Find(id);
    if (job == nullptr || out_ == nullptr) {
      return;
    }
    const JobState state = c_.jobs_.StateOf(*job);
    if (state != JobState::kRunning && state != JobState::kStopping) {
      return;
    }
    if (!reason.empty()) {
      job->row.reason = reason;
    }
    c_.StopJob(*job, request, now_, *out_);
  }
  void Republish(JobNumber id) override {
    c_.mu_.AssertHeld();
    if (const LiveJob* job = c_.jobs_.Find(id); job != nullptr) {
      c_.PublishView(*job);
    }
  }
  WriteBatch& batch() override { return out_->batch; }

 private:
  Controller& c_;
  Micros now_;
  Pending* out_;
};

JobFacts Controller::FactsOf(const LiveJob& job) const {
  const bool archived = job.slot == JobTable::kArchived;
  return JobFacts{job.id(),
                  job.row.tenant,
                  job.row.queue,
                  job.row.attempts,
                  jobs_.StateOf(job),
                  archived ? nullptr : &jobs_.Rec(job),
                  job.tasks.size(),
                  [&job](size_t t) -> const std::string& { return job.tasks[t].node; }};
}

void Controller::ModulesBeforeCycle(Micros now, Pending& out) {
  Step step(*this, now, &out);
  for (ControllerModule* m : modules_) {
    m->BeforeCycle(step);
  }
}

void Controller::ModulesOnUsage(const LiveJob& job, UsageRow& row, bool ended) const {
  for (ControllerModule* m : modules_) {
    m->OnUsage(row, job.row.attempts, ended);
  }
}

void Controller::ModulesDescribeJob(const LiveJob& job, nlohmann::json& out) const {
  const JobFacts facts = FactsOf(job);
  for (const ControllerModule* m : modules_) {
    m->DescribeJob(facts, out);
  }
}

void Controller::ModulesWriteMetrics(Micros now, MetricsWriter& w) {
  const Step step(*this, now, nullptr);
  for (const ControllerModule* m : modules_) {
    m->WriteMetrics(step, w);
  }
}

}  // namespace tessera
