// StartForecast: "when will each pending job start?" from a snapshot of the live core,
// answered by running the snapshot forward in virtual time through the same
// JobScheduler and JobLifecycle the controller runs (Slurm's WILL_RUN, for every
// pending job at once).
//
// The snapshot is the core as it is: the nodes with their drains and live allocations
// (a ClusterState copy), the queue tree, fair-share usage, the policy and placement,
// the running jobs with what they hold and how long they are predicted to run still,
// and the pending jobs with their predicted runtimes. Quota usage is rebuilt from the
// running jobs' charges, as a controller rebuild does. Running jobs end when their
// remaining time says; started jobs run for their predicted runtime; preemptions the
// policy makes on the way happen too (a victim is requeued at its eviction).
//
// The answer per pending job: the first start in the run (its ETA), or none when it has
// not started within the horizon or the cycle budget; its rank in the scheduler's order
// at the snapshot (overall and within its queue); and what blocks it at the snapshot.
//
// Cost: one cycle per batch of events. Events are batched within a resolution that
// grows with their distance from the snapshot (an ETA an hour away is coarse to a
// minute, one a few seconds away is exact to the second), which bounds the number of
// cycles by the horizon's logarithm rather than by the number of jobs.
//
// Pure: no clock reads, no threads; deterministic for a given snapshot and seed.
// Thread safety: a forecast owns its input; run several on separate inputs at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "model/queue_tree.h"
#include "plugins/fgd.h"
#include "plugins/job_policies.h"
#include "sched/job_order.h"
#include "sched/job_record.h"
#include "state/cluster_state.h"

namespace tessera {

// What a pending job waits for at the snapshot, in a form the API shows as is.
struct ForecastBlocking {
  enum class Kind : uint8_t {
    kNone,         // starts at the snapshot's first cycle
    kTurn,         // fits the free resources now; jobs ahead of it in the order go first
    kQuota,        // its queue (and cohort) have no unused quota for it: `queue`
    kGpus,         // GPUs are held by others (of `model` when it asks for one)
    kCpu,          // a CPU-only job: CPUs or memory are held by others
    kReservation,  // resources are reserved for another job: `job` (its snapshot index)
    kVictims,      // its preemption victims are still stopping
  };
  Kind kind = Kind::kNone;
  std::string queue;  // kQuota
  std::string model;  // kGpus: the GPU model asked for; "" any
  int64_t job = -1;   // kReservation: index into ForecastInput::jobs
};
std::string_view BlockingKindName(ForecastBlocking::Kind kind);

struct ForecastJob {
  // Pending, running or stopping, as the live core holds it (ids are the caller's; the
  // forecast renumbers them, mapping `preemptor`). A running job's allocations name
  // the nodes of ForecastInput::state, which holds them.
  JobRecord record;
  // Running or stopping: the time it is predicted to run still from the snapshot
  // (ForecastRemaining); a stopping victim is evicted when the policy's checkpoint
  // wait or grace says, its runtime then being what is left after it resumes.
  // Pending: its predicted whole runtime.
  Micros runtime = 0;
};

struct ForecastInput {
  Micros now = 0;
  std::shared_ptr<const QueueTree> tree;
  std::optional<ClusterState> state;  // required
  SchedulerPolicy policy;
  std::string placement = "bestfit";  // plugins/registry.h profile
  // The live placement's learned typical tasks (WorkloadLearner), for tessera and fgd;
  // none: those place with bestfit, as the live core does before its first task.
  std::optional<TypicalWorkload> typical;
  std::optional<QueueUsage::Saved> usage;  // fair share as the live scheduler has it
  std::vector<ForecastJob> jobs;
  int64_t reserved = -1;  // index into jobs of the live scheduler's reservation; -1 none
};

struct ForecastOptions {
  uint64_t seed = 1;
  Micros horizon = 7LL * 24 * 3600 * 1'000'000;  // no estimate beyond now + horizon
  int64_t max_cycles = 20'000;                    // the run's budget of cycles
  // Events within max(min_resolution, distance from the snapshot x this) of a batch's
  // first share its cycle.
  double resolution_fraction = 0.01;
  Micros min_resolution = 1'000'000;
  Micros tick = 300'000'000;  // a cycle at least this often while jobs wait (fair share)
};

struct JobForecast {
  size_t job = 0;               // index into ForecastInput::jobs
  std::optional<Micros> eta;    // none: not started within the horizon or budget
  int64_t position = 0;         // 1-based rank in the scheduler's order at the snapshot
  int64_t queue_position = 0;   // the same among its queue's pending jobs
  ForecastBlocking blocking;
};

struct Forecast {
  Micros now = 0;
  Micros horizon_end = 0;       // "no estimate before" this
  std::vector<JobForecast> pending;  // in scheduler order (position 1 first)
  int64_t cycles = 0;
  bool budget_exhausted = false;  // stopped by max_cycles before the horizon
};

// A running job's predicted remaining time at `now`: `estimate` (its predicted whole
// runtime) less its progress; once past it, `overdue_factor` times the time it has run
// (0: nothing); cut to its runtime limit when it has one, and at least `floor` (an
// overdue job still ends some time).
Micros ForecastRemaining(Micros estimate, const JobRecord& job, Micros now, Micros floor,
                         double overdue_factor = 0);

StatusOr<Forecast> RunStartForecast(ForecastInput input, const ForecastOptions& options);

}  // namespace tessera
