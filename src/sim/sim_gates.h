// Holds and dependencies in the job simulator, gated as the live controller gates them
// (server/modules/job_gates_module.h, its pass): a job submitted held (SimJob::hold) or with
// a dependency (SimJob::dependency) is gated in the core (JobLifecycle::Gate) from its
// arrival, so it cannot start in the cycle of its own arrival; before every cycle each
// such job still pending is gated again while it is held or its dependency is not
// satisfied, and ungated otherwise (JobLifecycle::Ungate, which enqueues it). Both only
// ever pass once: a release is for good, and a satisfied dependency stays satisfied. A
// dependency that can never be satisfied keeps its job gated for good (it never starts).
//
// A dependency's jobs are named by their index in the run's job list (JobRef::id, no
// array elements); what a named job stands at (api/job_relations.h, DependencyTarget):
// started once it has started an attempt or runs now, ended once it finished,
// succeeded once it finished with JobEnd::kSucceeded.
// Thread safety: one per simulation.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "api/job_relations.h"
#include "base/clock.h"
#include "base/status.h"
#include "sched/job_lifecycle.h"
#include "sim/job_sim.h"

namespace tessera {

// Whether `spec` is satisfied, each job it names standing as `target` says: every item
// (',') or, with spec.any ('?'), at least one. A spec without items is satisfied.
bool DependencySatisfied(const DependencySpec& spec,
                         const std::function<DependencyTarget(uint64_t job)>& target);

// Checks the holds, releases and dependencies of a run's jobs: a dependency names jobs
// of the run other than its own, by index, with no singleton and no array element; a
// release is of a held job, at or after its submission. InvalidArgument naming the job.
Status ValidateSimGates(const std::vector<SimJob>& jobs);

class SimGates {
 public:
  explicit SimGates(const std::vector<SimJob>& jobs);

  // Whether the job has a hold or a dependency (it is gated from its arrival).
  bool Watches(uint64_t id) const { return watch_[id] != 0; }
  // The job arrived (submitted to the lifecycle): gated when watched.
  void Arrived(JobRecord& job, JobLifecycle& lifecycle);
  // The job's hold is lifted; the next Update ungates it unless its dependency waits.
  void Release(uint64_t id) { held_[id] = 0; }
  // The job finished (no more attempts) with `end`.
  void Finished(uint64_t id, JobEnd end) { ends_[id] = end; }
  // Before a cycle: gates or ungates every watched pending job, in arrival order.
  void Update(std::vector<JobRecord>& jobs, JobLifecycle& lifecycle, Micros now);
  // Whether a gated job would be let go by the next Update (its dependency was met
  // after this cycle's Update, by a start in the cycle): the periodic tick is due then,
  // as for a job that waits to be scheduled.
  bool AnyDue(const std::vector<JobRecord>& jobs, const JobLifecycle& lifecycle) const;

 private:
  DependencyTarget TargetOf(const std::vector<JobRecord>& jobs, uint64_t id) const;
  bool Passes(const std::vector<JobRecord>& jobs, uint64_t id) const;

  std::vector<DependencySpec> dependencies_;  // by job id
  std::vector<char> watch_;                   // by job id
  std::vector<char> held_;                    // by job id: held and not yet released
  std::vector<std::optional<JobEnd>> ends_;   // by job id: how it finished
  std::vector<uint64_t> watched_;             // arrived watched jobs still to finish
};

}  // namespace tessera
