// JobRecord: a job's scheduling state, owned by the driver (server or simulator)
// and read by the scheduling cycle.
//
// Progress is measured in microseconds of work at full speed. A running job's
// progress grows with wall time once its start-up (a resumption's restart overhead)
// is over; periodic checkpoints happen at multiples of its
// checkpoint interval, so preempting it at progress p keeps
// max(resumed_from, p rounded down to the interval) unless it checkpoints on signal.
// Thread safety: values.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/clock.h"
#include "base/strong_id.h"
#include "model/job.h"
#include "model/queue_tree.h"
#include "sched/attempt_state.h"
#include "state/node_ledger.h"
#include "state/quota_ledger.h"

namespace tessera {

enum class JobPhase : uint8_t {
  kPending,   // waiting to start (new or requeued after preemption)
  kRunning,
  kStopping,  // asked to stop (preempted); holds its resources until evicted
  kFinished,
};

// Whether an attempt of the job is under way: it holds its allocations while running and
// while stopping.
inline bool InAttempt(JobPhase phase) {
  return phase == JobPhase::kRunning || phase == JobPhase::kStopping;
}

struct JobRecord {
  JobId id;
  JobSpec spec;
  QueueId queue;
  JobPhase phase = JobPhase::kPending;
  JobEnd end = JobEnd::kSucceeded;  // how it ended, once finished (JobLifecycle::Finish)
  int64_t gpu_milli = 0;  // of the whole gang

  // While running or stopping.
  std::vector<Allocation> allocations;
  ResourceVector charge;  // what the queue is charged
  Micros run_start = 0;
  Micros resumed_from = 0;  // progress when this attempt started (its checkpoint)
  Micros startup = 0;       // time after run_start without progress (restart overhead)

  // Across attempts.
  double attained_gpu_seconds = 0;  // service received, for least-attained-service
  int preemptions = 0;
  int starts = 0;                   // attempts started
  Micros predicted_runtime = 0;     // whole-job runtime estimate; 0: unknown
  // predicted_runtime is the predictor's fallback (the user's limit, else a default):
  // nothing was learned for the job when it was submitted (RuntimePredictor::Knows).
  bool runtime_guessed = false;
  Micros oracle_runtime = -1;       // the true runtime (simulator only; -1 unknown)
  Micros eligible_since = 0;        // last submission or requeue

  // Preemption bookkeeping.
  int victims_in_flight = 0;   // jobs stopping for this one
  bool nominated = false;      // victims were evicted for it: consider it first
  JobId preemptor;             // while stopping for another job
  // After an eviction, until it starts again: the job it was evicted for, and until when
  // it waits for that job (SchedulerOptions::victim_hold).
  JobId evicted_for;
  Micros evicted_hold_until = 0;

  // The current attempt's tasks and how it is to end, and the restarts counted; kept by
  // the AttemptMachine (attempt_machine.h).
  AttemptState attempt;

  // Kept by JobLifecycle while running or stopping.
  std::vector<uint8_t> held;   // per allocation: 1 while the ClusterState holds it
  bool counted = false;        // the JobScheduler counts it as running

  // Whether this pending job waits, as a victim, for the job it was evicted for to start
  // (SchedulerOptions::victim_hold); `jobs` are all the records, by id.
  bool WaitsForPreemptor(const std::vector<JobRecord>& jobs, Micros now) const {
    return phase == JobPhase::kPending && evicted_for.valid() && now < evicted_hold_until &&
           evicted_for.value() < jobs.size() &&
           jobs[evicted_for.value()].phase == JobPhase::kPending;
  }

  // Whether allocation `t` is held in the ClusterState (a task whose node was lost is
  // not); a record without the tally (built outside a lifecycle) holds all of them.
  bool Holds(size_t t) const { return t >= held.size() || held[t] != 0; }

  Micros Progress(Micros now) const {
    return InAttempt(phase) ? resumed_from + std::max<Micros>(0, now - run_start - startup)
                            : resumed_from;
  }
  // Progress a preemption at `now` would keep.
  Micros SavedProgress(Micros now, bool on_signal) const {
    Micros p = Progress(now);
    if (on_signal) {
      return p;
    }
    Micros interval = spec.checkpoint_interval;
    Micros periodic = interval > 0 ? (p / interval) * interval : 0;
    return periodic > resumed_from ? periodic : resumed_from;
  }
  // Remaining runtime by the given total (predicted or true).
  Micros RemainingBy(Micros total, Micros now) const {
    Micros r = total - Progress(now);
    return r > 0 ? r : 0;
  }
};

}  // namespace tessera
