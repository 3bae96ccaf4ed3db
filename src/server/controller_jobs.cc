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
#include "server/controller_rows.h"
#include "server/pending_reasons.h"

namespace tessera {

using namespace controller_rows;  // NOLINT: the controller's own helpers

namespace {

// What is stored must read back at the next start (a row that does not would be
// quarantined then): a job the reader would refuse is refused now, naming its field.
Status ReadsBack(const std::string& text, const GpuCatalog& catalog) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) {
    return InternalError("the job as it would be stored is not JSON");
  }
  StatusOr<JobSubmission> back = JobSubmissionFromJson(j, catalog);
  if (!back.ok()) {
    return InvalidArgumentError(back.status().message() + " (as it would be stored)");
  }
  return Status::Ok();
}

}  // namespace

bool Controller::Visible(const Principal& who, const LiveJob& job) const {
  return who.role == Role::kAdmin || (who.role == Role::kTenant && who.tenant == job.row.tenant);
}

Status Controller::MayChange(const Principal& who, const LiveJob& job) const {
  if (who.role == Role::kAdmin || who.user.empty() || job.submission.spec.user == who.user) {
    return Status::Ok();
  }
  return PermissionDeniedError("job " + ToString(job.id()) + " is " +
                               (job.submission.spec.user.empty()
                                    ? std::string("the tenant's")
                                    : "user '" + job.submission.spec.user + "''s") +
                               ": only its user or the tenant's own token may change it");
}

std::string Controller::Actor(const Principal& who) {
  if (!who.user.empty()) {
    return "user " + who.user;
  }
  return (who.role == Role::kAdmin ? "admin " : "tenant token ") +
         (who.name.empty() ? std::string("(unnamed)") : who.name);
}

StatusOr<std::string> Controller::ResolveQueue(const Principal& who, std::string& queue) const {
  std::string tenant = who.tenant;
  if (queue.empty()) {
    for (QueueId q : core_.tree().queues()) {
      if (who.role == Role::kAdmin || core_.tree().tenant(q) == tenant) {
        queue = core_.tree().spec(q).name;
        break;
      }
    }
    if (queue.empty()) {
      return FailedPreconditionError("tenant '" + tenant + "' has no queue");
    }
  }
  StatusOr<QueueId> q = core_.tree().FindQueue(queue);
  if (!q.ok()) {
    return InvalidArgumentError("queue: no queue named '" + queue + "'");
  }
  if (who.role == Role::kAdmin) {
    return core_.tree().tenant(q.value());
  }
  if (core_.tree().tenant(q.value()) != tenant) {
    return PermissionDeniedError("queue '" + queue + "' belongs to another tenant");
  }
  return tenant;
}

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
    StatusOr<std::string> resolved = ResolveQueue(who, job.spec.queue);
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
    row.spec_json = JobSubmissionToJson(job, *catalog_).dump();
    TESSERA_RETURN_IF_ERROR(ReadsBack(row.spec_json, *catalog_));
    id = jobs_.TakeId();
    row.id = id.value();
    row.tenant = tenant;
    row.queue = queue;
    row.name = job.spec.name;
    row.idempotency_key = idempotency_key;
    row.state = std::string(JobStateName(JobState::kPending));
    row.submit_us = now;
    row.reason = job.hold ? HeldReason() : "waiting for the next scheduling cycle";
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
    return SubmitCommitFailed(s, "the job");
  }
  Acknowledge(j, now);
  *created = true;
  Wake();
  return JobJson(j);
}

