// Job submission: single jobs, arrays and batches, idempotent (job_intake.h).
#include "server/services/job_intake.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <string_view>
#include <utility>

#include "api/job_batch.h"
#include "server/modules/job_gates_module.h"
#include "server/pending_reasons.h"

namespace tessera {

namespace {

constexpr const char* kAgentsCannotSubmit = "agents cannot submit jobs";
constexpr const char* kStoreFailed = "the state store failed; the controller accepts no changes";
constexpr const char* kArrayIndexIsTheServers =
    "array_index: is set by the server on each element of an array";

// A retry must be the same request; where it was retried from (submit_dir) is not part
// of it.
bool SameRequest(const JobSubmission& retry, const JobSubmission& first,
                 const GpuCatalog& catalog) {
  JobSubmission again = retry;
  again.submit_dir = first.submit_dir;
  return JobSubmissionToJson(again, catalog) == JobSubmissionToJson(first, catalog);
}

JobIntake::Submitted SingleJobSubmitted(JobNumber id, nlohmann::json view, bool replayed) {
  JobIntake::Submitted out;
  out.jobs = {id};
  out.replayed = replayed;
  out.job_view = std::move(view);
  return out;
}

}  // namespace

StatusOr<JobIntake::Submitted> JobIntake::Submit(const Principal& who, JobSubmission job,
                                                 const std::string& key) {
  if (who.role == Role::kAgent) {
    return PermissionDeniedError(kAgentsCannotSubmit);
  }
  if (!core_.healthy()) {
    return UnavailableError(kStoreFailed);
  }
  if (!job.array.empty()) {
    return SubmitArray(who, std::move(job), key);
  }
  const Micros now = clock_.NowMicros();
  JobNumber id;
  WriteBatch batch;
  {
    MutexLock lock(core_.lock());
    StatusOr<std::string> resolved = core_.ResolveQueue(who, job.spec.queue);
    if (!resolved.ok()) {
      return resolved.status();
    }
    TESSERA_RETURN_IF_ERROR(core_.PrepareSubmission(who, job));
    core_.ApplyGpuDefaults(std::span<JobSubmission>(&job, 1));
    const std::string tenant = std::move(resolved).value();
    if (!key.empty()) {
      TESSERA_ASSIGN_OR_RETURN(std::optional<JobNumber> first, SettledKey(tenant, key));
      if (first) {
        TESSERA_ASSIGN_OR_RETURN(std::optional<Submitted> replayed, Replayed(job, *first, key));
        if (replayed) {
          return std::move(*replayed);
        }
      }
    }
    TESSERA_RETURN_IF_ERROR(CheckPendingBound({{job.spec.queue, 1}}));
    TESSERA_RETURN_IF_ERROR(CheckSubmissionFits(*core_.FitContext(), job.spec, job.hold_if_unfit));
    job.spec.submit_time = now;
    std::string spec_text = JobSubmissionToJson(job, catalog_).dump();
    TESSERA_RETURN_IF_ERROR(ReadsBack(spec_text, catalog_));
    id = Stage(tenant, key, std::move(job), std::move(spec_text), now, batch);
  }
  const Status committed = core_.Commit(std::move(batch));
  MutexLock lock(core_.lock());
  TESSERA_RETURN_IF_ERROR(Settle(committed, {id}, "the job"));
  core_.Acknowledge(id, now, /*spec_text_ok=*/false);
  keys_cv_.NotifyAll();
  core_.Wake();
  return SingleJobSubmitted(id, core_.JobJson(id), /*replayed=*/false);
}

StatusOr<std::optional<JobIntake::Submitted>> JobIntake::Replayed(const JobSubmission& job,
                                                                  JobNumber first,
                                                                  const std::string& key) {
  nlohmann::json view;
  std::optional<JobSubmission> existing = core_.SubmissionOf(first, &view);
  if (!existing) {
    return std::optional<Submitted>();  // no longer there: submitted afresh
  }
  // Anything but the same request under the same key is a client bug that silently
  // returning the first job would hide.
  if (!SameRequest(job, *existing, catalog_)) {
    return AlreadyExistsError("Idempotency-Key '" + key + "' was already used for job " +
                              ToString(first) +
                              " with a different body; use a new key for a new job");
  }
  return std::optional<Submitted>(SingleJobSubmitted(first, std::move(view), /*replayed=*/true));
}

StatusOr<JobIntake::Submitted> JobIntake::SubmitArray(const Principal& who, JobSubmission job,
                                                      const std::string& key) {
  // An array is one batch of its elements: one durable commit, consecutive ids.
  if (job.array_index >= 0) {
    return InvalidArgumentError(kArrayIndexIsTheServers);
  }
  std::vector<JobSubmission> one;
  one.push_back(std::move(job));
  StatusOr<Submitted> batch = SubmitBatch(who, std::move(one), key);
  if (!batch.ok()) {  // about the one job submitted: without the batch's "jobs[0]"
    std::string m = batch.status().message();
    for (std::string_view prefix : {"jobs[0].", "jobs[0]: "}) {
      if (m.rfind(prefix, 0) == 0) {
        m.erase(0, prefix.size());
      }
    }
    return Status(batch.status().code(), m);
  }
  Submitted out = std::move(batch).value();
  out.shape = Submitted::Shape::kArray;
  return out;
}

StatusOr<JobIntake::Submitted> JobIntake::SubmitBatch(const Principal& who,
                                                      std::vector<JobSubmission> jobs,
                                                      const std::string& key) {
  Submitted out;
  out.shape = Submitted::Shape::kBatch;
  TESSERA_RETURN_IF_ERROR(AdmitBatch(who, jobs));
  TESSERA_ASSIGN_OR_RETURN(jobs, FlattenArrays(std::move(jobs)));
  std::vector<std::string> tenants;
  {
    MutexLock lock(core_.lock());
    TESSERA_ASSIGN_OR_RETURN(tenants, BatchTenants(who, jobs));
    TESSERA_RETURN_IF_ERROR(PrepareBatch(who, jobs));
    if (!key.empty()) {
      TESSERA_ASSIGN_OR_RETURN(std::optional<JobNumber> first,
                               SettledKey(tenants[0], BatchJobKey(key, 0)));
      if (first) {
        TESSERA_ASSIGN_OR_RETURN(out.jobs, RetriedBatch(jobs, tenants, key));
        out.replayed = true;
        return out;
      }
    }
  }
  const Micros now = clock_.NowMicros();
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> specs, CheckBatch(jobs, now));
  WriteBatch batch;
  std::optional<StatusOr<std::vector<JobNumber>>> replay;
  TESSERA_ASSIGN_OR_RETURN(out.jobs,
                           StageBatch(who, jobs, tenants, specs, key, now, batch, &replay));
  if (replay) {
    TESSERA_ASSIGN_OR_RETURN(out.jobs, std::move(*replay));
    out.replayed = true;
    return out;
  }
  const Status committed = core_.Commit(std::move(batch));
  TESSERA_RETURN_IF_ERROR(FinishBatch(committed, out.jobs, now));
  return out;
}

