// JobGatesModule: what keeps pending jobs back beyond resources: a user's hold, a
// dependency, an array's throttle (`%N`), a singleton (api/job_relations.h). Each
// watched job is gated in the core (ModuleStep::Gate) from its acknowledgement until a
// pass finds nothing keeps it back; its reason is then its pending reason. A hold is
// durable as the job row's reason (kHeldReasonPrefix); everything else follows from the
// jobs' states, so a restarted controller finds the same gates again.
//
// Owns: the gate state (modules/job_gates.h: watched jobs, their reasons and resolved
// dependencies, the arrays they name, outcomes of referenced jobs that left memory,
// the dirty flag) and the cache of parsed array texts.
// Hooks: OnJobAccepted (a submitted or reloaded job is watched and gated at once when
// something may keep it back), OnJobEvent (a start or an end may let a gated job go),
// BeforeDecide (the pass: gates and ungates the watched jobs, when something changed),
// DescribeJob (array_job, array_index, array, dependency).
// Invariants: those of JobGates (modules/job_gates.h); a watched pending job is gated
// in the core exactly while Reason says why ("" once let go); a changed reason
// republishes the job's view; a job whose dependency can never hold stays gated with a
// reason that says so (it never runs); within one pass at most `throttle` elements of
// a throttled array hold resources or are let go.
// Thread safety: none; the controller calls it with its core lock held.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/job_relations.h"
#include "server/modules/controller_module.h"
#include "server/modules/job_gates.h"

namespace tessera {

class JobGatesModule final : public ControllerModule {
 public:
  void OnJobAccepted(const JobFacts& job, ModuleStep& step) override { Watch(job, step); }
  void OnJobEvent(const JobRecord& job, const LifecycleEvent& event,
                  const QueueTree& tree) override;
  void BeforeDecide(ModuleStep& step) override { Update(step); }
  void DescribeJob(const JobFacts& job, nlohmann::json& out) const override;

  // ---- for submission and users' actions on named jobs (ServiceStep::gates) ----
  // A job that a hold, dependency, singleton or throttle may keep back: watched, and
  // gated at once until the next pass says otherwise (again after a hold).
  void Watch(const JobFacts& job, ModuleStep& step);
  // Something a pass reads changed (a hold lifted): the next pass looks again.
  void Recheck() { gates_.dirty = true; }
  // The pass (when something changed): gates and ungates the watched jobs.
  void Update(ModuleStep& step);
  // Why the job is kept back now; "" when it is not.
  std::string Reason(JobNumber job) const;
  // The array `text` names (api/job_relations.h); null when it is not one. Cached.
  std::shared_ptr<const JobGates::Array> ParsedArray(const std::string& text) const;
  // An array's elements, one submission each (array_index set).
  static std::vector<JobSubmission> ExpandArray(const JobSubmission& job, const JobGates::Array& a);
  // The array a job belongs to (its first element's id); 0: none.
  uint64_t ArrayIdOf(JobNumber job, const JobSubmission& submission) const;
  // The jobs a reference names (an array's elements for an array's id). `may_load`: a
  // job not in memory is looked for in the store (ModuleStep::FindOrLoad, which lets go
  // of the core lock). `remember`: the array is kept, for a dependency's job to find it
  // again should its first element leave memory (one small entry per array named).
  StatusOr<std::vector<JobNumber>> DependencyJobs(const JobRef& ref, ModuleStep& step,
                                                  bool may_load, bool remember = true);
  // A submission's `dependency` text (empty: none) at submission: it parses, and each
  // job it names is found (DependencyJobs, `may_load`: the step is a user's call's) and
  // `visible` (its submitter may see it). Else InvalidArgument ("dependency: ...", a job
  // not visible named as if there were none).
  Status CheckDependency(const std::string& dependency, ModuleStep& step,
                         const std::function<bool(const JobFacts&)>& visible);

 private:
  // What a dependency knows of job `id` now (kept for referenced jobs that end).
  DependencyTarget TargetOf(JobNumber id, ModuleStep& step);
  // Why a dependency keeps its job back now; "" when it holds.
  std::string DependencyReason(const JobGates::Waits& waits, ModuleStep& step);
  // Why singleton `job` waits for another job of its user and name; "" when it does not.
  struct Names;
  static std::string SingletonReason(const JobFacts& job, const Names& names);
  // A watched job that ended or left memory: forgotten, with what it referenced.
  void Forget(JobNumber id);

  JobGates gates_;
  // Parsed array texts: bounded, as texts are mostly few and repeated.
  mutable std::map<std::string, std::shared_ptr<const JobGates::Array>> parsed_arrays_;
};

}  // namespace tessera