namespace {

// The Idempotency-Key of the i-th job of a batch submitted under `key`: a byte that no
// HTTP header carries keeps it apart from every single submission's key.
std::string BatchJobKey(const std::string& key, size_t i) {
  return key + '\x1f' + std::to_string(i);
}

std::string JobPath(size_t i) { return "jobs[" + std::to_string(i) + "]"; }

// `s` about the i-th job of a batch: "jobs[3].queue: ..." or "jobs[3]: ...".
Status AtJob(size_t i, const Status& s) {
  const std::string& m = s.message();
  return Status(s.code(), JobPath(i) + (m.rfind("queue: ", 0) == 0 ? "." : ": ") + m);
}

Status BatchKeyReused(const std::string& key) {
  return AlreadyExistsError("Idempotency-Key '" + key +
                            "' was already used for a batch of other jobs; use a new key for a "
                            "new batch");
}

// The spec text of each job's row, the costly part of a submission (written without the
// lock), each read back as the controller will read it after a restart.
StatusOr<std::vector<std::string>> BatchSpecTexts(std::vector<JobSubmission>& jobs, Micros now,
                                                  const GpuCatalog& catalog) {
  std::vector<std::string> specs(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].spec.submit_time = now;
    specs[i] = JobSubmissionToJson(jobs[i], catalog).dump();
    // An array's elements differ only in their index: its first answers for all.
    const bool element = i > 0 && !jobs[i].array.empty() && jobs[i].array == jobs[i - 1].array;
    if (Status back = element ? Status::Ok() : ReadsBack(specs[i], catalog); !back.ok()) {
      return AtJob(i, back);
    }
  }
  return specs;
}

}  // namespace

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
    if (!ResolveQueue(who, queue).ok()) {
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
    StatusOr<std::string> tenant = ResolveQueue(who, jobs[i].spec.queue);
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
    JobRow row;
    row.id = id.value();
    row.tenant = tenants[i];
    row.queue = jobs[i].spec.queue;
    row.name = jobs[i].spec.name;
    row.idempotency_key = key.empty() ? "" : BatchJobKey(key, i);
    row.spec_json = std::move(specs[i]);
    row.state = std::string(JobStateName(JobState::kPending));
    row.submit_us = now;
    row.reason = jobs[i].hold ? HeldReason() : "waiting for the next scheduling cycle";
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
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> specs, BatchSpecTexts(jobs, now, *catalog_));
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
    return SubmitCommitFailed(s, "the jobs");
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

int64_t Controller::MaxPendingOf(const std::string& queue) {
  if (pending_bounds_.yaml != core_.queues_yaml()) {
    // Checked when the configuration was accepted (queue_config.cc); unreadable: defaults.
    StatusOr<std::map<std::string, int64_t>> bounds = QueueMaxPending(core_.queues_yaml());
    pending_bounds_.by_queue = bounds.ok() ? std::move(bounds).value() : std::map<std::string, int64_t>{};
    pending_bounds_.yaml = core_.queues_yaml();
  }
  auto it = pending_bounds_.by_queue.find(queue);
  return it != pending_bounds_.by_queue.end() ? it->second : kDefaultMaxPending;
}

Status Controller::CheckPendingBound(const std::map<std::string, size_t>& adding) {
  for (const auto& [queue, n] : adding) {
    const auto bound = static_cast<size_t>(MaxPendingOf(queue));
    const size_t now = views_.PendingIn(queue);
    if (now + n > bound) {
      return ResourceExhaustedError(
          "queue '" + queue + "' has " + std::to_string(now) + " pending jobs and holds at most " +
          std::to_string(bound) + " (maxPending in the queue configuration); this submission makes " +
          std::to_string(n) + ": wait for some to start, or ask the admin to raise the bound");
    }
  }
  return Status::Ok();
}

Status Controller::SubmitCommitFailed(const Status& s, const std::string& what) {
  // A batch the store cannot take (too large for one etcd transaction) was refused
  // whole, before anything was written: the store has not failed.
  if (s.code() == StatusCode::kInvalidArgument) {
    return InvalidArgumentError("could not make " + what + " durable: " + s.message());
  }
  // The store refused the key and wrote nothing of the batch (each batch is all or
  // nothing): a job this controller does not hold in memory has it, one whose row it
  // could not read at its start (quarantined) or one archived past the key's
  // retention.
  if (s.code() == StatusCode::kAlreadyExists) {
    return AlreadyExistsError("Idempotency-Key already used: " + s.message() +
                              "; use a new key for a new job");
  }
  store_failed_ = true;
  return UnavailableError("could not make " + what + " durable: " + s.message());
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
  if (job == nullptr || !Visible(who, *job)) {
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
    if (found == nullptr || !Visible(who, *found)) {
      return NotFoundError("no job " + ToString(id));
    }
    TESSERA_RETURN_IF_ERROR(MayChange(who, *found));
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
    if (job == nullptr || !Visible(who, *job)) {
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
