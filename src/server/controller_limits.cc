// Runtime limits (a job's runtime_limit, sbatch's --time) and the signal a job asks for
// ahead of its limit: the controller's side of the TimeLimits module (time_limits.h),
// which says what falls due; here the controller acts on it, before each cycle.
#include <algorithm>

#include "api/units.h"
#include "server/controller.h"

namespace tessera {

void Controller::WatchLimit(const LiveJob& job) {
  // Validation checks time out by their own rules (controller_validation.cc).
  if (job.slot == JobTable::kArchived || job.row.tenant == kValidationTenant) {
    return;
  }
  const JobRecord& rec = jobs_.Rec(job);
  if (rec.phase != JobPhase::kRunning || rec.run_start <= 0) {
    return;
  }
  limits_.Watch(TimeLimits::Attempt{job.id(), job.row.attempts, rec.run_start,
                                    rec.spec.runtime_limit, job.submission.limit_signal,
                                    job.submission.limit_signal_before});
}

void Controller::EnforceTimeLimits(Micros now, Pending& out) {
  for (const TimeLimits::Due& due : limits_.TakeDue(now)) {
    LiveJob* job = jobs_.Find(due.job);
    if (job == nullptr || job->row.attempts != due.attempt ||
        jobs_.StateOf(*job) != JobState::kRunning) {
      continue;  // that attempt ended, or is stopping already
    }
    if (due.kind == TimeLimits::Due::Kind::kLimit) {
      job->row.reason =
          "failed: time limit of " + FormatDuration(jobs_.Rec(*job).spec.runtime_limit) + " reached";
      StopJob(*job, StopRequest{AttemptEnd::kFail, RequeueCause::kPreempted, options_.stop_grace, ""},
              now, out);
      continue;
    }
    if (now >= due.limit_at) {
      continue;  // the limit itself is due: it stops the attempt
    }
    const Micros grace = due.limit_at - now + options_.stop_grace;
    for (size_t t = 0; t < job->tasks.size(); ++t) {
      if (!jobs_.TaskExited(*job, t)) {
        out.stops.emplace_back(job->tasks[t].node,
                               TaskStop{TaskKey{job->row.id, static_cast<int>(t), job->row.attempts},
                                        (grace + 999) / 1000, due.signal});
      }
    }
  }
}

}  // namespace tessera
