// The controller's GPU health: telemetry from the agents, drains by health checks
// and by admins (kept durable by the node registry, node_registry.h; the admin's drains
// and resumes: services/node_actions.h).
#include <iostream>

#include "base/time_format.h"
#include "server/controller.h"

namespace tessera {
Status Controller::LoadDrains() {
  TESSERA_ASSIGN_OR_RETURN(auto stored, store_->ListKv(NodeRegistry::DrainsKeyPrefix()));
  return nodes_.RestoreDrains(stored, clock_->NowMicros());
}

void Controller::ApplyDrains(const NodeInfo& node) {
  if (core_.state() == nullptr) {
    return;
  }
  StatusOr<NodeId> id = core_.state()->FindNode(node.inventory.spec.name);
  if (!id.ok()) {
    return;
  }
  // A node waiting to take a new inventory takes no work on the old one.
  (void)core_.state()->SetNodeDrained(
      id.value(), node.drain.has_value() || nodes_.AwaitsRespec(node.inventory.spec.name) ||
                      !host_.NodeHold(node.inventory.spec.name).empty());  // e.g. for a check
  const int gpus = core_.state()->node(id.value()).gpu_count();
  for (int g = 0; g < gpus; ++g) {
    (void)core_.state()->SetGpuDrained(id.value(), g, node.gpu_drains.count(g) > 0);
  }
}

void Controller::SetDrain(NodeInfo& node, int gpu, std::optional<DrainInfo> drain, Pending& out) {
  fit_stale_ = true;
  const std::string& name = node.inventory.spec.name;
  const std::string what = gpu < 0 ? "node " + name : "node " + name + " GPU " + std::to_string(gpu);
  if (drain) {
    std::cerr << "tessera server: " << what << " drained by " << drain->by << ": " << drain->reason
              << "\n";
  } else {
    std::cerr << "tessera server: " << what << " resumed\n";
  }
  std::pair<std::string, std::string> row = nodes_.SetDrain(node, gpu, std::move(drain));
  if (!core_.rebuild_pending() && node.up) {
    ApplyDrains(node);
  }
  out.batch.kv.push_back(std::move(row));
}

void Controller::HandleTelemetry(NodeInfo& node, const std::string& agent_id,
                                 std::vector<GpuTelemetry> sample, Micros now, Pending& out) {
  std::vector<GpuTelemetry> by_index = NodeRegistry::ByGpuIndex(node, std::move(sample));
  host_.OnTelemetry(node, by_index, NodeRegistry::ContinuesTelemetry(node, agent_id),
                    *HookStep(now, &out));
  NodeRegistry::NoteTelemetry(node, std::move(by_index), agent_id, now);
}

}  // namespace tessera
