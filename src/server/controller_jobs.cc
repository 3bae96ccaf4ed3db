// The users' side of the controller: submissions (idempotent), job views, cancels and
// task logs.
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

StatusOr<nlohmann::json> Controller::Submit(const Principal& who, JobSubmission job,
                                            const std::string& idempotency_key, bool* created) {
  *created = false;
  if (who.role == Role::kAgent) {
    return PermissionDeniedError("agents cannot submit jobs");
  }
  if (!healthy()) {
    return UnavailableError("the state store failed; the controller accepts no changes");
  }
  if (!job.array.empty()) {
    // An array is one batch of its elements: one durable commit, consecutive ids.
    if (job.array_index >= 0) {
      return InvalidArgumentError("array_index: is set by the server on each element of an array");
    }
    std::vector<JobSubmission> one;
    one.push_back(std::move(job));
    StatusOr<nlohmann::json> batch = SubmitBatch(who, std::move(one), idempotency_key, created);
    if (!batch.ok()) {  // about the one job submitted: without the batch's "jobs[0]"
      std::string m = batch.status().message();
      for (std::string_view prefix : {"jobs[0].", "jobs[0]: "}) {
        if (m.rfind(prefix, 0) == 0) {
          m.erase(0, prefix.size());
        }
      }
      return Status(batch.status().code(), m);
    }
    nlohmann::json out = std::move(batch).value();
    out["array_job"] = out["ids"].front();
    out["id"] = out["ids"].front();
    return out;
  }
  const Micros now = clock_->NowMicros();
  JobNumber id;
  JobRow row;
  {
    MutexLock lock(mu_);
    StatusOr<std::string> resolved = ResolveQueue(core_.tree(), who, job.spec.queue);
    if (!resolved.ok()) {
      return resolved.status();
    }
    TESSERA_RETURN_IF_ERROR(PrepareSubmission(who, job));
    RefreshFitVerdicts();  // the nodes bound the per-GPU defaults
    gpu_task_defaults_.SetQueues(core_.queues_yaml());
    gpu_task_defaults_.Apply(job);
    const std::string tenant = std::move(resolved).value();
    const std::string& queue = job.spec.queue;
    if (!idempotency_key.empty()) {
      TESSERA_ASSIGN_OR_RETURN(std::optional<JobNumber> first,
                               SettledKey(tenant, idempotency_key));
      std::optional<LiveJob> archived;
      const LiveJob* found = first ? FindOrLoad(*first, &archived) : nullptr;
      if (found != nullptr) {
        const LiveJob& existing = *found;
        // A retry must be the same request; anything else under the same key is a client
        // bug that silently returning the first job would hide. Where it was retried
        // from (submit_dir) is not part of the request.
        JobSubmission retry = job;
        retry.submit_dir = existing.submission.submit_dir;
        if (JobSubmissionToJson(retry, *catalog_) !=
            JobSubmissionToJson(existing.submission, *catalog_)) {
          return AlreadyExistsError("Idempotency-Key '" + idempotency_key +
                                    "' was already used for job " + ToString(*first) +
                                    " with a different body; use a new key for a new job");
        }
        return JobJson(existing);
      }
    }
    TESSERA_RETURN_IF_ERROR(CheckPendingBound({{queue, 1}}));
    TESSERA_RETURN_IF_ERROR(CheckSubmissionFits(*views_.context(), job.spec, job.hold_if_unfit));
    job.spec.submit_time = now;
    std::string spec_text = JobSubmissionToJson(job, *catalog_).dump();
    TESSERA_RETURN_IF_ERROR(ReadsBack(spec_text, *catalog_));
    id = jobs_.TakeId();
    row = NewJobRow(id, tenant, job, std::move(spec_text), idempotency_key, now);
    LiveJob& j = jobs_.Add(id);  // finished (invisible to the core) until durable
    j.row = row;
    j.submission = std::move(job);
    if (!idempotency_key.empty()) {
      jobs_.AddKey(tenant, idempotency_key, id);
    }
  }
  WriteBatch batch;
  batch.jobs.push_back(std::move(row));
  Status s = store_->Commit(std::move(batch));
  MutexLock lock(mu_);
  KeysSettled();
  LiveJob& j = jobs_.all().at(id);
  if (!s.ok()) {
    jobs_.Remove(id);
    bool failed = false;
    Status refused = SubmitCommitError(s, "the job", &failed);
    if (failed) {
      store_failed_ = true;
    }
    return refused;
  }
  Acknowledge(j, now);
  *created = true;
  Wake();
  return JobJson(j);
}

