// Arrays, dependencies, holds and singletons: the controller's facade of the
// JobGatesModule (modules/job_gates_module.h), which owns the gates and decides them.
// Here: a submission's dependency checked against what its submitter may see, and a
// pending job's gate reason. Hold, release, requeue and cancel by a job's name are the
// JobActions service's (services/job_actions.h), through ServiceStep.
#include "api/job_relations.h"
#include "server/controller.h"
#include "server/job_admission.h"

namespace tessera {

Status Controller::PrepareSubmission(const Principal& who, JobSubmission& job) {
  if (job.array_index >= 0) {
    return InvalidArgumentError("array_index: is set by the server on each element of an array");
  }
  TESSERA_RETURN_IF_ERROR(ResolvePriorityClass(core_.tree(), job));
  if (job.dependency.empty()) {
    return Status::Ok();
  }
  StatusOr<DependencySpec> spec = ParseDependencySpec(job.dependency);
  if (!spec.ok()) {
    return InvalidArgumentError("dependency: " + spec.status().message());
  }
  std::unique_ptr<ModuleStep> step = LockedStep(clock_->NowMicros(), nullptr);
  for (const Dependency& d : spec->items) {
    for (const JobRef& ref : d.jobs) {
      StatusOr<std::vector<JobNumber>> ids = gates_.DependencyJobs(ref, *step, /*may_load=*/true);
      if (!ids.ok()) {
        return InvalidArgumentError("dependency: " + ids.status().message());
      }
      // Named jobs must be the submitter's to see.
      std::optional<LiveJob> archived;
      const LiveJob* target = FindOrLoad(ids->front(), &archived);
      if (target == nullptr || !PublishedJobs::Visible(who, target->row.tenant)) {
        return InvalidArgumentError("dependency: no job " + JobRefText(ref));
      }
    }
  }
  return Status::Ok();
}

std::string Controller::GateReason(const LiveJob& job) const { return gates_.Reason(job.id()); }

}  // namespace tessera