Status JobIntake::AdmitBatch(const Principal& who, const std::vector<JobSubmission>& jobs) {
  if (who.role == Role::kAgent) {
    return PermissionDeniedError(kAgentsCannotSubmit);
  }
  if (!core_.healthy()) {
    return UnavailableError(kStoreFailed);
  }
  if (jobs.empty()) {
    return InvalidArgumentError("jobs: a batch needs at least one job");
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (jobs[i].array_index >= 0) {  // only the server sets it, on the elements it makes
      return AtJob(i, InvalidArgumentError(kArrayIndexIsTheServers));
    }
  }
  // A queue at its maxPending refuses before the arrays are expanded and the jobs
  // prepared (a flood at the bound costs little). Concurrent submissions may pass it
  // together: the bound holds to within one batch.
  std::map<std::string, size_t> adding;
  MutexLock lock(core_.lock());
  for (const JobSubmission& j : jobs) {
    std::string queue = j.spec.queue;
    if (!core_.ResolveQueue(who, queue).ok()) {
      continue;  // refused with its path later
    }
    std::shared_ptr<const JobGates::Array> a =
        j.array.empty() ? nullptr : core_.ParsedArray(j.array);
    adding[queue] += a != nullptr ? a->indices.size() : 1;
  }
  return CheckPendingBound(adding);
}

