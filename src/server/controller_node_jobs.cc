// Controller: jobs a module runs itself on one whole node (ModuleStep::StartNodeJob; the
// validation checks of modules/validation_runs.h). Started at once, without the cycle's
// placer, and then a job like any other: its row, launch, view, usage and quota charge.
#include <string>

#include "api/units.h"
#include "server/controller.h"

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
  const NodeSpec& spec = core_.state()->spec(node_id.value());
  const NodeLedger& ledger = core_.state()->node(node_id.value());
  Allocation a{node_id.value(), spec.cpu, spec.memory, {}};
  for (int g = 0; g < ledger.gpu_count(); ++g) {
    if (ledger.gpus()[static_cast<size_t>(g)].mode() != SharingMode::kMig) {
      a.gpus.push_back(GpuGrant{g, kWholeGpu, MiB(0), -1, -1});
    }
  }
  // Checked on the live ledger first, so that a refusal changes nothing.
  TESSERA_RETURN_IF_ERROR(core_.state()->Allocate(a));
  TESSERA_RETURN_IF_ERROR(core_.state()->Release(a));

  std::string queue = request.queue;
  if (queue.empty() || !core_.tree().FindQueue(queue).ok()) {
    queue = core_.tree().spec(core_.tree().queues().front()).name;
  }
  JobSubmission sub;
  sub.spec.name = request.name;
  sub.spec.queue = queue;
  sub.spec.user = request.tenant;
  sub.spec.preemptible = false;
  sub.spec.runtime_limit = request.runtime_limit;
  sub.spec.submit_time = now;
  TaskRequest t;
  t.cpu = spec.cpu;
  t.memory = spec.memory;
  t.gpu_count = static_cast<int>(a.gpus.size());
  t.gpu_milli = t.gpu_count > 0 ? kWholeGpu : MilliGpu(0);
  t.topology = GpuTopology::kAny;
  sub.spec.tasks.push_back(t);
  sub.command = {"/bin/sh", "-c", request.command};
  sub.env = request.env;
  sub.hold_if_unfit = true;

  const JobNumber id = jobs_.TakeId();
  LiveJob& job = jobs_.Add(id);
  job.row.id = id.value();
  job.row.tenant = request.tenant;
  job.row.queue = queue;
  job.row.name = sub.spec.name;
  job.row.spec_json = JobSubmissionToJson(sub, *catalog_).dump();
  job.row.submit_us = now;
  job.submission = std::move(sub);
  job.durable = true;
  ++counters_.submitted[queue];
  JobRecord& rec = jobs_.Rec(job);
  rec.spec = job.submission.spec;
  rec.attempt.policy = job.submission.restart.value_or(DefaultRestartPolicy());
  rec.queue = core_.tree().FindQueue(queue).value();
  rec.gpu_milli = rec.spec.TotalGpuMilli(*catalog_);
  rec.allocations = {a};
  rec.held = {1};
  rec.phase = JobPhase::kRunning;
  rec.run_start = now;
  rec.eligible_since = now;
  rec.starts = 1;
  // Held and charged as a running job is after a restart, without the cycle's placer.
  Status held = core_.lifecycle()->Restore(rec);
  if (!held.ok()) {
    return held;  // not reached: Allocate succeeded above under the same lock
  }
  StartJob(job, StartDecision{}, now, out);
  return id;
}

}  // namespace tessera
