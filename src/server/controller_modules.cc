// Controller: the locked step the feature modules' hooks (modules/controller_module.h,
// fanned out by modules/module_host.h) act through, and the facts they read. Modules
// see jobs and nodes as const views and change the core only through Step: a stop goes
// through the attempt machine (StopJob), a row through the step's durable batch.
// Services' transactions (Transact, Read) run on the same Step, as a ServiceStep
// (services/service_step.h).
#include <cstdlib>
#include <iostream>
#include <string>

#include "server/controller.h"
#include "server/job_attempts.h"

namespace tessera {

class Controller::Step final : public ServiceStep {
 public:
  // `out` null: a step that commits nothing (metrics, views, a read at acceptance): its
  // stops, signals and drains do nothing, a job is not started, and a row is a
  // programming error. `facade`: a user's call, which may let go of the core lock to
  // read an archived job (FindOrLoad); a hook runs mid-step and may not.
  Step(Controller& c, Micros now, Pending* out, bool facade = false)
      : c_(c), now_(now), out_(out), facade_(facade) {}

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
  bool VisitJob(JobNumber id, const std::function<void(const JobFacts&)>& visit) const override {
    c_.mu_.AssertHeld();
    const LiveJob* job = c_.jobs_.Find(id);
    if (job == nullptr) {
      return false;
    }
    visit(c_.FactsOf(*job));
    return true;
  }
  void SetDrain(const std::string& name, int gpu, std::optional<DrainInfo> drain) override {
    c_.mu_.AssertHeld();
    NodeInfo* node = c_.nodes_.Find(name);
    if (node != nullptr && out_ != nullptr) {
      c_.SetDrain(*node, gpu, std::move(drain), *out_);
    }
  }
  void Signal(JobNumber id, int signal, Micros grace) override {
    c_.mu_.AssertHeld();
    const LiveJob* job = c_.jobs_.Find(id);
    if (job == nullptr || out_ == nullptr) {
      return;
    }
    for (size_t t = 0; t < job->tasks.size(); ++t) {
      if (!c_.jobs_.TaskExited(*job, t)) {
        out_->stops.emplace_back(
            job->tasks[t].node,
            TaskStop{TaskKey{job->row.id, static_cast<int>(t), job->row.attempts},
                     (grace + 999) / 1000, signal});
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
  void Put(std::string key, std::string value) override {
    if (out_ == nullptr) {
      std::cerr << "tessera server: internal error: a module wrote '" << key
                << "' on a step that commits nothing\n";
      std::abort();
    }
    out_->batch.kv.emplace_back(std::move(key), std::move(value));
  }

  // ---- jobs a module runs itself on whole nodes (ValidationRuns) ----
  void ForEachNode(const std::function<void(const std::string& name, const NodeInfo&)>& visit)
      const override {
    c_.mu_.AssertHeld();
    for (const auto& [name, node] : c_.nodes_.all()) {
      visit(name, node);
    }
  }
  bool HasQueue(const std::string& queue) const override {
    c_.mu_.AssertHeld();
    return c_.core_.tree().FindQueue(queue).ok();
  }
  bool CoreReady() const override {
    c_.mu_.AssertHeld();
    return c_.core_.state() != nullptr && !c_.core_.rebuild_pending();
  }
  bool NodeIdle(const std::string& node) const override {
    c_.mu_.AssertHeld();
    if (c_.core_.state() == nullptr) {
      return false;
    }
    StatusOr<NodeId> id = c_.core_.state()->FindNode(node);
    if (!id.ok()) {
      return false;
    }
    const NodeLedger& n = c_.core_.state()->node(id.value());
    return n.used_cpu().value() == 0 && n.used_memory().value() == 0 && !n.HasGpuAllocations();
  }
  StatusOr<JobNumber> StartNodeJob(const std::string& node, const NodeJob& request) override {
    c_.mu_.AssertHeld();
    if (out_ == nullptr) {
      return FailedPreconditionError("a job cannot start on a step that commits nothing");
    }
    return c_.StartNodeJob(node, request, now_, *out_);
  }
  RowOutcome Outcome(JobNumber id) const override {
    c_.mu_.AssertHeld();
    const LiveJob* job = c_.jobs_.Find(id);
    return job != nullptr ? RowOutcome{job->row.exit_code, job->row.reason} : RowOutcome{};
  }
  void CancelPending(JobNumber id, const std::string& reason = "") override {
    c_.mu_.AssertHeld();
    LiveJob* job = c_.jobs_.Find(id);
    if (job == nullptr || job->slot == JobTable::kArchived || out_ == nullptr ||
        c_.jobs_.Rec(*job).phase != JobPhase::kPending) {
      return;
    }
    if (!reason.empty()) {
      job->row.reason = reason;
    }
    c_.core_.lifecycle()->Finish(c_.jobs_.Rec(*job), JobEnd::kCancelled, now_);
    out_->finished.push_back(job->id());
    job->row.end_us = now_;
    out_->dirty.insert(job->id());
  }
  void NodeHoldChanged(const std::string& name) override {
    c_.mu_.AssertHeld();
    const NodeInfo* node = c_.nodes_.Find(name);
    if (node != nullptr && node->up && !c_.core_.rebuild_pending()) {
      c_.ApplyDrains(*node);
    }
    c_.fit_stale_ = true;
  }

  // ---- GPU usage accounting (Accounting) ----
  void FillUsage(UsageRow& row, int attempt) const override {
    c_.mu_.AssertHeld();
    c_.host_.OnUsage(row, attempt, /*ended=*/false);
  }
  std::map<std::string, double> TenantQuotaGpus() const override {
    c_.mu_.AssertHeld();
    const QueueTree& tree = c_.core_.tree();
    std::map<std::string, double> quota_gpus;
    for (QueueId q : tree.queues()) {
      double& gpus = quota_gpus[tree.tenant(q)];
      for (size_t r = 0; r < tree.resources().size(); ++r) {
        if (tree.resources()[r].kind == ResourceKind::kGpu) {
          gpus += static_cast<double>(tree.quota(q, r).nominal) / 1000.0;
        }
      }
    }
    return quota_gpus;
  }

  // ---- pending jobs a module keeps back (JobGatesModule) ----
  void ForEachJob(const std::function<void(const JobFacts&)>& visit) const override {
    c_.mu_.AssertHeld();
    for (const auto& [id, job] : c_.jobs_.all()) {
      if (job.durable) {
        visit(c_.FactsOf(job));
      }
    }
  }
  const std::string& Reason(JobNumber id) const override {
    c_.mu_.AssertHeld();
    static const std::string kNone;
    const LiveJob* job = c_.jobs_.Find(id);
    return job != nullptr ? job->row.reason : kNone;
  }
  void Gate(JobNumber id) override {
    c_.mu_.AssertHeld();
    if (LiveJob* job = c_.jobs_.Find(id); job != nullptr) {
      c_.core_.lifecycle()->Gate(c_.jobs_.Rec(*job));  // ignored unless pending
    }
  }
  void Ungate(JobNumber id) override {
    c_.mu_.AssertHeld();
    if (LiveJob* job = c_.jobs_.Find(id); job != nullptr) {
      c_.core_.lifecycle()->Ungate(c_.jobs_.Rec(*job), now_);
    }
  }
  bool Gated(JobNumber id) const override {
    c_.mu_.AssertHeld();
    const LiveJob* job = c_.jobs_.Find(id);
    return job != nullptr && c_.core_.lifecycle()->Gated(c_.jobs_.Rec(*job).id);
  }
  bool FindOrLoad(JobNumber id, const std::function<void(const JobFacts&)>& visit) override {
    c_.mu_.AssertHeld();
    std::optional<LiveJob> archived;
    const LiveJob* job = facade_ ? c_.FindOrLoad(id, &archived)  // may let go of mu_
                                 : c_.jobs_.Find(id);
    if (job == nullptr) {
      return false;
    }
    visit(c_.FactsOf(*job));
    return true;
  }
  StatusOr<std::optional<JobRow>> LoadRow(JobNumber id) override {
    c_.mu_.AssertHeld();
    if (!c_.jobs_.MayExist(id)) {
      return std::optional<JobRow>();
    }
    return c_.store_->LoadJob(id.value());
  }

  // ---- a service's transaction (services/service_step.h) ----
  StatusOr<std::vector<JobNumber>> JobsNamed(const JobRef& ref) override {
    c_.mu_.AssertHeld();
    return c_.gates_.DependencyJobs(ref, *this, /*may_load=*/facade_, /*remember=*/false);
  }
  void SetReason(JobNumber id, std::string reason) override {
    c_.mu_.AssertHeld();
    LiveJob* job = c_.jobs_.Find(id);
    if (job == nullptr) {
      return;
    }
    if (out_ == nullptr) {
      std::cerr << "tessera server: internal error: a reason set on a step that commits nothing\n";
      std::abort();
    }
    job->row.reason = std::move(reason);
    out_->dirty.insert(id);
  }
  void WatchGates(JobNumber id) override {
    c_.mu_.AssertHeld();
    if (const LiveJob* job = c_.jobs_.Find(id); job != nullptr) {
      c_.gates_.Watch(c_.FactsOf(*job), *this);
    }
  }
  void RecheckGates() override {
    c_.mu_.AssertHeld();
    c_.gates_.Recheck();
  }
  void UpdateGates() override {
    c_.mu_.AssertHeld();
    c_.gates_.Update(*this);
  }
  void WakeLoop() override { wake_ = true; }
  bool wake() const { return wake_; }
  nlohmann::json Describe(JobNumber id) const override {
    c_.mu_.AssertHeld();
    const LiveJob* job = c_.jobs_.Find(id);
    return job != nullptr ? c_.JobJson(*job) : nlohmann::json(nullptr);
  }
  nlohmann::json DescribeFound(JobNumber id,
                               const std::function<bool(const JobFacts&)>& show) override {
    c_.mu_.AssertHeld();
    std::optional<LiveJob> archived;
    const LiveJob* job = facade_ ? c_.FindOrLoad(id, &archived)  // may let go of mu_
                                 : c_.jobs_.Find(id);
    return job != nullptr && show(c_.FactsOf(*job)) ? c_.JobJson(*job) : nlohmann::json(nullptr);
  }
  std::optional<Terminal> TerminalOf(JobNumber id, int task, int attempt) const override {
    c_.mu_.AssertHeld();
    std::optional<PtySessions::Endpoint> at = c_.ptys_.Find(id.value(), task, attempt);
    if (!at) {
      return std::nullopt;
    }
    return Terminal{at->address, at->port, c_.ptys_.Secret(TaskKey{id.value(), task, attempt})};
  }

  // ---- the admin's actions on nodes (services/node_actions.h) ----
  std::vector<JobNumber> JobsOnNode(const std::string& node) const override {
    c_.mu_.AssertHeld();
    std::vector<JobNumber> on;  // the table is in id order
    for (const auto& [id, job] : c_.jobs_.all()) {
      const JobPhase phase = c_.jobs_.Rec(job).phase;
      const bool runs = phase == JobPhase::kRunning || phase == JobPhase::kStopping;
      bool here = false;
      for (size_t t = 0; runs && !here && t < job.tasks.size(); ++t) {
        here = job.tasks[t].node == node && !c_.jobs_.TaskExited(job, t);
      }
      if (here) {
        on.push_back(id);
      }
    }
    return on;
  }
  void NodeDown(const std::string& name, const std::string& reason) override {
    c_.mu_.AssertHeld();
    if (NodeInfo* node = c_.nodes_.Find(name); node != nullptr && out_ != nullptr) {
      c_.NodeDown(*node, reason, now_, *out_);
    }
  }
  void ForgetNode(const std::string& name) override {
    c_.mu_.AssertHeld();
    if (c_.nodes_.Find(name) != nullptr && out_ != nullptr) {
      c_.ForgetNode(name, now_, *out_);
    }
  }
  void PutToken(TokenRow row) override {
    if (out_ == nullptr) {
      std::cerr << "tessera server: internal error: a token on a step that commits nothing\n";
      std::abort();
    }
    out_->batch.tokens.push_back(std::move(row));
  }
  nlohmann::json DescribeNode(const std::string& name) const override {
    c_.mu_.AssertHeld();
    nlohmann::json out(nullptr);
    if (Node(name) != nullptr) {
      c_.NodeInputs(name,
                    [&](const NodeViewInputs& in) { out = NodesJson(in, name, nullptr).at(0); });
    }
    return out;
  }

  // ---- the cluster's views (services/cluster_views.h) ----
  CoreFigures Figures() const override {
    c_.mu_.AssertHeld();
    const bool built = !c_.core_.rebuild_pending();
    const WorkloadLearner& learner = c_.core_.learner();
    return CoreFigures{
        c_.core_.tree(), built ? c_.core_.quota() : nullptr, built ? c_.core_.state() : nullptr,
        c_.nodes_.all(), c_.counters_,
        SchedulerFigures{c_.core_.rebuilds(), learner.observed(), learner.models_made(),
                         learner.model() == nullptr ? 0 : learner.model()->workload().tasks.size()},
        c_.core_.policy(), c_.options_.placement, c_.options_.seed};
  }
  void VisitNodeInputs(const std::string& only,
                       const std::function<void(const NodeViewInputs&)>& visit) const override {
    c_.mu_.AssertHeld();
    c_.NodeInputs(only, visit);
  }
  nlohmann::json FairShare(QueueId q) const override {
    c_.mu_.AssertHeld();
    return FairShareJson(c_.core_, q);
  }
  void DescribeQueue(const std::string& queue, nlohmann::json& out) const override {
    c_.mu_.AssertHeld();
    c_.host_.DescribeQueue(queue, c_.core_.queues_yaml(), out);
  }
  void WriteModuleMetrics(MetricsWriter& w) const override {
    c_.mu_.AssertHeld();
    c_.host_.WriteMetrics(*this, w);
  }

 private:
  Controller& c_;
  Micros now_;
  Pending* out_;
  bool facade_;
  bool wake_ = false;
};

JobFacts Controller::FactsOf(const LiveJob& job) const {
  const bool archived = job.slot == JobTable::kArchived;
  const JobState state = jobs_.StateOf(job);
  const int stored_restarts =
      archived ? StoredRestarts(StoredAttempts(job.row.placement_json)) : 0;
  const bool held = !archived && state == JobState::kPending && core_.lifecycle() != nullptr;
  return JobFacts{job.id(),
                  job.row.tenant,
                  job.row.queue,
                  job.row.attempts,
                  state,
                  archived ? nullptr : &jobs_.Rec(job),
                  job.submission,
                  job.row.tenant == kValidationTenant,
                  job.tasks.size(),
                  [&job](size_t t) -> const std::string& { return job.tasks[t].node; },
                  stored_restarts,
                  held ? core_.lifecycle()->HeldUntil(jobs_.Rec(job).id) : 0};
}

// ---- module facades (the gates', metrics, views) and hooks' steps ----

std::unique_ptr<ModuleStep> Controller::LockedStep(Micros now, Pending* out) {
  return std::make_unique<Step>(*this, now, out, /*facade=*/true);
}

std::unique_ptr<ModuleStep> Controller::HookStep(Micros now, Pending* out) {
  return std::make_unique<Step>(*this, now, out);
}

// ---- services' transactions (services/service_step.h) ----

Status Controller::Transact(const std::function<Status(ServiceStep&)>& decide,
                            const std::function<void(const ServiceStep&)>& sealed) {
  Pending out;
  Status status;
  bool wake = false;
  {
    MutexLock lock(mu_);
    Step step(*this, clock_->NowMicros(), &out, /*facade=*/true);
    status = decide(step);
    wake = step.wake();
    if (status.ok()) {
      Seal(out);
      if (sealed) {
        sealed(step);
      }
    }
  }
  if (status.ok()) {
    status = Publish(std::move(out));  // without mu_
  }
  if (wake) {
    Wake();
  }
  return status;
}

Status Controller::Read(const std::function<Status(ServiceStep&)>& read) {
  MutexLock lock(mu_);
  Step step(*this, clock_->NowMicros(), nullptr, /*facade=*/true);
  return read(step);
}

}  // namespace tessera