Status Controller::AdmitBatch(const Principal& who, const std::vector<JobSubmission>& jobs) {
  if (who.role == Role::kAgent) {
    return PermissionDeniedError("agents cannot submit jobs");
  }
  if (!healthy()) {
    return UnavailableError("the state store failed; the controller accepts no changes");
  }
  if (jobs.empty()) {
    return InvalidArgumentError("jobs: a batch needs at least one job");
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (jobs[i].array_index >= 0) {  // only the server sets it, on the elements it makes
      return AtJob(i, InvalidArgumentError(
                          "array_index: is set by the server on each element of an array"));
    }
  }
  // A queue at its maxPending refuses before the arrays are expanded and the jobs
  // prepared (a flood at the bound costs little). Concurrent submissions may pass it
  // together: the bound holds to within one batch.
  std::map<std::string, size_t> adding;
  MutexLock lock(mu_);
  for (const JobSubmission& j : jobs) {
    std::string queue = j.spec.queue;
    if (!ResolveQueue(core_.tree(), who, queue).ok()) {
      continue;  // refused with its path later
    }
    std::shared_ptr<const JobGates::Array> a = j.array.empty() ? nullptr : gates_.ParsedArray(j.array);
    adding[queue] += a != nullptr ? a->indices.size() : 1;
  }
  return CheckPendingBound(adding);
}

StatusOr<std::vector<JobSubmission>> Controller::FlattenArrays(std::vector<JobSubmission> jobs) {
  if (std::none_of(jobs.begin(), jobs.end(), [](const JobSubmission& j) { return !j.array.empty(); })) {
    return jobs;
  }
  std::vector<JobSubmission> flat;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (jobs[i].array.empty()) {
      flat.push_back(std::move(jobs[i]));
      continue;
    }
    std::shared_ptr<const JobGates::Array> array;
    {
      MutexLock lock(mu_);  // the parsed arrays' cache
      array = gates_.ParsedArray(jobs[i].array);
    }
    if (array == nullptr) {
      return AtJob(i, InvalidArgumentError("array: '" + jobs[i].array +
                                           "' is not an array of indices"));
    }
    for (JobSubmission& e : JobGatesModule::ExpandArray(jobs[i], *array)) {
      flat.push_back(std::move(e));
    }
    if (flat.size() > kMaxBatchJobs) {
      return OutOfRangeError("jobs: a batch makes at most " + std::to_string(kMaxBatchJobs) +
                             " jobs, arrays' elements included");
    }
  }
  return flat;
}

StatusOr<std::vector<std::string>> Controller::BatchTenants(const Principal& who,
                                                            std::vector<JobSubmission>& jobs) {
  std::vector<std::string> tenants(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    StatusOr<std::string> tenant = ResolveQueue(core_.tree(), who, jobs[i].spec.queue);
    if (!tenant.ok()) {
      return AtJob(i, tenant.status());
    }
    tenants[i] = std::move(tenant).value();
  }
  return tenants;
}

Status Controller::PrepareBatch(const Principal& who, std::vector<JobSubmission>& jobs) {
  for (size_t i = 0; i < jobs.size(); ++i) {
    // Each element of one array alike: its first answers for all.
    if (i > 0 && !jobs[i].array.empty() && jobs[i].array == jobs[i - 1].array &&
        jobs[i].array_index > jobs[i - 1].array_index &&
        jobs[i].dependency == jobs[i - 1].dependency &&
        jobs[i].priority_class == jobs[i - 1].priority_class) {
      jobs[i].spec.priority = jobs[i - 1].spec.priority;
      continue;
    }
    const int64_t index = jobs[i].array_index;
    jobs[i].array_index = -1;  // set by the server, as expanded above
    Status prepared = PrepareSubmission(who, jobs[i]);
    jobs[i].array_index = index;
    if (!prepared.ok()) {
      return AtJob(i, prepared);
    }
  }
  RefreshFitVerdicts();  // the nodes bound the per-GPU defaults
  gpu_task_defaults_.SetQueues(core_.queues_yaml());
  for (JobSubmission& job : jobs) {
    gpu_task_defaults_.Apply(job);
  }
  return Status::Ok();
}

