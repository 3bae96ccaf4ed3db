// Controller: the core's cluster (ClusterState, QuotaLedger, JobScheduler): built from
// the nodes that are up, then changed in place as nodes join and leave, so that fair
// share, the running set and the placer's caches outlive node events.
#include <algorithm>
#include <iostream>

#include "plugins/registry.h"
#include "server/controller.h"

namespace tessera {

// ---- the cluster as the core sees it ----------------------------------------------

Status Controller::RebuildScheduler(Micros now, Pending& out) {
  std::vector<const NodeInfo*> up;
  for (const auto& [name, node] : nodes_.all()) {
    if (node.up) {
      up.push_back(&node);
    }
  }
  std::sort(up.begin(), up.end(),
            [](const NodeInfo* a, const NodeInfo* b) { return a->seq < b->seq; });
  std::vector<NodeSpec> specs;
  for (const NodeInfo* node : up) {
    specs.push_back(node->inventory.spec);
  }
  TESSERA_RETURN_IF_ERROR(core_.BuildState(std::move(specs)));
  for (const auto& [name, node] : nodes_.all()) {
    if (node.up) {
      ApplyDrains(node);
    }
  }
  TESSERA_RETURN_IF_ERROR(core_.BuildScheduler(clock_->NowMicros()));
  std::vector<std::pair<JobNumber, std::string>> misfits;  // jobs whose held task no longer fits
  for (auto& [id, job] : jobs_.all()) {
    JobRecord& rec = jobs_.Rec(job);
    if (!job.durable || rec.phase == JobPhase::kFinished) {
      continue;
    }
    StatusOr<QueueId> q = core_.tree().FindQueue(job.row.queue);
    if (!q.ok()) {
      return InternalError("job " + ToString(id) + ": queue '" + job.row.queue +
                           "' is not in the configuration");
    }
    rec.queue = q.value();
    if (rec.phase != JobPhase::kPending) {
      // Running or stopping: what still runs on nodes that are up is held again.
      rec.held.assign(rec.allocations.size(), 0);
      for (size_t t = 0; t < rec.allocations.size(); ++t) {
        StatusOr<NodeId> node = core_.state()->FindNode(job.tasks[t].node);
        if (jobs_.TaskExited(job, t) || !node.ok()) {
          continue;
        }
        rec.allocations[t].node = node.value();
        rec.held[t] = 1;
      }
    }
    if (Status restored = core_.lifecycle()->Restore(rec); !restored.ok()) {
      misfits.emplace_back(id, restored.message());
    }
  }
  core_.FinishRebuild();
  nodes_.respec().clear();  // every up node's spec is current in the new core
  for (const auto& [id, why] : misfits) {
    RequeueMisfit(jobs_.all().at(id), why, now, out);
  }
  return Status::Ok();
}

void Controller::RequeueMisfit(LiveJob& job, const std::string& why, Micros now, Pending& out) {
  std::cerr << "tessera server: " << why << "; requeued\n";
  StopJob(job,
          StopRequest{AttemptEnd::kRequeue, RequeueCause::kTaskLost, 0,
                      "requeued: its node came back without room for it (" + why + ")"},
          now, out);
}

// ---- node changes in place ----------------------------------------------------------

void Controller::NodeJoined(const NodeInfo& node, Micros now, Pending& out) {
  fit_stale_ = true;
  if (core_.state() == nullptr || core_.rebuild_pending()) {
    return;  // the rebuild before the next cycle takes the node as it is
  }
  const NodeSpec& spec = node.inventory.spec;
  StatusOr<NodeId> id = core_.state()->FindNode(spec.name);
  Status s;
  if (!id.ok()) {
    StatusOr<NodeId> added = core_.state()->AddNode(spec);
    s = added.status();
    id = added;
  } else if (core_.state()->spec(id.value()) != spec) {
    NodeSpec relabeled = core_.state()->spec(id.value());
    relabeled.labels = spec.labels;
    if (relabeled == spec) {
      // Only its labels changed: they weigh nothing, so the node keeps its work and
      // the scheduler regroups racks and blocks (NodesChanged below).
      s = core_.state()->RelabelNode(id.value(), spec.labels);
      nodes_.respec().erase(spec.name);
    } else {
      nodes_.respec().insert(spec.name);  // drained below; updated once it holds nothing
    }
  } else {
    nodes_.respec().erase(spec.name);
  }
  if (s.ok()) {
    ApplyDrains(node);
    // Tasks it still runs (after a restart of the controller, the node's come back).
    for (auto& [job_id, job] : jobs_.all()) {
      JobRecord& rec = jobs_.Rec(job);
      if (rec.phase != JobPhase::kRunning && rec.phase != JobPhase::kStopping) {
        continue;
      }
      rec.held.resize(rec.allocations.size(), 0);
      for (size_t t = 0; t < job.tasks.size() && t < rec.allocations.size(); ++t) {
        if (job.tasks[t].node != spec.name || jobs_.TaskExited(job, t) || rec.held[t] != 0) {
          continue;
        }
        rec.allocations[t].node = id.value();
        if (Status attached = core_.lifecycle()->AttachTask(rec, t); !attached.ok()) {
          RequeueMisfit(job, attached.message(), now, out);
          break;
        }
      }
    }
  }
  if (!s.ok()) {
    std::cerr << "tessera server: node " << spec.name << " joined: " << s.ToString()
              << "; rebuilding the scheduler's cluster\n";
    core_.RequestRebuild();
    return;
  }
  core_.NodesChanged();
}

void Controller::NodeLeft(const std::string& name) {
  fit_stale_ = true;
  nodes_.respec().erase(name);
  if (core_.state() == nullptr || core_.rebuild_pending()) {
    return;
  }
  StatusOr<NodeId> id = core_.state()->FindNode(name);
  if (!id.ok()) {
    return;  // never joined this core
  }
  Status s = core_.state()->RemoveNode(id.value());
  if (!s.ok()) {
    std::cerr << "tessera server: node " << name << " left: " << s.ToString()
              << "; rebuilding the scheduler's cluster\n";
    core_.RequestRebuild();
    return;
  }
  core_.NodesChanged();
}

void Controller::ApplyRespecs() {
  bool changed = false;
  for (auto it = nodes_.respec().begin(); it != nodes_.respec().end();) {
    auto node = nodes_.all().find(*it);
    StatusOr<NodeId> id = core_.state()->FindNode(*it);
    if (node == nodes_.all().end() || !node->second.up || !id.ok()) {
      it = nodes_.respec().erase(it);
      continue;
    }
    if (!core_.state()->UpdateNode(id.value(), node->second.inventory.spec).ok()) {
      ++it;  // still holds work: stays drained
      continue;
    }
    std::cerr << "tessera server: node " << *it << " takes its new inventory\n";
    it = nodes_.respec().erase(it);
    ApplyDrains(node->second);
    changed = true;
  }
  if (changed) {
    core_.NodesChanged();
  }
}

}  // namespace tessera
