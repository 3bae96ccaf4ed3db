// AttemptMachine: what happens to a job's attempt, once, for every driver (the
// simulator, the server's controller, what-if runs). It takes the events of an attempt
// (the cycle started it, a task exited with a code or a signal, tasks were lost with
// their node, a GPU fault or a time limit or a preemption or a cancel asked it to stop,
// a task checkpointed) and returns their effects (tasks to stop and with what grace, the
// job's reason and exit code, and when the attempt ends: requeued at a time, or finished
// as succeeded, failed or cancelled, with the restart its policy counted).
//
// The rules, here and nowhere else:
// - A task that fails (a non-zero code or a signal) while the attempt runs ends it: the
//   rest of the gang stops at once (grace 0) and the job restarts as a whole after the
//   policy's backoff, or fails when its policy does not restart failures or its
//   restarts are spent (model/restart_policy.h).
// - A requeue for a lost node or a GPU fault counts against the policy the same way and
//   fails the job when not allowed; preemption, lost tasks, a user's requeue and an idle
//   requeue never count.
// - Precedence of ends once stopping: a cancel outranks everything, a failure outranks a
//   requeue; otherwise the first decided end stands.
// - The grace rule: an attempt stopped for a preemption, a GPU fault or idleness whose
//   tasks all exited 0 without reporting a checkpoint ran to its end within its grace:
//   it succeeded (docs/preemption.md).
// - A requeued job resumes from max(its periodic checkpoint, the progress at its
//   reported checkpoint).
//
// State: JobRecord::attempt (attempt_state.h), which only the machine changes; the
// phase moves through the bound JobLifecycle (Stopping, Requeue, Finish), whose release
// order and invariants hold as before. Pure: time comes in as arguments.
// Thread safety: none; the driver serialises calls, as for the lifecycle.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "sched/attempt_state.h"
#include "sched/job_lifecycle.h"
#include "sched/job_record.h"
#include "state/node_ledger.h"

namespace tessera {

// The driver asks a running attempt to stop.
struct StopRequest {
  AttemptEnd after = AttemptEnd::kRequeue;
  RequeueCause cause = RequeueCause::kPreempted;  // with kRequeue
  Micros grace = 0;                               // for the tasks still running
  // The job's reason when this request decides the attempt's end; "" leaves it. A
  // requeue's reason starts "requeued: " (the machine rewrites it when the job fails).
  std::string reason;
};

// How an attempt ended, for the driver's records (usage, the stored attempt).
struct EndedAttempt {
  std::string_view as;  // "succeeded", "failed", "cancelled", or the requeue's cause
  bool requeued = false;
  RequeueCause cause = RequeueCause::kPreempted;  // when requeued (`as` is its name)
  JobEnd end = JobEnd::kSucceeded;                // when not requeued
  Micros run_start = 0;             // 0: it never ran
  std::vector<Allocation> allocations;
  std::vector<TaskOutcome> tasks;
  std::optional<RestartOn> counted;  // the restart its policy counted
  int restarts = 0;                  // counted so far, this one included
  Micros restart_at = 0;             // requeued and held back until then (a backoff)
};

struct AttemptEffects {
  std::vector<size_t> stop;  // tasks to signal now, given `grace`
  Micros grace = 0;
  std::optional<std::string> reason;  // the job's new reason ("" clears it)
  std::optional<int> exit_code;       // the job's new exit code
  std::optional<EndedAttempt> ended;  // the attempt ended: pending again, or finished
  bool changed = false;               // anything the driver stores changed
};

// The name of an ended attempt's requeue cause, as stored ("preempted", "node lost", ...).
std::string_view RequeueCauseName(RequeueCause cause);
// The restart-policy entry a requeue cause counts against; none: it never counts.
std::optional<RestartOn> CountedAs(RequeueCause cause);

class AttemptMachine {
 public:
  explicit AttemptMachine(JobLifecycle* lifecycle) : lifecycle_(lifecycle) {}

  // The cycle started `job` (it is running): a fresh attempt, one task per allocation.
  void Started(JobRecord& job);
  // Asks a running or stopping attempt to end as `request` says (nothing otherwise).
  AttemptEffects Stop(JobRecord& job, const StopRequest& request, Micros now);
  // A task's process exited.
  AttemptEffects TaskExited(JobRecord& job, size_t task, int exit_code, int signal, Micros now);
  // A task's process never ran (a missing program, a device that could not be made):
  // the job fails with `reason` and the rest of its gang stops.
  AttemptEffects TaskFailedToStart(JobRecord& job, size_t task, int exit_code,
                                   std::string reason, Micros now);
  // Tasks are gone with their node or their supervisor (killed, signal 9): the attempt
  // is requeued for `cause` (or fails when its policy does not allow it) and the rest of
  // the gang stops at once. A lost node's allocations are the driver's to detach
  // (JobLifecycle::DetachTask) before.
  AttemptEffects TasksLost(JobRecord& job, const std::vector<size_t>& tasks, RequeueCause cause,
                           std::string reason, Micros now);
  // A task reported a checkpoint after being asked to stop: the job resumes from here.
  void Checkpointed(JobRecord& job, Micros now);

  // Whether the job's policy restarts it for `cause` now; otherwise `why` says why.
  static bool RestartAllowed(const JobRecord& job, RequeueCause cause, std::string* why);
  // When the running attempt reaches its runtime limit; 0: no limit.
  static Micros LimitAt(const JobRecord& job);

 private:
  // The end a stop request decides, with the restart policy applied; false when the
  // attempt's end is decided already and outranks it.
  bool Decide(JobRecord& job, const StopRequest& request, AttemptEffects& fx) const;
  void StopAlive(JobRecord& job, Micros grace, Micros now, AttemptEffects& fx);
  void Finalize(JobRecord& job, Micros now, AttemptEffects& fx);

  JobLifecycle* lifecycle_;
};

}  // namespace tessera
