#include "sched/attempt_machine.h"

#include <algorithm>
#include <utility>

namespace tessera {
namespace {

bool Live(const JobRecord& job) { return InAttempt(job.phase); }

bool AnyAlive(const AttemptState& a) {
  return std::any_of(a.tasks.begin(), a.tasks.end(),
                     [](const TaskOutcome& t) { return !t.exited; });
}

// The stopping causes whose attempt counts as done when its tasks exit 0 in the grace.
bool GraceMayComplete(RequeueCause cause) {
  return cause == RequeueCause::kPreempted || cause == RequeueCause::kGpuFault ||
         cause == RequeueCause::kIdle;
}

}  // namespace

std::string_view RequeueCauseName(RequeueCause cause) {
  switch (cause) {
    case RequeueCause::kPreempted:
      return "preempted";
    case RequeueCause::kNodeLost:
      return "node lost";
    case RequeueCause::kTaskLost:
      return "task lost";
    case RequeueCause::kGpuFault:
      return "gpu-fault";
    case RequeueCause::kFailure:
      return "failed";
    case RequeueCause::kRequested:
      return "requeued";
    case RequeueCause::kIdle:
      return "idle";
  }
  return "requeued";
}

std::optional<RestartOn> CountedAs(RequeueCause cause) {
  switch (cause) {
    case RequeueCause::kFailure:
      return RestartOn::kFailure;
    case RequeueCause::kNodeLost:
      return RestartOn::kNodeLost;
    case RequeueCause::kGpuFault:
      return RestartOn::kGpuFault;
    case RequeueCause::kPreempted:
    case RequeueCause::kTaskLost:
    case RequeueCause::kRequested:
    case RequeueCause::kIdle:
      return std::nullopt;
  }
  return std::nullopt;
}

bool AttemptMachine::RestartAllowed(const JobRecord& job, RequeueCause cause, std::string* why) {
  const std::optional<RestartOn> on = CountedAs(cause);
  if (!on) {
    return true;
  }
  const RestartPolicy& policy = job.attempt.policy;
  if (!policy.Restarts(*on)) {
    if (why != nullptr) {
      *why = "its restart policy does not restart on " + std::string(RestartOnName(*on));
    }
    return false;
  }
  if (job.attempt.restarts >= policy.max) {
    if (why != nullptr) {
      *why = "no restarts left: " + std::to_string(job.attempt.restarts) + " of " +
             std::to_string(policy.max) + " used";
    }
    return false;
  }
  return true;
}

Micros AttemptMachine::LimitAt(const JobRecord& job) {
  if (job.phase != JobPhase::kRunning || job.spec.runtime_limit <= 0) {
    return 0;
  }
  return job.run_start + job.spec.runtime_limit;
}

void AttemptMachine::Started(JobRecord& job) {
  AttemptState& a = job.attempt;
  a.tasks.assign(job.allocations.size(), TaskOutcome{});
  a.after = AttemptEnd::kNone;
  a.cause = RequeueCause::kPreempted;
  a.checkpointed = false;
  a.checkpoint_progress = 0;
  a.refused = false;
}

bool AttemptMachine::Decide(JobRecord& job, const StopRequest& request, AttemptEffects& fx) const {
  AttemptState& a = job.attempt;
  if (request.after == AttemptEnd::kRequeue) {
    if (a.after != AttemptEnd::kNone) {
      return false;  // its end is decided already
    }
    std::string why;
    if (!RestartAllowed(job, request.cause, &why)) {
      // Its restart policy does not restart it for this, or its restarts are spent.
      std::string_view what = request.reason;
      if (what.rfind("requeued: ", 0) == 0) {
        what.remove_prefix(10);
      }
      a.after = AttemptEnd::kFail;
      a.cause = request.cause;
      a.refused = true;
      fx.reason = "failed: " + std::string(what) + " (" + why + ")";
      return true;
    }
    a.after = AttemptEnd::kRequeue;
    a.cause = request.cause;
  } else if (a.after == AttemptEnd::kNone || request.after == AttemptEnd::kCancel ||
             (request.after == AttemptEnd::kFail && a.after == AttemptEnd::kRequeue)) {
    a.after = request.after;
  } else {
    return false;
  }
  if (!request.reason.empty()) {
    fx.reason = request.reason;
  }
  return true;
}

AttemptEffects AttemptMachine::Stop(JobRecord& job, const StopRequest& request, Micros now) {
  AttemptEffects fx;
  if (!Live(job)) {
    return fx;
  }
  Decide(job, request, fx);
  StopAlive(job, request.grace, now, fx);
  return fx;
}

void AttemptMachine::StopAlive(JobRecord& job, Micros grace, Micros now, AttemptEffects& fx) {
  lifecycle_->Stopping(job);
  fx.changed = true;
  fx.grace = grace;
  for (size_t t = 0; t < job.attempt.tasks.size(); ++t) {
    if (!job.attempt.tasks[t].exited) {
      fx.stop.push_back(t);
    }
  }
  if (fx.stop.empty()) {
    Finalize(job, now, fx);
  }
}

AttemptEffects AttemptMachine::TaskExited(JobRecord& job, size_t task, int exit_code, int signal,
                                          Micros now) {
  AttemptEffects fx;
  AttemptState& a = job.attempt;
  if (!Live(job) || task >= a.tasks.size() || a.tasks[task].exited) {
    return fx;
  }
  TaskOutcome& run = a.tasks[task];
  run.exited = true;
  run.exit_code = exit_code;
  run.signal = signal;
  fx.changed = true;
  if (a.after == AttemptEnd::kNone && run.failed()) {
    std::string reason = "task " + std::to_string(task) +
                         (signal != 0 ? " was killed by signal " + std::to_string(signal)
                                      : " exited with code " + std::to_string(exit_code));
    fx.exit_code = exit_code != 0 ? exit_code : 128 + signal;
    std::string why;
    if (RestartAllowed(job, RequeueCause::kFailure, &why)) {
      // The whole gang stops, then restarts together after the backoff.
      a.after = AttemptEnd::kRequeue;
      a.cause = RequeueCause::kFailure;
      reason = "restarting after failure (attempt " + std::to_string(a.restarts + 2) + " of " +
               std::to_string(a.policy.max + 1) + ")";
    } else {
      a.after = AttemptEnd::kFail;
      if (a.policy.Restarts(RestartOn::kFailure)) {
        reason += " (" + why + ")";
      }
    }
    fx.reason = std::move(reason);
    StopAlive(job, 0, now, fx);
    return fx;
  }
  if (!AnyAlive(a)) {
    Finalize(job, now, fx);
  }
  return fx;
}

AttemptEffects AttemptMachine::TaskFailedToStart(JobRecord& job, size_t task, int exit_code,
                                                 std::string reason, Micros now) {
  AttemptEffects fx;
  AttemptState& a = job.attempt;
  if (!Live(job) || task >= a.tasks.size() || a.tasks[task].exited) {
    return fx;
  }
  a.tasks[task] = TaskOutcome{true, exit_code, 0};
  fx.reason = std::move(reason);
  fx.exit_code = exit_code;
  if (a.after == AttemptEnd::kNone) {
    a.after = AttemptEnd::kFail;
  }
  StopAlive(job, 0, now, fx);
  return fx;
}

AttemptEffects AttemptMachine::TasksLost(JobRecord& job, const std::vector<size_t>& tasks,
                                         RequeueCause cause, std::string reason, Micros now) {
  AttemptEffects fx;
  if (!Live(job)) {
    return fx;
  }
  Decide(job, StopRequest{AttemptEnd::kRequeue, cause, 0, std::move(reason)}, fx);
  for (size_t t : tasks) {
    if (t < job.attempt.tasks.size() && !job.attempt.tasks[t].exited) {
      job.attempt.tasks[t] = TaskOutcome{true, 0, 9};
    }
  }
  // The rest of the gang stops at once: it restarts as a whole.
  StopAlive(job, 0, now, fx);
  return fx;
}

void AttemptMachine::Checkpointed(JobRecord& job, Micros now) {
  if (Live(job) && !job.attempt.checkpointed) {
    job.attempt.checkpointed = true;
    job.attempt.checkpoint_progress = job.Progress(now);
  }
}

void AttemptMachine::Finalize(JobRecord& job, Micros now, AttemptEffects& fx) {
  AttemptState& a = job.attempt;
  const bool failed =
      std::any_of(a.tasks.begin(), a.tasks.end(), [](const TaskOutcome& t) { return t.failed(); });
  const bool requeue = a.after == AttemptEnd::kRequeue || (a.after == AttemptEnd::kFail && a.refused);
  if (requeue && GraceMayComplete(a.cause) && !failed && !a.checkpointed && !a.tasks.empty()) {
    a.after = AttemptEnd::kNone;  // it ran to its end within its grace
    fx.reason = "";
  }
  EndedAttempt ended;
  ended.run_start = job.run_start;
  ended.allocations = job.allocations;
  ended.tasks = a.tasks;
  fx.changed = true;
  switch (a.after) {
    case AttemptEnd::kRequeue: {
      ended.as = RequeueCauseName(a.cause);
      ended.requeued = true;
      ended.cause = a.cause;
      ended.counted = CountedAs(a.cause);
      if (ended.counted) {
        ++a.restarts;
      }
      if (a.cause == RequeueCause::kFailure && a.policy.backoff > 0) {
        ended.restart_at = now + a.policy.backoff;
      }
      ended.restarts = a.restarts;
      const Micros checkpoint = a.checkpointed ? a.checkpoint_progress : 0;
      const RequeueCause cause = a.cause;
      a.tasks.clear();
      a.after = AttemptEnd::kNone;
      a.checkpointed = false;
      a.refused = false;
      lifecycle_->Requeue(job, checkpoint, cause, now, ended.restart_at);
      fx.ended = std::move(ended);
      return;
    }
    case AttemptEnd::kCancel:
      ended.as = "cancelled";
      ended.end = JobEnd::kCancelled;
      break;
    case AttemptEnd::kFail:
      ended.as = "failed";
      ended.end = JobEnd::kFailed;
      break;
    case AttemptEnd::kNone:
      ended.as = failed ? "failed" : "succeeded";
      ended.end = failed ? JobEnd::kFailed : JobEnd::kSucceeded;
      if (!failed) {
        fx.exit_code = 0;
        fx.reason = "";
      }
      break;
  }
  ended.restarts = a.restarts;
  a.after = AttemptEnd::kNone;
  lifecycle_->Finish(job, ended.end, now);
  fx.ended = std::move(ended);
}

}  // namespace tessera
