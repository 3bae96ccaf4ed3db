// JobIntake: job submission, the users' way in (POST /v1/jobs and /v1/jobs/batch; the
// controller hands it out as Controller::intake()). It checks a submission (who may
// submit, its queue, the queues' maxPending, whether it could ever run, whether its
// stored form reads back), makes it durable in one store commit, and only then has the
// core acknowledge it.
//
// Owns: the order of a submission's steps; the idempotency waits (a resend racing its
// first try waits on keys_cv_ for the first's commit); each queue's maxPending as read
// from the queue configuration (PendingBounds, job_admission.h).
// Uses: the core only through Core below (the controller implements it: IntakePort,
// controller_jobs.cc), and the pure rules of server/job_admission.h.
//
// Invariants:
//   - A job is acknowledged (visible, scheduled, counted) only once its row is durable.
//     A submission whose commit failed leaves nothing behind: its staged jobs and their
//     keys are forgotten; a failure of the store itself marks the controller unhealthy.
//   - An Idempotency-Key is answered once its first submission's commit settled: the same
//     body gets the first job (or the first batch's ids) back, marked replayed,
//     another body AlreadyExists; one still in flight after 30 s is Aborted. Of two
//     racing submissions under one key, one stages its jobs, the other waits and replays.
//   - A batch is all or nothing: every job is checked before any is staged, all of its
//     rows go in one commit, and its ids are consecutive (taken under one hold of the
//     core lock). Large batches are acknowledged a slice at a time.
//
// Lock discipline: the core lock is the controller's mu_, named here Core::lock(). The
// intake takes it around the steps that must see one state (resolving and preparing the
// jobs; looking their keys up and staging them; acknowledging) and lets go of it for the
// store commit (Commit EXCLUDES it), for the checks that need no core state, and while
// it waits for a key's first commit (keys_cv_, signalled with it held). No step of Core
// takes mu_ itself: those marked REQUIRES(lock()) run with it held; PrepareSubmission and
// SubmissionOf may let go of it for a while (FindOrLoad reads an archived job without
// it), so what was read before them is read again after. The others take no lock, or
// only their own (the published views'). bounds_mu_ guards the bounds' cache: after mu_,
// before the published views' lock (a bound is checked against the views' counts).
// Thread safety: every public method may be called from any thread.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "api/job_codec.h"
#include "base/clock.h"
#include "base/mutex.h"
#include "base/status.h"
#include "model/gpu_catalog.h"
#include "server/http/auth.h"
#include "server/job_admission.h"
#include "server/job_number.h"
#include "server/job_views.h"
#include "server/modules/job_gates.h"
#include "store/store.h"

namespace tessera {

class JobIntake {
 public:
  // What the intake needs of the core (the port). See the lock discipline above.
  class Core {
   public:
    virtual ~Core() = default;
    // The core lock (the controller's mu_).
    virtual Mutex& lock() const = 0;

    // ---- without the core lock ----
    // False once the store failed: no change is accepted.
    virtual bool healthy() const = 0;
    // The store failed a submission's commit: the controller accepts no more changes.
    virtual void StoreFailed() = 0;
    // Makes `batch` durable (the store's group commit).
    virtual Status Commit(WriteBatch batch) EXCLUDES(lock()) = 0;
    // What a submission that could never run is judged against (the published wait
    // context's fit verdicts; CheckSubmissionFits) and a queue's pending jobs now, from
    // the published views (their own lock).
    virtual std::shared_ptr<const WaitContext> FitContext() const = 0;
    virtual size_t PendingIn(const std::string& queue) const = 0;