StatusOr<std::vector<JobSubmission>> JobIntake::FlattenArrays(std::vector<JobSubmission> jobs) {
  if (std::none_of(jobs.begin(), jobs.end(),
                   [](const JobSubmission& j) { return !j.array.empty(); })) {
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
      MutexLock lock(core_.lock());  // the parsed arrays' cache
      array = core_.ParsedArray(jobs[i].array);
    }
    if (array == nullptr) {
      return AtJob(
          i, InvalidArgumentError("array: '" + jobs[i].array + "' is not an array of indices"));
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

StatusOr<std::vector<std::string>> JobIntake::BatchTenants(const Principal& who,
                                                           std::vector<JobSubmission>& jobs) {
  std::vector<std::string> tenants(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    StatusOr<std::string> tenant = core_.ResolveQueue(who, jobs[i].spec.queue);
    if (!tenant.ok()) {
      return AtJob(i, tenant.status());
    }
    tenants[i] = std::move(tenant).value();
  }
  return tenants;
}

Status JobIntake::PrepareBatch(const Principal& who, std::vector<JobSubmission>& jobs) {
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
    Status prepared = core_.PrepareSubmission(who, jobs[i]);
    jobs[i].array_index = index;
    if (!prepared.ok()) {
      return AtJob(i, prepared);
    }
  }
  core_.ApplyGpuDefaults(jobs);
  return Status::Ok();
}

StatusOr<std::vector<std::string>> JobIntake::CheckBatch(std::vector<JobSubmission>& jobs,
                                                         Micros now) {
  // Each job as a single submission: one that could never run refuses the batch.
  const std::shared_ptr<const WaitContext> context = core_.FitContext();
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (Status s = CheckSubmissionFits(*context, jobs[i].spec, jobs[i].hold_if_unfit); !s.ok()) {
      return AtJob(i, s);
    }
  }
  return SpecTexts(jobs, now, catalog_);
}

StatusOr<std::vector<JobNumber>> JobIntake::StageBatch(
    const Principal& who, std::vector<JobSubmission>& jobs, const std::vector<std::string>& tenants,
    std::vector<std::string>& specs, const std::string& key, Micros now, WriteBatch& batch,
    std::optional<StatusOr<std::vector<JobNumber>>>* replay) {
  MutexLock lock(core_.lock());
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> again, BatchTenants(who, jobs));
  if (again != tenants) {
    return AbortedError("the queue configuration changed during the submission; retry");
  }
  if (!key.empty()) {
    // A resend that came in while this one was checked without the lock: the first to
    // take the key makes the jobs, the other answers as a replay of it.
    TESSERA_ASSIGN_OR_RETURN(std::optional<JobNumber> first,
                             SettledKey(tenants[0], BatchJobKey(key, 0)));
    if (first) {
      *replay = RetriedBatch(jobs, tenants, key);
      return std::vector<JobNumber>{};
    }
    for (size_t i = 1; i < jobs.size(); ++i) {
      if (core_.FindKey(tenants[i], BatchJobKey(key, i))) {
        return BatchKeyReused(key);
      }
    }
  }
  std::vector<JobNumber> ids;
  ids.reserve(jobs.size());
  batch.jobs.reserve(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    ids.push_back(Stage(tenants[i], key.empty() ? "" : BatchJobKey(key, i), std::move(jobs[i]),
                        std::move(specs[i]), now, batch));
  }
  return ids;
}

JobNumber JobIntake::Stage(const std::string& tenant, const std::string& key, JobSubmission job,
                           std::string spec_text, Micros now, WriteBatch& batch) {
  const JobNumber id = core_.TakeId();
  JobRow row = NewJobRow(id, tenant, job, std::move(spec_text), key, now);
  core_.AddStaged(row, std::move(job));  // invisible to the core until acknowledged
  batch.jobs.push_back(std::move(row));
  return id;
}

