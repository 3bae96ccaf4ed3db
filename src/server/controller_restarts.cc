// GPU faults that end a job's attempt, and what the controller keeps of restarts: the
// count and backoff stored with each ended attempt (so that a controller restart keeps
// them), the view's `restart` block and the metrics. Which ends restart, how many times
// and after what backoff is the core's attempt machine's (sched/attempt_machine.h); a
// backoff is the lifecycle's hold (JobLifecycle::HoldUntil).
#include <iostream>
#include <map>
#include <optional>

#include "base/time_format.h"
#include "server/controller.h"
#include "server/job_attempts.h"
#include "server/views/job_json.h"

namespace tessera {

void Controller::NoteRestart(const LiveJob& job, const EndedAttempt& ended, nlohmann::json& stored) {
  // What the cause's name alone does not say: which GPU failed, what the idle policy saw.
  if (ended.cause == RequeueCause::kGpuFault || ended.cause == RequeueCause::kIdle) {
    const std::string_view prefix =
        ended.cause == RequeueCause::kGpuFault ? "requeued: gpu-fault: " : "requeued: idle: ";
    if (job.row.reason.rfind(prefix, 0) == 0) {
      stored["detail"] = job.row.reason.substr(prefix.size());
    } else if (job.row.reason.rfind("requeued: ", 0) == 0) {
      stored["detail"] = job.row.reason.substr(10);
    }
  }
  if (ended.counted) {
    ++counters_.restarts[std::string(RestartOnName(*ended.counted))];
  }
  stored["restarts"] = ended.restarts;
  if (ended.restart_at > 0) {
    stored["restart_at"] = ended.restart_at;
  }
}

void Controller::RestoreRestarts(Micros now) {
  (void)now;
  for (auto& [id, job] : jobs_.all()) {
    const nlohmann::json attempts = StoredAttempts(job.row.placement_json);
    if (job.slot == JobTable::kArchived || attempts.empty() || !attempts.back().is_object()) {
      continue;
    }
    const nlohmann::json& last = attempts.back();
    AttemptState& attempt = jobs_.Rec(job).attempt;
    attempt.restarts = last.value("restarts", 0);
    const Micros restart_at = last.value("restart_at", Micros{0});
    if (jobs_.StateOf(job) == JobState::kPending && restart_at > 0) {
      // Waits out its backoff even across the restart (released by the first cycle
      // when it has passed).
      core_.lifecycle()->HoldUntil(jobs_.Rec(job), restart_at);
    }
    // A stopping job's cause is not stored; its reason says it.
    if (attempt.after == AttemptEnd::kRequeue) {
      if (job.row.reason.rfind("requeued: gpu-fault", 0) == 0) {
        attempt.cause = RequeueCause::kGpuFault;
      } else if (job.row.reason.rfind("restarting after failure", 0) == 0) {
        attempt.cause = RequeueCause::kFailure;
      } else if (job.row.reason.rfind("requeued: node", 0) == 0) {
        attempt.cause = RequeueCause::kNodeLost;
      }
    }
  }
}

void Controller::ReleaseRestarts(Micros now, Pending& out) {
  if (core_.lifecycle() == nullptr || !core_.lifecycle()->bound()) {
    return;
  }
  for (JobId slot : core_.lifecycle()->ReleaseDue(now)) {
    out.dirty.insert(jobs_.IdAt(slot));
  }
}

void Controller::RestartJson(const LiveJob& job, nlohmann::json& out) const {
  int used = 0;
  Micros restart_at = 0;
  if (job.slot != JobTable::kArchived) {
    used = jobs_.Rec(job).attempt.restarts;
    if (jobs_.StateOf(job) == JobState::kPending) {
      restart_at = core_.lifecycle()->HeldUntil(jobs_.Rec(job).id);
    }
  } else if (const nlohmann::json attempts = StoredAttempts(job.row.placement_json);
             !attempts.empty() && attempts.back().is_object()) {
    used = attempts.back().value("restarts", 0);
  }
  out["restart"] = ::tessera::RestartJson(job.submission.restart, used, restart_at);
}

}  // namespace tessera
