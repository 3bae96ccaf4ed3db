// The job-level discrete-event simulator: a trace of jobs through the scheduling
// cycle in virtual time.
//
// Events: arrival, start, finish, preemption signal, eviction (requeue), and a
// periodic tick while jobs wait (fair-share decay and starvation limits move with
// time). All events of one timestamp are applied, then one cycle runs. After every
// cycle the quota invariant is checked (QuotaLedger::Violations) and every breach
// counted. Deterministic for a given seed: the only randomness is the placer's
// tie-break and users' runtime limits, both drawn from seeded generators.
// Thread safety: one simulation per thread; runs share nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "model/gpu_catalog.h"
#include "model/job.h"
#include "model/node.h"
#include "model/queue_tree.h"
#include "plugins/job_policies.h"
#include "sched/runtime_predictor.h"
#include "sim/job_report.h"

namespace tessera {

struct SimJob {
  JobSpec spec;
  Micros duration = 0;  // true runtime when never interrupted
};

struct JobSimOptions {
  SchedulerPolicy policy;
  // Task placement profile (plugins/registry.h); "tessera" and "fgd" learn the workload
  // from the jobs submitted, as the live controller does.
  std::string placement = "tessera";
  uint64_t seed = 42;
  Micros tick = 300'000'000;          // cycle period while jobs wait
  RuntimePredictor::Options predictor;
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
