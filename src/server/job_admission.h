// JobAdmission: the rules a submission passes before the controller makes it durable,
// and who may change a job. Pure functions and one small cache, so that the rules are
// tested on their own and the controller core only sequences them under its lock.
//
//   - A submission's queue: its tenant's first when none is named; a tenant submits only
//     to its own queues (ResolveQueue).
//   - What is stored must read back at the next start (ReadsBack, SpecTexts): a row the
//     reader would refuse would be quarantined then, so it is refused now.
//   - A queue holds at most its maxPending pending jobs (PendingBounds).
//   - A batch's errors name the job ("jobs[3].queue: ..."); a batch's jobs' idempotency
//     keys are the batch's key and the job's index (BatchJobKey).
//   - Who may change a job (MayChange), and how a job's reason names who acted (Actor).
//
// Thread safety: functions; a PendingBounds is guarded by its owner (the controller's
// core lock).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "api/job_codec.h"
#include "base/clock.h"
#include "base/status.h"
#include "model/gpu_catalog.h"
#include "model/queue_tree.h"
#include "server/http/auth.h"
#include "server/job_number.h"
#include "store/store.h"

namespace tessera {

// `queue` checked against `who` (filled in with its tenant's first queue when empty);
// returns the queue's tenant. FailedPrecondition for a tenant without a queue,
// InvalidArgument for an unknown queue, PermissionDenied for another tenant's.
StatusOr<std::string> ResolveQueue(const QueueTree& tree, const Principal& who,
                                   std::string& queue);

// The job's priority from its priority_class (none named: unchanged); InvalidArgument
// listing the classes the configuration has when it names another.
Status ResolvePriorityClass(const QueueTree& tree, JobSubmission& job);

// InvalidArgument naming the field when `text` (a job as it would be stored) would not
// read back.
Status ReadsBack(const std::string& text, const GpuCatalog& catalog);

// Each job's stored spec text, its submit time set to `now`, each read back (an array's
// elements after its first are alike and not read again). Errors name the job.
StatusOr<std::vector<std::string>> SpecTexts(std::vector<JobSubmission>& jobs, Micros now,
                                             const GpuCatalog& catalog);

// `s` about the i-th job of a batch: "jobs[3].queue: ..." or "jobs[3]: ...".
Status AtJob(size_t i, const Status& s);
// The Idempotency-Key of the i-th job of a batch submitted under `key`.
std::string BatchJobKey(const std::string& key, size_t i);
// AlreadyExists: the key was used for a batch of other jobs.
Status BatchKeyReused(const std::string& key);

// A new job's row: pending, waiting for a cycle (or held).
JobRow NewJobRow(JobNumber id, const std::string& tenant, const JobSubmission& job,
                 std::string spec_text, const std::string& key, Micros now);

// The answer to a submission whose commit failed: InvalidArgument (a batch too large
// for the store, nothing written) and AlreadyExists (the store holds the key) are the
// client's; anything else is the store's failure (*store_failed set).
Status SubmitCommitError(const Status& s, const std::string& what, bool* store_failed);

// Whether `who` may cancel, hold, release or requeue a job it can see: the admin, a
// token of the job's tenant as a whole (its coordinator), or the job's own user (as
// Slurm: a user acts on its own jobs only). Else PermissionDenied naming the owner.
Status MayChange(const Principal& who, JobNumber job, const std::string& owner);
// Who acted, as a job's reason records it ("user alice", "admin ops").
std::string Actor(const Principal& who);

// Each queue's maxPending, read from the queue configuration's text when it changes.
class PendingBounds {
 public:
  int64_t Of(const std::string& queue, const std::string& queues_yaml);
  // ResourceExhausted (HTTP 429) when `adding` (jobs by queue) would take a queue past
  // its bound; `pending_in` counts a queue's pending jobs now.
  Status Check(const std::map<std::string, size_t>& adding, const std::string& queues_yaml,
               const std::function<size_t(const std::string&)>& pending_in);

 private:
  std::string yaml_;  // the configuration by_queue_ was read from
  std::map<std::string, int64_t> by_queue_;
};

}  // namespace tessera
