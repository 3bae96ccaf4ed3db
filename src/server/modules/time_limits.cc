#include "server/modules/time_limits.h"

#include <algorithm>

#include "api/units.h"

namespace tessera {

void TimeLimits::Watch(const Attempt& a) {
  if (a.limit <= 0) {
    return;
  }
  const Micros limit_at = a.run_start + a.limit;
  if (a.signal > 0) {
    const Micros signal_at = std::min(limit_at, limit_at - std::max<Micros>(0, a.signal_before));
    heap_.push(Entry{signal_at, seq_++,
                     Due{Due::Kind::kSignal, a.job, a.attempt, a.signal, limit_at}});
  }
  heap_.push(Entry{limit_at, seq_++, Due{Due::Kind::kLimit, a.job, a.attempt, 0, limit_at}});
}

std::vector<TimeLimits::Due> TimeLimits::TakeDue(Micros now) {
  std::vector<Due> out;
  while (!heap_.empty() && heap_.top().at <= now) {
    out.push_back(heap_.top().due);
    heap_.pop();
  }
  return out;
}

void TimeLimits::OnAttemptRunning(const JobFacts& job) {
  if (job.record == nullptr || job.internal) {
    return;
  }
  const JobRecord& rec = *job.record;
  if (rec.phase != JobPhase::kRunning || rec.run_start <= 0) {
    return;
  }
  Watch(Attempt{job.id, job.attempt, rec.run_start, rec.spec.runtime_limit,
                job.submission.limit_signal, job.submission.limit_signal_before});
}

void TimeLimits::BeforeCycle(ModuleStep& step) {
  const Micros now = step.now();
  for (const Due& due : TakeDue(now)) {
    step.VisitJob(due.job, [&](const JobFacts& job) {
      if (job.attempt != due.attempt || job.state != JobState::kRunning) {
        return;  // that attempt ended, or is stopping already
      }
      if (due.kind == Due::Kind::kLimit) {
        step.Stop(job.id,
                  StopRequest{AttemptEnd::kFail, RequeueCause::kPreempted, step.stop_grace(), ""},
                  "failed: time limit of " + FormatDuration(job.record->spec.runtime_limit) +
                      " reached");
      } else if (now < due.limit_at) {  // else the limit itself is due: it stops the attempt
        step.Signal(job.id, due.signal, due.limit_at - now + step.stop_grace());
      }
    });
  }
}

}  // namespace tessera