    // ---- with the core lock held ----
    // `queue` checked against `who` (ResolveQueue, job_admission.h; filled in when
    // empty); returns its tenant.
    virtual StatusOr<std::string> ResolveQueue(const Principal& who, std::string& queue)
        REQUIRES(lock()) = 0;
    // The queue configuration's text (valid while the lock is held).
    virtual const std::string& QueuesYaml() const REQUIRES(lock()) = 0;
    // The array `text` names, parsed (the gates module's cache); null when it is not one.
    virtual std::shared_ptr<const JobGates::Array> ParsedArray(const std::string& text)
        REQUIRES(lock()) = 0;
    // The priority class resolved and the dependency's jobs found (the gates' rules);
    // may let go of the lock.
    virtual Status PrepareSubmission(const Principal& who, JobSubmission& job) REQUIRES(lock()) = 0;
    // The GPU tasks' unstated CPUs and memory, per GPU of their queue, bounded by the
    // nodes (GpuTaskDefaults; the core keeps it with the nodes' fit verdicts).
    virtual void ApplyGpuDefaults(std::span<JobSubmission> jobs) REQUIRES(lock()) = 0;
    // The job `tenant` submitted under Idempotency-Key `key` (in memory or archived), and
    // whether its submission's commit is still under way.
    virtual std::optional<JobNumber> FindKey(const std::string& tenant,
                                             const std::string& key) const REQUIRES(lock()) = 0;
    virtual bool InFlight(JobNumber id) const REQUIRES(lock()) = 0;
    // A job's submission, in memory or archived (read from the store: may let go of the
    // lock); `json` non-null: its JSON too, as GET /v1/jobs/{id} shows it. nullopt: none.
    virtual std::optional<JobSubmission> SubmissionOf(JobNumber id, nlohmann::json* json)
        REQUIRES(lock()) = 0;
    // The id for the next job: ids taken under one hold of the lock are consecutive.
    virtual JobNumber TakeId() REQUIRES(lock()) = 0;
    // A staged job: its row, invisible until acknowledged, and its key when the row has
    // one. Forget undoes it (its commit failed).
    virtual void AddStaged(const JobRow& row, JobSubmission job) REQUIRES(lock()) = 0;
    virtual void Forget(JobNumber id) REQUIRES(lock()) = 0;
    // A staged job is durable: counted, handed to the scheduler, published.
    // `spec_text_ok`: its stored spec text is known to be JSON (written just now).
    virtual void Acknowledge(JobNumber id, Micros now, bool spec_text_ok) REQUIRES(lock()) = 0;
    // An acknowledged job's JSON, as GET /v1/jobs/{id} shows it.
    virtual nlohmann::json JobJson(JobNumber id) const REQUIRES(lock()) = 0;
    // Wakes the scheduling loop (new jobs to place).
    virtual void Wake() REQUIRES(lock()) = 0;
  };

  JobIntake(Core& core, const GpuCatalog& catalog, const Clock& clock)
      : core_(core), catalog_(catalog), clock_(clock) {}
  JobIntake(const JobIntake&) = delete;
  JobIntake& operator=(const JobIntake&) = delete;

  // What a submission answers: the jobs it made or, for a resend under an Idempotency-Key,
  // the jobs the key's first submission made. The API's JSON of it is SubmittedJson
  // (views/job_json.h).
  struct Submitted {
    enum class Shape { kJob, kArray, kBatch };
    Shape shape = Shape::kJob;
    // The one job; an array's elements in index order (the first names the array); a
    // batch's jobs in the order given. An array's or a batch's ids are consecutive.
    std::vector<JobNumber> jobs;
    // Nothing was made: the key's first submission answered again.
    bool replayed = false;
    // kJob: the job as GET /v1/jobs/{id} showed it when answered. Rendered by the core
    // under its lock, since the job may be scheduled the moment the lock is let go of.
    nlohmann::json job_view;
  };

  // POST /v1/jobs. `key` non-empty: a second submission with the same key by the same
  // tenant is answered with the first job, replayed. An array is one batch of its
  // elements.
  StatusOr<Submitted> Submit(const Principal& who, JobSubmission job, const std::string& key)
      EXCLUDES(core_.lock());
  // POST /v1/jobs/batch: every job checked (queue, tenant), then all of them made
  // durable in one store commit and acknowledged together, or none. Errors name the job
  // ("jobs[3].queue: ..."). `key` non-empty: a retry of the same batch by the same tenant
  // is answered with the first batch's ids, replayed; another batch under the key is
  // AlreadyExists, one still being made durable Aborted.
  StatusOr<Submitted> SubmitBatch(const Principal& who, std::vector<JobSubmission> jobs,
                                  const std::string& key) EXCLUDES(core_.lock());
  // A queue's maxPending in the configuration `queues_yaml` (GET /v1/queues).
  int64_t MaxPending(const std::string& queue, const std::string& queues_yaml) EXCLUDES(bounds_mu_);

