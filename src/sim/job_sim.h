// The job-level discrete-event simulator: a trace of jobs through the scheduling
// cycle in virtual time.
//
// Every attempt of a job goes through the AttemptMachine (sched/attempt_machine.h), task
// by task, as in the live controller: each task exits 0 when its work is done, or with
// a failure the job states (SimJob::failures); a stop (a preemption, a gang member's
// failure, a lost node, a GPU fault, a time limit) signals the tasks still running,
// which exit with signal 15 at the end of their grace (checkpointing first when the job
// checkpoints on its signal or preemption is lossless); the machine decides the end
// (requeued, restarted after the policy's backoff, succeeded, failed).
//
// Events of one instant apply in this order, then one cycle runs: task exits (work
// done, failures, kills, in the order they were scheduled; kills with no grace made
// while applying the instant join it), cluster events (SimClusterEvent), arrivals,
// releases of held jobs, time limits, idle samples (sim/sim_idle.h), ticks (the periodic
// tick while jobs wait to be scheduled, and one at the end of each restart's backoff). A cycle runs after an
// instant where anything applied; before it, holds and dependencies gate or ungate the
// jobs that have them (sim/sim_gates.h). After every cycle the lifecycle's invariants
// are checked and every breach counted. Deterministic
// for a given seed: the only randomness is the placer's tie-break and users' runtime
// limits, both drawn from seeded generators.
// Thread safety: one simulation per thread; runs share nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/job_relations.h"
#include "base/clock.h"
#include "base/status.h"
#include "model/gpu_catalog.h"
#include "model/idle_policy.h"
#include "model/job.h"
#include "model/node.h"
#include "model/queue_tree.h"
#include "model/restart_policy.h"
#include "plugins/job_policies.h"
#include "sched/runtime_predictor.h"
#include "sim/job_report.h"

namespace tessera {

// Task `task` of the job's attempt number `attempt` (1-based: its Nth start) exits with
// `exit_code` or is killed by `signal`, `after` its start (JobRecord::run_start), unless
// it exited before (its work done, or stopped). Work done at the same instant wins.
struct SimFailure {
  int attempt = 1;
  Micros after = 0;
  int task = 0;
  int exit_code = 1;
  int signal = 0;
};

// From `after` into each attempt (since its start) its GPUs are `pct` % busy (0..100),
// until the next step (sim/sim_idle.h).
struct SimUtilisation {
  Micros after = 0;
  int pct = 100;
};

struct SimJob {
  JobSpec spec;
  Micros duration = 0;  // true runtime when never interrupted
  RestartPolicy restart = DefaultRestartPolicy();
  std::vector<SimFailure> failures = {};
  // Submitted held (JobSubmission::hold): it does not start before `release` (never
  // when unset), as the controller's hold until `tessera release` (sim/sim_gates.h).
  bool hold = false;
  std::optional<Micros> release = std::nullopt;
  // It does not start before this holds (api/job_relations.h), each JobRef naming a job
  // of the run by its index in the job list (JobRef::id; no array elements, no
  // singleton). Empty: none.
  DependencySpec dependency = {};
  // How busy its GPUs are over each attempt, in ascending `after`; empty: 100 %.
  std::vector<SimUtilisation> utilisation = {};
};

// Something happens to the cluster at `at`. kNodeLost: the node's tasks are lost (their
// jobs requeue for node-lost, or fail when their policy does not restart them) and the
// node leaves for good. kGpuFault: GPU `gpu` of the node is drained and every running
// job holding it stops (the stop grace) and requeues for gpu-fault (`xid` names it).
struct SimClusterEvent {
  enum class Kind { kNodeLost, kGpuFault };
  Micros at = 0;
  Kind kind = Kind::kNodeLost;
  std::string node;
  int gpu = 0;
  int xid = 79;
};

struct JobSimOptions {
  SchedulerPolicy policy;
  // Task placement profile (plugins/registry.h); "tessera" and "fgd" learn the workload
  // from the jobs submitted, as the live controller does.
  std::string placement = "tessera";
  uint64_t seed = 42;
  Micros tick = 300'000'000;          // cycle period while jobs wait
  RuntimePredictor::Options predictor;
  // The grace given to a job's tasks on a time limit or a GPU fault (the controller's
  // stop_grace).
  Micros stop_grace = 30'000'000;
  std::vector<SimClusterEvent> cluster_events;
  // Queues' idle policies by queue name (sim/sim_idle.h); none: no idle actions.
  std::map<std::string, IdlePolicy> idle;
  bool record_usage = true;   // tenants' usage over time (for plots)
  bool record_events = false;  // the event log (for scenario tests)
  // Called now and then with the fraction of jobs finished.
  std::function<void(double)> progress;
};

struct SimEvent {
  enum class Kind { kSubmit, kStart, kPreempt, kEvict, kFinish };
  Micros time = 0;
  Kind kind = Kind::kSubmit;
  std::string job;
  std::vector<std::string> nodes;  // kStart: where its tasks run, in task order
  std::string by;                  // kPreempt: the job the victim makes room for
  bool backfilled = false;         // kStart
  bool borrowing = false;          // kStart
};

std::string_view SimEventKindName(SimEvent::Kind kind);

struct JobSimResult {
  JobRun run;
  std::vector<SimEvent> events;
  std::vector<std::string> violations;  // the first few quota breaches, described
};

StatusOr<JobSimResult> RunJobSimulation(const std::vector<NodeSpec>& nodes,
                                        const QueueTreeSpec& queues,
                                        const std::vector<SimJob>& jobs,
                                        const JobSimOptions& options, const GpuCatalog& catalog);

}  // namespace tessera