std::vector<JobNumber> Controller::StageBatch(std::vector<JobSubmission>& jobs,
                                              const std::vector<std::string>& tenants,
                                              std::vector<std::string>& specs,
                                              const std::string& key, Micros now,
                                              WriteBatch& batch) {
  std::vector<JobNumber> ids;
  ids.reserve(jobs.size());
  batch.jobs.reserve(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    const JobNumber id = jobs_.TakeId();
    JobRow row = NewJobRow(id, tenants[i], jobs[i], std::move(specs[i]),
                           key.empty() ? "" : BatchJobKey(key, i), now);
    LiveJob& j = jobs_.Add(id);  // finished (invisible to the core) until durable
    j.row = row;
    j.submission = std::move(jobs[i]);
    if (!key.empty()) {
      jobs_.AddKey(row.tenant, row.idempotency_key, id);
    }
    batch.jobs.push_back(std::move(row));
    ids.push_back(id);
  }
  return ids;
}

StatusOr<nlohmann::json> Controller::SubmitBatch(const Principal& who,
                                                 std::vector<JobSubmission> jobs,
                                                 const std::string& key, bool* created) {
  *created = false;
  TESSERA_RETURN_IF_ERROR(AdmitBatch(who, jobs));
  TESSERA_ASSIGN_OR_RETURN(jobs, FlattenArrays(std::move(jobs)));
  const size_t n = jobs.size();
  std::vector<std::string> tenants;
  {
    MutexLock lock(mu_);
    TESSERA_ASSIGN_OR_RETURN(tenants, BatchTenants(who, jobs));
    TESSERA_RETURN_IF_ERROR(PrepareBatch(who, jobs));
    if (!key.empty()) {
      TESSERA_ASSIGN_OR_RETURN(std::optional<JobNumber> first,
                               SettledKey(tenants[0], BatchJobKey(key, 0)));
      if (first) {
        return RetriedBatch(jobs, tenants, key);
      }
    }
  }
  // Each job as a single submission: one that could never run refuses the batch.
  const std::shared_ptr<const WaitContext> context = views_.context();
  for (size_t i = 0; i < n; ++i) {
    if (Status s = CheckSubmissionFits(*context, jobs[i].spec, jobs[i].hold_if_unfit); !s.ok()) {
      return AtJob(i, s);
    }
  }
  const Micros now = clock_->NowMicros();
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> specs, SpecTexts(jobs, now, *catalog_));
  WriteBatch batch;
  std::vector<JobNumber> ids;
  {
    MutexLock lock(mu_);
    TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> again, BatchTenants(who, jobs));
    if (again != tenants) {
      return AbortedError("the queue configuration changed during the submission; retry");
    }
    if (!key.empty()) {
      // A resend that came in while this one was checked without the lock: the first
      // to take the key makes the jobs, the other answers as a replay of it.
      TESSERA_ASSIGN_OR_RETURN(std::optional<JobNumber> first,
                               SettledKey(tenants[0], BatchJobKey(key, 0)));
      if (first) {
        return RetriedBatch(jobs, tenants, key);
      }
      for (size_t i = 1; i < n; ++i) {
        if (jobs_.FindKey(tenants[i], BatchJobKey(key, i))) {
          return BatchKeyReused(key);
        }
      }
    }
    ids = StageBatch(jobs, tenants, specs, key, now, batch);
  }
  Status s = store_->Commit(std::move(batch));
  MutexLock lock(mu_);
  KeysSettled();
  if (!s.ok()) {
    for (JobNumber id : ids) {
      jobs_.Remove(id);
    }
    bool failed = false;
    Status refused = SubmitCommitError(s, "the jobs", &failed);
    if (failed) {
      store_failed_ = true;
    }
    return refused;
  }
  // A slice at a time, so that cycles, heartbeats and other submissions are not held up
  // for the whole of a large batch (all of it is durable already; the jobs not yet
  // acknowledged stay invisible).
  constexpr size_t kAcknowledgeSlice = 256;
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && i % kAcknowledgeSlice == 0) {
      lock.Unlock();
      lock.Lock();
    }
    LiveJob& j = jobs_.all().at(ids[i]);
    j.spec_text_ok = 1;  // written by the JSON library just now
    Acknowledge(j, now);
    out.push_back(ids[i].value());
  }
  *created = true;
  Wake();
  return nlohmann::json{{"ids", std::move(out)}};
}

