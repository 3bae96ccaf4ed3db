// The core's side of submissions (JobIntake's port, services/job_intake.h). Cancels are
// the JobActions service's (services/job_actions.h), the API's reads the JobReads
// service's (services/job_reads.h).
#include "server/controller.h"
#include "server/job_admission.h"

namespace tessera {

// JobIntake's port (services/job_intake.h): each step a few lines over the core's state.
class Controller::IntakePort final : public JobIntake::Core {
 public:
  explicit IntakePort(Controller& c) : c_(c) {}

  Mutex& lock() const override RETURN_CAPABILITY(c_.mu_) { return c_.mu_; }
  bool healthy() const override { return c_.healthy(); }
  void StoreFailed() override { c_.store_failed_ = true; }
  Status Commit(WriteBatch batch) override EXCLUDES(c_.mu_) {
    return c_.store_->Commit(std::move(batch));
  }
  std::shared_ptr<const WaitContext> FitContext() const override { return c_.views_.context(); }
  size_t PendingIn(const std::string& queue) const override { return c_.views_.PendingIn(queue); }

  StatusOr<std::string> ResolveQueue(const Principal& who, std::string& queue) override
      REQUIRES(c_.mu_) {
    return ::tessera::ResolveQueue(c_.core_.tree(), who, queue);
  }
  const std::string& QueuesYaml() const override REQUIRES(c_.mu_) { return c_.core_.queues_yaml(); }
  std::shared_ptr<const JobGates::Array> ParsedArray(const std::string& text) override
      REQUIRES(c_.mu_) {
    return c_.gates_.ParsedArray(text);
  }
  Status PrepareSubmission(const Principal& who, JobSubmission& job) override REQUIRES(c_.mu_) {
    return c_.PrepareSubmission(who, job);
  }
  void ApplyGpuDefaults(std::span<JobSubmission> jobs) override REQUIRES(c_.mu_) {
    c_.fits_.Refresh(c_.nodes_, c_.views_);  // the nodes bound the per-GPU defaults
    c_.fits_.ApplyDefaults(c_.core_.queues_yaml(), jobs);
  }
  std::optional<JobNumber> FindKey(const std::string& tenant, const std::string& key) const override
      REQUIRES(c_.mu_) {
    return c_.jobs_.FindKey(tenant, key);
  }
  bool InFlight(JobNumber id) const override REQUIRES(c_.mu_) { return c_.jobs_.InFlight(id); }
  std::optional<JobSubmission> SubmissionOf(JobNumber id, nlohmann::json* json) override
      REQUIRES(c_.mu_) {
    std::optional<LiveJob> archived;
    const LiveJob* job = c_.FindOrLoad(id, &archived);
    if (job == nullptr) {
      return std::nullopt;
    }
    if (json != nullptr) {
      *json = c_.JobJson(*job);
    }
    return job->submission;
  }
  JobNumber TakeId() override REQUIRES(c_.mu_) { return c_.jobs_.TakeId(); }
  void AddStaged(const JobRow& row, JobSubmission job) override REQUIRES(c_.mu_) {
    c_.jobs_.AddStaged(row, std::move(job));
  }
  void Forget(JobNumber id) override REQUIRES(c_.mu_) { c_.jobs_.Remove(id); }
  void Acknowledge(JobNumber id, Micros now, bool spec_text_ok) override REQUIRES(c_.mu_) {
    LiveJob& j = c_.jobs_.Acknowledge(id, spec_text_ok, *c_.catalog_);
    ++c_.counters_.submitted[j.row.queue];
    c_.core_.Submit(c_.jobs_.Rec(j), j.row.queue, now);
    // Gated at once when a hold or dependency may keep it.
    c_.host_.OnJobAccepted(c_.FactsOf(j), *c_.HookStep(now, nullptr));
    c_.PublishView(j);
  }
  nlohmann::json JobJson(JobNumber id) const override REQUIRES(c_.mu_) {
    return c_.JobJson(c_.jobs_.all().at(id));
  }
  void Wake() override REQUIRES(c_.mu_) { c_.Wake(); }

 private:
  Controller& c_;
};

std::unique_ptr<JobIntake::Core> Controller::MakeIntakePort() {
  return std::make_unique<IntakePort>(*this);
}

}  // namespace tessera
