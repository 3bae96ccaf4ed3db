// JobReads: the API's reads of jobs: a job's JSON (GET /v1/jobs/{id}), a page of the
// listing (GET /v1/jobs), a task's output (GET /v1/jobs/{id}/logs, and the validation
// checks' output) and where a task's terminal listens (GET /v1/jobs/{id}/attach).
//
// Owns: nothing but the rules of the reads (who sees a job, the bounds of a task's
// index, the refusals' codes and messages). It keeps no state: one may be built over a
// controller at any time, and many may share one.
// Uses: the controller's published views (PublishedJobs, job_views.h) and task logs
// (JobLogs, job_logs.h), as const references the controller hands out. The controller
// keeps them rather than taking them from outside: it alone writes them (views are
// published under the core lock, which the lock order puts before theirs), and every
// place that opens a controller (the server, tests, the scenario runner, benchmarks)
// would otherwise build and keep them alive beside it, for nothing a read gains. What
// they lack goes through the core's read transaction (Controller::Read, a ServiceStep):
// a job archived out of memory (read from the store, the core lock let go meanwhile)
// and a task's terminal (its endpoint is kept under the core lock).
// Locks (controller.h, "Lock discipline"): GetJob, GetJobText, ListJobIds, JobText,
// ReadLog and ReadTaskOutput of a job in memory take only the views' and the logs' own
// locks, so they never wait for a cycle; the logs' lock is never taken with the core
// lock held (ReadLog reads the log after its Read has returned). Attach always takes
// the core lock.
// Thread safety: every method may be called from any thread, without the core lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "server/controller.h"
#include "server/http/auth.h"
#include "server/job_logs.h"
#include "server/job_number.h"
#include "server/job_views.h"

namespace tessera {

class JobReads {
 public:
  // `controller` must outlive the service.
  explicit JobReads(Controller& controller)
      : controller_(&controller), views_(&controller.published()), logs_(&controller.logs()) {}

  // GET /v1/jobs/{id}: NotFound for a job `who` may not see, as for one that does not
  // exist. The text is the JSON itself, as the API sends it.
  StatusOr<nlohmann::json> GetJob(const Principal& who, JobNumber id) const;
  StatusOr<std::string> GetJobText(const Principal& who, JobNumber id) const;

  // A page of the listing (newest first, jobs in memory): at most `limit` jobs visible
  // to `who` below `after` (0: from the newest); `more` when others follow the last one.
  struct JobPage {
    std::vector<std::shared_ptr<const JobView>> jobs;
    bool more = false;
    std::vector<JobNumber> ids() const;
  };
  JobPage ListJobIds(const Principal& who, const JobFilter& filter, JobNumber after,
                     size_t limit) const;
  // A listed job's JSON text, as GetJobText gives it.
  std::string JobText(const JobView& view) const { return views_->Text(view); }

  // Task `task`'s output from `offset`, at most `max_bytes`, with the job's state.
  // InvalidArgument for a task outside the job's gang.
  StatusOr<LogChunk> ReadLog(const Principal& who, JobNumber id, int task, int64_t offset,
                             int64_t max_bytes) const;
  // Task 0's output of `job`, at most `max_bytes` from its start, whoever ran it.
  StatusOr<std::string> ReadTaskOutput(JobNumber job, int64_t max_bytes) const;

  // GET /v1/jobs/{id}/attach: where task `task`'s terminal listens and its secret,
  // {"ready": true, "address", "port", "secret", "attempt", "state"}, once the job runs
  // and the agent has said; {"ready": false, "state"} before and after. Jobs in memory
  // only (NotFound otherwise); FailedPrecondition for a job without a terminal
  // (server/pty_sessions.h).
  StatusOr<nlohmann::json> Attach(const Principal& who, JobNumber id, int task) const;

 private:
  Controller* controller_;
  const PublishedJobs* views_;
  const JobLogs* logs_;
};

}  // namespace tessera
