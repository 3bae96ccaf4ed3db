// Controller: the core's cluster, rebuilt and changed in place as nodes join and leave
// and as their drains change (core_session.h, "the cluster's nodes"; drains by health
// checks and admins are kept durable by node_registry.h; the admin's: services/
// node_actions.h). The controller requeues the jobs that no longer fit.
#include <iostream>

#include "server/controller.h"

namespace tessera {

CoreSession::NodeHold Controller::NodeHolds() const {
  return [this](const std::string& name) { return !host_.NodeHold(name).empty(); };
}

CoreSession::MisfitSink Controller::RequeueMisfits(Micros now, Pending& out) {
  return [this, now, &out](LiveJob& job, const std::string& why) REQUIRES(mu_) {
    std::cerr << "tessera server: " << why << "; requeued\n";
    StopJob(job,
            StopRequest{AttemptEnd::kRequeue, RequeueCause::kTaskLost, 0,
                        "requeued: its node came back without room for it (" + why + ")"},
            now, out);
  };
}

Status Controller::RebuildScheduler(Micros now, Pending& out) {
  return core_.Rebuild(nodes_, jobs_, NodeHolds(), clock_->NowMicros(), RequeueMisfits(now, out));
}

void Controller::NodeJoined(const NodeInfo& node, Micros now, Pending& out) {
  fits_.MarkStale();
  core_.JoinNode(node, nodes_, jobs_, NodeHolds(), RequeueMisfits(now, out));
}

void Controller::NodeLeft(const std::string& name) {
  fits_.MarkStale();
  core_.LeaveNode(name, nodes_);
}

void Controller::ApplyDrains(const NodeInfo& node) { core_.ApplyDrains(node, nodes_, NodeHolds()); }

void Controller::SetDrain(NodeInfo& node, int gpu, std::optional<DrainInfo> drain, Pending& out) {
  fits_.MarkStale();
  std::pair<std::string, std::string> row = nodes_.SetDrain(node, gpu, std::move(drain));
  if (!core_.rebuild_pending() && node.up) {
    ApplyDrains(node);
  }
  out.batch.kv.push_back(std::move(row));
}

}  // namespace tessera