StatusOr<nlohmann::json> Controller::RetriedBatch(const std::vector<JobSubmission>& jobs,
                                                  const std::vector<std::string>& tenants,
                                                  const std::string& key) {
  const size_t n = jobs.size();
  nlohmann::json ids = nlohmann::json::array();
  std::vector<JobSubmission> first;  // the first batch's jobs, compared without the lock
  first.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    TESSERA_ASSIGN_OR_RETURN(std::optional<JobNumber> id,
                             SettledKey(tenants[i], BatchJobKey(key, i)));
    std::optional<LiveJob> archived;
    const LiveJob* found = id ? FindOrLoad(*id, &archived) : nullptr;
    if (found == nullptr) {
      return BatchKeyReused(key);
    }
    first.push_back(found->submission);
    ids.push_back(id->value());
  }
  // A longer first batch has a job beyond this one's last.
  for (const std::string& tenant : std::set<std::string>(tenants.begin(), tenants.end())) {
    if (jobs_.FindKey(tenant, BatchJobKey(key, n))) {
      return BatchKeyReused(key);
    }
  }
  mu_.Unlock();
  bool same = true;
  for (size_t i = 0; i < n && same; ++i) {
    // As for a single job, where it was retried from is not part of the request.
    JobSubmission retry = jobs[i];
    retry.submit_dir = first[i].submit_dir;
    same = JobSubmissionToJson(retry, *catalog_) == JobSubmissionToJson(first[i], *catalog_);
  }
  mu_.Lock();
  if (!same) {
    return BatchKeyReused(key);
  }
  return nlohmann::json{{"ids", std::move(ids)}};
}

StatusOr<std::optional<JobNumber>> Controller::SettledKey(const std::string& tenant,
                                                          const std::string& key) {
  // Longer than any commit takes; a store that hangs longer fails on its own.
  constexpr auto kKeyWait = std::chrono::seconds(30);
  const auto deadline = std::chrono::steady_clock::now() + kKeyWait;
  while (true) {
    std::optional<JobNumber> id = jobs_.FindKey(tenant, key);
    if (!id || !jobs_.InFlight(*id)) {
      return id;
    }
    if (!keys_cv_.WaitUntil(mu_, deadline) &&
        jobs_.InFlight(*id)) {
      return AbortedError("a submission with this idempotency key is still in progress; retry");
    }
  }
}

Status Controller::CheckPendingBound(const std::map<std::string, size_t>& adding) {
  return pending_bounds_.Check(adding, core_.queues_yaml(),
                               [this](const std::string& queue) { return views_.PendingIn(queue); });
}

void Controller::Acknowledge(LiveJob& j, Micros now) {
  j.durable = true;
  ++counters_.submitted[j.row.queue];
  JobRecord& rec = jobs_.Rec(j);
  rec.spec = j.submission.spec;
  rec.attempt.policy = j.submission.restart.value_or(DefaultRestartPolicy());
  rec.phase = JobPhase::kPending;
  rec.gpu_milli = rec.spec.TotalGpuMilli(*catalog_);
  rec.queue = core_.tree().FindQueue(j.row.queue).value();
  core_.ObserveSubmission(rec.spec);
  // Enqueued now when the core is current, else by the rebuild before the next cycle.
  core_.lifecycle()->Submit(rec, now);
  ModulesOnJobAccepted(j, now);  // gated at once when a hold or dependency may keep it
  PublishView(j);
}