 private:
  // Who may submit, the batch's shape and the queues' maxPending (takes the lock).
  Status AdmitBatch(const Principal& who, const std::vector<JobSubmission>& jobs)
      EXCLUDES(core_.lock());
  // Arrays' elements in their place (takes the lock for the parsed arrays only).
  StatusOr<std::vector<JobSubmission>> FlattenArrays(std::vector<JobSubmission> jobs)
      EXCLUDES(core_.lock());
  // Each job's tenant, its queue resolved.
  StatusOr<std::vector<std::string>> BatchTenants(const Principal& who,
                                                  std::vector<JobSubmission>& jobs)
      REQUIRES(core_.lock());
  // Each job prepared (an array's elements share their first's) and given its per-GPU
  // defaults.
  Status PrepareBatch(const Principal& who, std::vector<JobSubmission>& jobs)
      REQUIRES(core_.lock());
  // The checks without the lock (each job could run; its stored form reads back): the
  // jobs' spec texts.
  StatusOr<std::vector<std::string>> CheckBatch(std::vector<JobSubmission>& jobs, Micros now);
  // With the lock again: the queues as they were, the key still free (else *replay: the
  // answer to a retry of the first batch), then every job staged into `batch`; their ids.
  StatusOr<std::vector<JobNumber>> StageBatch(
      const Principal& who, std::vector<JobSubmission>& jobs,
      const std::vector<std::string>& tenants, std::vector<std::string>& specs,
      const std::string& key, Micros now, WriteBatch& batch,
      std::optional<StatusOr<std::vector<JobNumber>>>* replay) EXCLUDES(core_.lock());
  // One job staged into `batch` under a new id (`key`: the job's own, may be empty).
  JobNumber Stage(const std::string& tenant, const std::string& key, JobSubmission job,
                  std::string spec_text, Micros now, WriteBatch& batch) REQUIRES(core_.lock());
  // After the commit of the staged `ids`: on a failure they are forgotten, the key's
  // waiters told, and the refusal returned; `what` names them ("the job", "the jobs").
  Status Settle(const Status& committed, const std::vector<JobNumber>& ids, const std::string& what)
      REQUIRES(core_.lock());
  // After a batch's commit: Settle, then the jobs acknowledged a slice at a time (the lock
  // let go of between slices) and the key's waiters told.
  Status FinishBatch(const Status& committed, const std::vector<JobNumber>& ids, Micros now)
      EXCLUDES(core_.lock());
  // An array submitted as one job: the batch of its elements, its errors without the
  // batch's "jobs[0]".
  StatusOr<Submitted> SubmitArray(const Principal& who, JobSubmission job, const std::string& key)
      EXCLUDES(core_.lock());
  // A single job whose key was used: the first job, replayed, when it is the same
  // request; nullopt when that job is gone (the submission goes on as a new one).
  StatusOr<std::optional<Submitted>> Replayed(const JobSubmission& job, JobNumber first,
                                              const std::string& key) REQUIRES(core_.lock());
  // A batch whose key was used: the first batch's ids when it is the same batch
  // (`tenants`: each job's tenant). Lets go of the lock while it compares.
  StatusOr<std::vector<JobNumber>> RetriedBatch(const std::vector<JobSubmission>& jobs,
                                                const std::vector<std::string>& tenants,
                                                const std::string& key) REQUIRES(core_.lock());
  // The job holding `tenant`'s key once no submission of it is in flight: a resend racing
  // its first try waits for the first's commit (keys_cv_, letting go of the lock).
  // nullopt: no job holds it; Aborted after 30 s without an outcome.
  StatusOr<std::optional<JobNumber>> SettledKey(const std::string& tenant, const std::string& key)
      REQUIRES(core_.lock());
  // ResourceExhausted (429) when `adding` (jobs by queue) would take a queue past its
  // maxPending.
  Status CheckPendingBound(const std::map<std::string, size_t>& adding) REQUIRES(core_.lock())
      EXCLUDES(bounds_mu_);

  Core& core_;
  const GpuCatalog& catalog_;
  const Clock& clock_;
  // Signalled with the core lock held whenever a submission's commit settled (SettledKey).
  CondVar keys_cv_;
  Mutex bounds_mu_;
  PendingBounds bounds_ GUARDED_BY(bounds_mu_);
};

}  // namespace tessera
