// The core's side of submissions (JobIntake's port, services/job_intake.h) and of task
// output (what a report adds to the logs). Cancels are the JobActions service's
// (services/job_actions.h), the API's reads the JobReads service's (services/job_reads.h).
#include "server/controller.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <set>

#include "api/job_batch.h"
#include "api/queue_limits.h"
#include "server/job_rows.h"
#include "server/job_admission.h"
#include "server/pending_reasons.h"

namespace tessera {

using namespace job_rows;  // NOLINT: the controller's own helpers

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
    c_.RefreshFitVerdicts();  // the nodes bound the per-GPU defaults
    c_.gpu_task_defaults_.SetQueues(c_.core_.queues_yaml());
    for (JobSubmission& job : jobs) {
      c_.gpu_task_defaults_.Apply(job);
    }
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
    LiveJob& j = c_.jobs_.Add(JobNumber(row.id));  // finished (invisible to the core)
    j.row = row;
    j.submission = std::move(job);
    if (!row.idempotency_key.empty()) {
      c_.jobs_.AddKey(row.tenant, row.idempotency_key, j.id());
    }
  }
  void Forget(JobNumber id) override REQUIRES(c_.mu_) { c_.jobs_.Remove(id); }
  void Acknowledge(JobNumber id, Micros now, bool spec_text_ok) override REQUIRES(c_.mu_) {
    LiveJob& j = c_.jobs_.all().at(id);
    if (spec_text_ok) {
      j.spec_text_ok = 1;
    }
    c_.Acknowledge(j, now);
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

void Controller::Acknowledge(LiveJob& j, Micros now) {
  j.durable = true;
  ++counters_.submitted[j.row.queue];
  JobRecord& rec = jobs_.RecordSubmission(j, *catalog_);
  rec.phase = JobPhase::kPending;
  rec.queue = core_.tree().FindQueue(j.row.queue).value();
  core_.ObserveSubmission(rec.spec);
  // Enqueued now when the core is current, else by the rebuild before the next cycle.
  core_.lifecycle()->Submit(rec, now);
  // Gated at once when a hold or dependency may keep it.
  host_.OnJobAccepted(FactsOf(j), *HookStep(now, nullptr));
  PublishView(j);
}

void Controller::AppendLog(LiveJob& job, int task, int64_t offset, const std::string& data,
                           Pending& out) {
  TaskRun& run = job.tasks[static_cast<size_t>(task)];
  const int64_t end = offset + static_cast<int64_t>(data.size());
  if (data.empty() || end <= run.log_received) {
    return;  // already have it (a resent heartbeat)
  }
  const size_t skip = offset < run.log_received ? static_cast<size_t>(run.log_received - offset) : 0;
  out.logs.push_back(LogAppend{job.id(), task, data.substr(skip)});
  run.log_received = end;
  host_.OnOutput(job.id(), clock_->NowMicros());
}

}  // namespace tessera
