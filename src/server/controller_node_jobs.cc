// Controller: jobs a module runs itself on one whole node (ModuleStep::StartNodeJob; the
// validation checks of modules/validation_runs.h). Started at once, without the cycle's
// placer, and then a job like any other: its row, launch, view, usage and quota charge.
// What such a job takes and is submitted as: node_jobs.h.
#include <string>

#include "server/controller.h"
#include "server/node_jobs.h"

namespace tessera {

StatusOr<JobNumber> Controller::StartNodeJob(const std::string& node_name, const NodeJob& request,
                                             Micros now, Pending& out) {
  if (core_.state() == nullptr) {
    return FailedPreconditionError("the scheduler is not built yet");
  }
  StatusOr<NodeId> node_id = core_.state()->FindNode(node_name);
  if (!node_id.ok()) {
    return node_id.status();
  }
  NodeJobStart start =
      PlanNodeJob(node_id.value(), core_.state()->spec(node_id.value()),
                  core_.state()->node(node_id.value()), request, core_.tree(), now);
  // Checked on the live ledger first, so that a refusal changes nothing.
  TESSERA_RETURN_IF_ERROR(core_.state()->Allocate(start.allocation));
  TESSERA_RETURN_IF_ERROR(core_.state()->Release(start.allocation));

  LiveJob& job = jobs_.AddStarted(std::move(start.submission), start.allocation, *catalog_,
                                  core_.tree(), now);
  ++counters_.submitted[job.row.queue];
  // Held and charged as a running job is after a restart, without the cycle's placer.
  Status held = core_.lifecycle()->Restore(jobs_.Rec(job));
  if (!held.ok()) {
    return held;  // not reached: Allocate succeeded above under the same lock
  }
  StartJob(job, StartDecision{}, now, out);
  return job.id();
}

}  // namespace tessera
