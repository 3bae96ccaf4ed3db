// Runtime limits (a job's runtime_limit, sbatch's --time) and the signal a job asks for
// ahead of its limit (`signal: {name, before}`, sbatch's --signal). An attempt that runs
// past its limit is stopped with the stop grace and fails ("time limit"); the signal goes
// to its tasks `before` ahead of the limit as a stop whose grace runs to the limit and
// then the stop grace, so that a task that saves its work and exits ends on its own
// terms, and one that does not is killed where the limit alone would have killed it.
// Both are per attempt, measured from its start, and checked at the first cycle at or
// after the earliest of them (next_limit_check_): the walk over the jobs happens then.
#include <algorithm>
#include <limits>

#include "api/units.h"
#include "server/controller.h"

namespace tessera {

void Controller::WatchLimit(const LiveJob& job) {
  const JobRecord& rec = jobs_.Rec(job);
  const Micros limit_at = AttemptMachine::LimitAt(rec);
  if (limit_at <= 0) {
    return;
  }
  const Micros signal_at =
      job.submission.limit_signal > 0 ? limit_at - job.submission.limit_signal_before : limit_at;
  next_limit_check_ = std::min(next_limit_check_, std::min(limit_at, signal_at));
}

void Controller::EnforceTimeLimits(Micros now, Pending& out) {
  Micros next = std::numeric_limits<Micros>::max();
  for (auto& [id, job] : jobs_.all()) {
    // Validation checks time out by their own rules (controller_validation.cc).
    if (job.state != JobState::kRunning || job.slot == JobTable::kArchived ||
        job.row.tenant == kValidationTenant) {
      continue;
    }
    const JobRecord& rec = jobs_.Rec(job);
    const Micros limit = rec.spec.runtime_limit;
    if (limit <= 0 || rec.run_start <= 0) {
      continue;
    }
    const Micros ran = now - rec.run_start;
    if (ran >= limit) {
      job.row.reason = "failed: time limit of " + FormatDuration(limit) + " reached";
      StopJob(job, StopRequest{AttemptEnd::kFail, RequeueCause::kPreempted, options_.stop_grace, ""},
              now, out);
      limit_signalled_.erase(id);
      continue;
    }
    next = std::min(next, rec.run_start + limit);
    const JobSubmission& sub = job.submission;
    if (sub.limit_signal > 0 && ran < limit - sub.limit_signal_before) {
      next = std::min(next, rec.run_start + limit - sub.limit_signal_before);
    }
    if (sub.limit_signal <= 0 || ran < limit - sub.limit_signal_before) {
      continue;
    }
    auto [it, first] = limit_signalled_.emplace(id, job.row.attempts);
    if (!first && it->second == job.row.attempts) {
      continue;  // sent for this attempt already
    }
    it->second = job.row.attempts;
    const Micros grace = limit - ran + options_.stop_grace;
    for (size_t t = 0; t < job.tasks.size(); ++t) {
      if (!jobs_.TaskExited(job, t)) {
        out.stops.emplace_back(job.tasks[t].node,
                               TaskStop{TaskKey{job.row.id, static_cast<int>(t), job.row.attempts},
                                        (grace + 999) / 1000, sub.limit_signal});
      }
    }
  }
  next_limit_check_ = next;
  // Jobs that ended forget their signal.
  std::erase_if(limit_signalled_, [&](const auto& entry) REQUIRES(mu_) {
    const LiveJob* job = jobs_.Find(entry.first);
    return job == nullptr || job->state != JobState::kRunning;
  });
}

}  // namespace tessera