StatusOr<nlohmann::json> Controller::GetJob(const Principal& who, JobNumber id) {
  TESSERA_ASSIGN_OR_RETURN(std::string text, GetJobText(who, id));
  nlohmann::json out = nlohmann::json::parse(text, nullptr, false);
  if (out.is_discarded()) {
    return InternalError("job " + ToString(id) + ": its view is not JSON");
  }
  return out;
}

StatusOr<std::string> Controller::GetJobText(const Principal& who, JobNumber id) {
  if (std::shared_ptr<const JobView> view = views_.Get(id)) {
    if (!PublishedJobs::Visible(who, view->tenant)) {
      return NotFoundError("no job " + ToString(id));
    }
    return views_.Text(*view);
  }
  // Not published: archived out of memory (read from the store), or no such job.
  MutexLock lock(mu_);
  std::optional<LiveJob> archived;
  const LiveJob* job = FindOrLoad(id, &archived);
  if (job == nullptr || !PublishedJobs::Visible(who, job->row.tenant)) {
    return NotFoundError("no job " + ToString(id));
  }
  return JobJson(*job).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

StatusOr<nlohmann::json> Controller::Cancel(const Principal& who, JobNumber id) {
  Pending out;
  nlohmann::json result;
  {
    MutexLock lock(mu_);
    std::optional<LiveJob> archived;
    const LiveJob* found = FindOrLoad(id, &archived);
    if (found == nullptr || !PublishedJobs::Visible(who, found->row.tenant)) {
      return NotFoundError("no job " + ToString(id));
    }
    TESSERA_RETURN_IF_ERROR(MayChange(who, found->id(), found->submission.spec.user));
    if (Terminal(jobs_.StateOf(*found))) {  // archived jobs are all terminal
      return FailedPreconditionError(
          "job " + ToString(id) + " has already " +
          (jobs_.StateOf(*found) == JobState::kCancelled ? "been cancelled" : std::string(JobStateName(jobs_.StateOf(*found)))));
    }
    LiveJob* job = jobs_.Find(id);
    const Micros now = clock_->NowMicros();
    JobRecord& rec = jobs_.Rec(*job);
    if (rec.phase == JobPhase::kPending) {
      core_.lifecycle()->Finish(rec, JobEnd::kCancelled, now);
      out.finished.push_back(id);
      job->row.end_us = now;
      job->row.reason = "cancelled before it started, by " + Actor(who);
      out.dirty.insert(id);
    } else {
      StopJob(*job,
              StopRequest{AttemptEnd::kCancel, RequeueCause::kPreempted, options_.stop_grace,
                          "cancelled by " + Actor(who)},
              now, out);
    }
    Seal(out);
    result = JobJson(*job);
  }
  TESSERA_RETURN_IF_ERROR(Publish(std::move(out)));
  return result;
}

StatusOr<LogChunk> Controller::ReadLog(const Principal& who, JobNumber id, int task, int64_t offset,
                                       int64_t max_bytes) {
  std::string state;
  int replicas = 0;
  // A published job without the controller's lock (as GetJobText); an archived one from
  // the store.
  if (std::shared_ptr<const JobView> view = views_.Get(id)) {
    if (!PublishedJobs::Visible(who, view->tenant)) {
      return NotFoundError("no job " + ToString(id));
    }
    replicas = view->tasks;
    state = view->state;
  } else {
    MutexLock lock(mu_);
    std::optional<LiveJob> archived;
    const LiveJob* job = FindOrLoad(id, &archived);
    if (job == nullptr || !PublishedJobs::Visible(who, job->row.tenant)) {
      return NotFoundError("no job " + ToString(id));
    }
    replicas = static_cast<int>(job->submission.spec.tasks.size());
    state = std::string(JobStateName(jobs_.StateOf(*job)));
  }
  if (task < 0 || task >= replicas) {
    return InvalidArgumentError("task must be in 0.." + std::to_string(replicas - 1));
  }
  TESSERA_ASSIGN_OR_RETURN(LogChunk chunk, logs_.Read(id, task, offset, max_bytes));
  chunk.job_state = std::move(state);
  return chunk;
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
  for (ControllerModule* m : modules_) {
    m->OnOutput(job.id(), clock_->NowMicros());
  }
}

}  // namespace tessera
