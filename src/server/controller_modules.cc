// Controller: the locked step the feature modules' hooks (modules/controller_module.h,
// fanned out by modules/module_host.h) act through, and the facts they read. Modules
// see jobs and nodes as const views and change the core only through Step: a stop goes
// through the attempt machine (StopJob), a row through the step's durable batch.
// Services' transactions (Transact, Read) run on the same Step, as a ServiceStep
// (services/service_step.h), and so does a submission's dependency check
// (PrepareSubmission).
#include <cstdlib>
#include <iostream>
#include <string>

#include "server/controller.h"
#include "server/job_admission.h"

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
  const std::string& queues_yaml() const override REQUIRES(c_.mu_) {
    return c_.core_.queues_yaml();
  }
  void ForEachRunningJob(const std::function<void(const JobFacts&)>& visit) const override
      REQUIRES(c_.mu_) {
    c_.jobs_.VisitFacts(/*running_only=*/true, c_.core_.lifecycle(), visit);
  }
  bool VisitJob(JobNumber id, const std::function<void(const JobFacts&)>& visit) const override
      REQUIRES(c_.mu_) {
    const LiveJob* job = c_.jobs_.Find(id);
    if (job == nullptr) {
      return false;
    }
    visit(c_.FactsOf(*job));
    return true;
  }
  void SetDrain(const std::string& name, int gpu, std::optional<DrainInfo> drain) override
      REQUIRES(c_.mu_) {
    NodeInfo* node = c_.nodes_.Find(name);
    if (node != nullptr && out_ != nullptr) {
      c_.SetDrain(*node, gpu, std::move(drain), *out_);
    }
  }
  void Signal(JobNumber id, int signal, Micros grace) override REQUIRES(c_.mu_) {
    if (const LiveJob* job = c_.jobs_.Find(id); job != nullptr && out_ != nullptr) {
      c_.jobs_.SignalStops(*job, signal, grace, out_->stops);
    }
  }
  const NodeInfo* Node(const std::string& name) const override REQUIRES(c_.mu_) {
    return c_.nodes_.Find(name);
  }
  Micros node_timeout() const override { return c_.options_.node_timeout; }
  Micros stop_grace() const override { return c_.options_.stop_grace; }
  void Stop(JobNumber id, const StopRequest& request, const std::string& reason) override
      REQUIRES(c_.mu_) {
    LiveJob* job = c_.jobs_.FindRunning(id);
    if (job == nullptr || out_ == nullptr) {
      return;
    }
    if (!reason.empty()) {
      job->row.reason = reason;
    }
    c_.StopJob(*job, request, now_, *out_);
  }
  void Republish(JobNumber id) override REQUIRES(c_.mu_) {
    if (const LiveJob* job = c_.jobs_.Find(id); job != nullptr) {
      c_.PublishView(*job);
    }
  }
  void Put(std::string key, std::string value) override {
    if (out_ == nullptr) {
      CommitsNothing("a module wrote '" + key + "'");
    }
    out_->batch.kv.emplace_back(std::move(key), std::move(value));
  }

  // ---- jobs a module runs itself on whole nodes (ValidationRuns) ----
  void ForEachNode(const std::function<void(const std::string& name, const NodeInfo&)>& visit)
      const override REQUIRES(c_.mu_) {
    for (const auto& [name, node] : c_.nodes_.all()) {
      visit(name, node);
    }
  }
  bool HasQueue(const std::string& queue) const override REQUIRES(c_.mu_) {
    return c_.core_.tree().FindQueue(queue).ok();
  }
  bool CoreReady() const override REQUIRES(c_.mu_) { return c_.core_.ready(); }
  bool NodeIdle(const std::string& node) const override REQUIRES(c_.mu_) {
    return c_.core_.NodeIdle(node);
  }
  StatusOr<JobNumber> StartNodeJob(const std::string& node, const NodeJob& request) override
      REQUIRES(c_.mu_) {
    if (out_ == nullptr) {
      return FailedPreconditionError("a job cannot start on a step that commits nothing");
    }
    return c_.StartNodeJob(node, request, now_, *out_);
  }
  RowOutcome Outcome(JobNumber id) const override REQUIRES(c_.mu_) {
    const LiveJob* job = c_.jobs_.Find(id);
    return job != nullptr ? RowOutcome{job->row.exit_code, job->row.reason} : RowOutcome{};
  }
  void CancelPending(JobNumber id, const std::string& reason = "") override REQUIRES(c_.mu_) {
    if (out_ != nullptr && c_.jobs_.CancelPending(id, reason, c_.core_.lifecycle(), now_)) {
      out_->finished.push_back(id);
      out_->dirty.insert(id);
    }
  }
  void NodeHoldChanged(const std::string& name) override REQUIRES(c_.mu_) {
    const NodeInfo* node = c_.nodes_.Find(name);
    if (node != nullptr && node->up && !c_.core_.rebuild_pending()) {
      c_.ApplyDrains(*node);
    }
    c_.fits_.MarkStale();
  }

  // ---- GPU usage accounting (Accounting) ----
  void FillUsage(UsageRow& row, int attempt) const override REQUIRES(c_.mu_) {
    c_.host_.OnUsage(row, attempt, /*ended=*/false);
  }
  std::map<std::string, double> TenantQuotaGpus() const override REQUIRES(c_.mu_) {
    return c_.core_.tree().TenantNominalGpus();
  }

  // ---- pending jobs a module keeps back (JobGatesModule) ----
  void ForEachJob(const std::function<void(const JobFacts&)>& visit) const override
      REQUIRES(c_.mu_) {
    c_.jobs_.VisitFacts(/*running_only=*/false, c_.core_.lifecycle(), visit);
  }
  const std::string& Reason(JobNumber id) const override REQUIRES(c_.mu_) {
    return c_.jobs_.ReasonOf(id);
  }
  void Gate(JobNumber id) override REQUIRES(c_.mu_) {
    c_.jobs_.Gate(id, *c_.core_.lifecycle());
  }
  void Ungate(JobNumber id) override REQUIRES(c_.mu_) {
    c_.jobs_.Ungate(id, *c_.core_.lifecycle(), now_);
  }
  bool Gated(JobNumber id) const override REQUIRES(c_.mu_) {
    return c_.jobs_.Gated(id, *c_.core_.lifecycle());
  }
  bool FindOrLoad(JobNumber id, const std::function<void(const JobFacts&)>& visit) override
      REQUIRES(c_.mu_) {
    std::optional<LiveJob> archived;
    const LiveJob* job = Found(id, archived);
    if (job == nullptr) {
      return false;
    }
    visit(c_.FactsOf(*job));
    return true;
  }
  StatusOr<std::optional<JobRow>> LoadRow(JobNumber id) override REQUIRES(c_.mu_) {
    if (!c_.jobs_.MayExist(id)) {
      return std::optional<JobRow>();
    }
    return c_.store_->LoadJob(id.value());
  }

  // ---- a service's transaction (services/service_step.h) ----
  JobGatesModule& gates() override REQUIRES(c_.mu_) { return c_.gates_; }
  void SetReason(JobNumber id, std::string reason) override REQUIRES(c_.mu_) {
    LiveJob* job = c_.jobs_.Find(id);
    if (job == nullptr) {
      return;
    }
    if (out_ == nullptr) {
      CommitsNothing("a reason set");
    }
    job->row.reason = std::move(reason);
    out_->dirty.insert(id);
  }
  void WakeLoop() override { wake_ = true; }
  bool wake() const { return wake_; }
  nlohmann::json Describe(JobNumber id) const override REQUIRES(c_.mu_) {
    const LiveJob* job = c_.jobs_.Find(id);
    return job != nullptr ? c_.JobJson(*job) : nlohmann::json(nullptr);
  }
  nlohmann::json DescribeFound(JobNumber id,
                               const std::function<bool(const JobFacts&)>& show) override
      REQUIRES(c_.mu_) {
    std::optional<LiveJob> archived;
    const LiveJob* job = Found(id, archived);
    return job != nullptr && show(c_.FactsOf(*job)) ? c_.JobJson(*job) : nlohmann::json(nullptr);
  }
  std::optional<Terminal> TerminalOf(JobNumber id, int task, int attempt) const override
      REQUIRES(c_.mu_) {
    return c_.ptys_.TerminalOf(id.value(), task, attempt);
  }

  // ---- the admin's actions on nodes (services/node_actions.h) ----
  std::vector<JobNumber> JobsOnNode(const std::string& node) const override REQUIRES(c_.mu_) {
    return c_.jobs_.JobsOnNode(node);
  }
  void NodeDown(const std::string& name, const std::string& reason) override REQUIRES(c_.mu_) {
    if (NodeInfo* node = c_.nodes_.Find(name); node != nullptr && out_ != nullptr) {
      c_.NodeDown(*node, reason, now_, *out_);
    }
  }
  void ForgetNode(const std::string& name) override REQUIRES(c_.mu_) {
    if (c_.nodes_.Find(name) != nullptr && out_ != nullptr) {
      c_.ForgetNode(name, now_, *out_);
    }
  }
  void PutToken(TokenRow row) override {
    if (out_ == nullptr) {
      CommitsNothing("a token");
    }
    out_->batch.tokens.push_back(std::move(row));
  }

  // ---- the cluster's views (services/cluster_views.h) ----
  CoreFigures Figures() const override REQUIRES(c_.mu_) {
    const bool built = !c_.core_.rebuild_pending();
    return CoreFigures{c_.core_.tree(),
                       built ? c_.core_.quota() : nullptr,
                       built ? c_.core_.state() : nullptr,
                       c_.nodes_.all(),
                       c_.counters_,
                       c_.core_.figures(),
                       c_.core_.policy(),
                       c_.options_.placement,
                       c_.options_.seed};
  }
  void VisitNodeInputs(const std::string& only,
                       const std::function<void(const NodeViewInputs&)>& visit) const override
      REQUIRES(c_.mu_) {
    const NodeUse use = NodeUseOf(c_.jobs_, only);
    auto hold = [this](const std::string& n) { return c_.host_.NodeHold(n); };
    visit(NodeViewInputs{c_.nodes_.all(), use.holds, use.used, *c_.catalog_,
                         ModuleHoldsOf(c_.nodes_.all(), only, hold)});
  }
  nlohmann::json FairShare(QueueId q) const override REQUIRES(c_.mu_) {
    return FairShareJson(c_.core_, q);
  }
  void DescribeQueue(const std::string& queue, nlohmann::json& out) const override
      REQUIRES(c_.mu_) {
    c_.host_.DescribeQueue(queue, c_.core_.queues_yaml(), out);
  }
  void WriteModuleMetrics(MetricsWriter& w) const override REQUIRES(c_.mu_) {
    c_.host_.WriteMetrics(*this, w);
  }

 private:
  // A row or change asked of a step that commits nothing: a programming error.
  [[noreturn]] static void CommitsNothing(const std::string& what) {
    std::cerr << "tessera server: internal error: " << what << " on a step that commits nothing\n";
    std::abort();
  }
  // Job `id` in memory or, on a facade's step, archived (read into `archived`, letting go
  // of mu_ while the store is read: FindOrLoad); null when there is none.
  const LiveJob* Found(JobNumber id, std::optional<LiveJob>& archived) REQUIRES(c_.mu_) {
    return facade_ ? c_.FindOrLoad(id, &archived) : c_.jobs_.Find(id);
  }

  Controller& c_;
  Micros now_;
  Pending* out_;
  bool facade_;
  bool wake_ = false;
};

JobFacts Controller::FactsOf(const LiveJob& job) const {
  return jobs_.FactsOf(job, core_.lifecycle());
}

// At submission, on a user's step (it may let go of mu_ to read an archived job).
Status Controller::PrepareSubmission(const Principal& who, JobSubmission& job) {
  if (job.array_index >= 0) {
    return InvalidArgumentError("array_index: is set by the server on each element of an array");
  }
  TESSERA_RETURN_IF_ERROR(ResolvePriorityClass(core_.tree(), job));
  Step step(*this, clock_->NowMicros(), nullptr, /*facade=*/true);
  return gates_.CheckDependency(job.dependency, step, [&who](const JobFacts& target) {
    return PublishedJobs::Visible(who, target.tenant);
  });
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