Status JobIntake::Settle(const Status& committed, const std::vector<JobNumber>& ids,
                         const std::string& what) {
  if (committed.ok()) {
    return Status::Ok();
  }
  for (JobNumber id : ids) {
    core_.Forget(id);
  }
  keys_cv_.NotifyAll();
  bool failed = false;
  Status refused = SubmitCommitError(committed, what, &failed);
  if (failed) {
    core_.StoreFailed();
  }
  return refused;
}

Status JobIntake::FinishBatch(const Status& committed, const std::vector<JobNumber>& ids,
                              Micros now) {
  MutexLock lock(core_.lock());
  TESSERA_RETURN_IF_ERROR(Settle(committed, ids, "the jobs"));
  // A slice at a time, so that cycles, heartbeats and other submissions are not held up
  // for the whole of a large batch (all of it is durable already; the jobs not yet
  // acknowledged stay invisible, and a resend of one of them waits for the last slice).
  constexpr size_t kAcknowledgeSlice = 256;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0 && i % kAcknowledgeSlice == 0) {
      lock.Unlock();
      lock.Lock();
    }
    core_.Acknowledge(ids[i], now, /*spec_text_ok=*/true);  // written by the JSON library
  }
  keys_cv_.NotifyAll();
  core_.Wake();
  return Status::Ok();
}

StatusOr<std::vector<JobNumber>> JobIntake::RetriedBatch(const std::vector<JobSubmission>& jobs,
                                                         const std::vector<std::string>& tenants,
                                                         const std::string& key) {
  const size_t n = jobs.size();
  std::vector<JobNumber> ids;
  ids.reserve(n);
  std::vector<JobSubmission> first;  // the first batch's jobs, compared without the lock
  first.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    TESSERA_ASSIGN_OR_RETURN(std::optional<JobNumber> id,
                             SettledKey(tenants[i], BatchJobKey(key, i)));
    std::optional<JobSubmission> found = id ? core_.SubmissionOf(*id, nullptr) : std::nullopt;
    if (!found) {
      return BatchKeyReused(key);
    }
    first.push_back(std::move(*found));
    ids.push_back(*id);
  }
  // A longer first batch has a job beyond this one's last.
  for (const std::string& tenant : std::set<std::string>(tenants.begin(), tenants.end())) {
    if (core_.FindKey(tenant, BatchJobKey(key, n))) {
      return BatchKeyReused(key);
    }
  }
  core_.lock().Unlock();
  bool same = true;
  for (size_t i = 0; i < n && same; ++i) {
    same = SameRequest(jobs[i], first[i], catalog_);
  }
  core_.lock().Lock();
  if (!same) {
    return BatchKeyReused(key);
  }
  return ids;
}

StatusOr<std::optional<JobNumber>> JobIntake::SettledKey(const std::string& tenant,
                                                         const std::string& key) {
  // Longer than any commit takes; a store that hangs longer fails on its own.
  constexpr auto kKeyWait = std::chrono::seconds(30);
  const auto deadline = std::chrono::steady_clock::now() + kKeyWait;
  while (true) {
    std::optional<JobNumber> id = core_.FindKey(tenant, key);
    if (!id || !core_.InFlight(*id)) {
      return id;
    }
    if (!keys_cv_.WaitUntil(core_.lock(), deadline) && core_.InFlight(*id)) {
      return AbortedError("a submission with this idempotency key is still in progress; retry");
    }
  }
}

Status JobIntake::CheckPendingBound(const std::map<std::string, size_t>& adding) {
  MutexLock bounds(bounds_mu_);
  return bounds_.Check(adding, core_.QueuesYaml(),
                       [this](const std::string& queue) { return core_.PendingIn(queue); });
}

int64_t JobIntake::MaxPending(const std::string& queue, const std::string& queues_yaml) {
  MutexLock bounds(bounds_mu_);
  return bounds_.Of(queue, queues_yaml);
}

}  // namespace tessera
