// Controller: node membership (a node the admin removed: NodeRegistry::RemovedRow;
// services/node_actions.h removes), the agents' GPU telemetry for the modules, and the
// jobs a module runs on one whole node (ModuleStep::StartNodeJob; CoreSession::AddNodeJob).
#include <iostream>

#include "server/controller.h"

namespace tessera {

void Controller::ForgetNode(const std::string& name, Micros now, Pending& out) {
  out.batch.kv.push_back(NodeRegistry::RemovedRow(name, now));
  host_.OnNodeRemoved(name, *HookStep(now, &out));
  out.batch.kv.push_back(nodes_.Remove(name));
  fits_.MarkStale();
}

Status Controller::ForgetRemovedNodes() {
  TESSERA_ASSIGN_OR_RETURN(auto removed, store_->ListKv(NodeRegistry::RemovedKeyPrefix()));
  MutexLock lock(mu_);
  if (nodes_.ForgetRemoved(removed)) {
    core_.RequestRebuild();
    fits_.MarkStale();
  }
  return Status::Ok();
}

void Controller::CountForeignReports(const std::string& node,
                                     const std::vector<TaskReport>& reports) {
  if (reports.empty()) {
    return;
  }
  MutexLock lock(mu_);
  for (const auto& [key, placed] : jobs_.ForeignReports(node, reports)) {
    ++counters_.foreign_reports;
    std::cerr << "tessera server: node " << node << " reported on task " << key.task << " of job "
              << key.job << " (attempt " << key.attempt << "), placed on " << placed
              << ": ignored\n";
  }
}

void Controller::HandleTelemetry(NodeInfo& node, const std::string& agent_id,
                                 std::vector<GpuTelemetry> sample, Micros now, Pending& out) {
  std::vector<GpuTelemetry> by_index = NodeRegistry::ByGpuIndex(node, std::move(sample));
  host_.OnTelemetry(node, by_index, NodeRegistry::ContinuesTelemetry(node, agent_id),
                    *HookStep(now, &out));
  NodeRegistry::NoteTelemetry(node, std::move(by_index), agent_id, now);
}

StatusOr<JobNumber> Controller::StartNodeJob(const std::string& node_name, const NodeJob& request,
                                             Micros now, Pending& out) {
  TESSERA_ASSIGN_OR_RETURN(LiveJob * job, core_.AddNodeJob(jobs_, node_name, request, now));
  ++counters_.submitted[job->row.queue];
  StartJob(*job, StartDecision{}, now, out);  // then a job like any other
  return job->id();
}

}  // namespace tessera
