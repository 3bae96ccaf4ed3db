// CoreSession: the cluster state built from the nodes that are up, then changed in place
// as nodes join and leave, so that fair share, the running set and the placer's caches
// outlive node events (core_session.h).
#include <algorithm>
#include <iostream>

#include "server/core_session.h"
#include "server/job_table.h"
#include "server/node_jobs.h"
#include "server/node_registry.h"

namespace tessera {

Status CoreSession::Rebuild(NodeRegistry& nodes, JobTable& jobs, const NodeHold& hold, Micros now,
                            const MisfitSink& misfit) {
  std::vector<const NodeInfo*> up;
  for (const auto& [name, node] : nodes.all()) {
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
  TESSERA_RETURN_IF_ERROR(BuildState(std::move(specs)));
  for (const NodeInfo* node : up) {
    ApplyDrains(*node, nodes, hold);
  }
  TESSERA_RETURN_IF_ERROR(BuildScheduler(now));
  std::vector<std::pair<JobNumber, std::string>> misfits;
  TESSERA_RETURN_IF_ERROR(PutBackJobs(jobs, misfits));
  FinishRebuild();
  nodes.respec().clear();  // every up node's spec is current in the new core
  for (const auto& [id, why] : misfits) {
    misfit(jobs.all().at(id), why);
  }
  return Status::Ok();
}

Status CoreSession::PutBackJobs(JobTable& jobs,
                                std::vector<std::pair<JobNumber, std::string>>& misfits) {
  for (auto& [id, job] : jobs.all()) {
    JobRecord& rec = jobs.Rec(job);
    if (!job.durable || rec.phase == JobPhase::kFinished) {
      continue;
    }
    StatusOr<QueueId> q = tree_->FindQueue(job.row.queue);
    if (!q.ok()) {
      return InternalError("job " + ToString(id) + ": queue '" + job.row.queue +
                           "' is not in the configuration");
    }
    rec.queue = q.value();
    if (rec.phase != JobPhase::kPending) {
      // Running or stopping: what still runs on nodes that are up is held again.
      rec.held.assign(rec.allocations.size(), 0);
      for (size_t t = 0; t < rec.allocations.size(); ++t) {
        StatusOr<NodeId> node = state_->FindNode(job.tasks[t].node);
        if (jobs.TaskExited(job, t) || !node.ok()) {
          continue;
        }
        rec.allocations[t].node = node.value();
        rec.held[t] = 1;
      }
    }
    if (Status restored = lifecycle_->Restore(rec); !restored.ok()) {
      misfits.emplace_back(id, restored.message());
    }
  }
  return Status::Ok();
}

void CoreSession::JoinNode(const NodeInfo& node, NodeRegistry& nodes, JobTable& jobs,
                           const NodeHold& hold, const MisfitSink& misfit) {
  if (state_ == nullptr || rebuild_) {
    return;  // the rebuild before the next cycle takes the node as it is
  }
  const NodeSpec& spec = node.inventory.spec;
  StatusOr<NodeId> id = state_->FindNode(spec.name);
  Status s;
  if (!id.ok()) {
    StatusOr<NodeId> added = state_->AddNode(spec);
    s = added.status();
    id = added;
  } else if (state_->spec(id.value()) != spec) {
    NodeSpec relabeled = state_->spec(id.value());
    relabeled.labels = spec.labels;
    if (relabeled == spec) {
      // Only its labels changed: they weigh nothing, so the node keeps its work and
      // the scheduler regroups racks and blocks (NodesChanged below).
      s = state_->RelabelNode(id.value(), spec.labels);
      nodes.respec().erase(spec.name);
    } else {
      nodes.respec().insert(spec.name);  // drained below; updated once it holds nothing
    }
  } else {
    nodes.respec().erase(spec.name);
  }
  if (!s.ok()) {
    std::cerr << "tessera server: node " << spec.name << " joined: " << s.ToString()
              << "; rebuilding the scheduler's cluster\n";
    rebuild_ = true;
    return;
  }
  ApplyDrains(node, nodes, hold);
  AttachTasks(spec.name, id.value(), jobs, misfit);
  NodesChanged();
}

void CoreSession::AttachTasks(const std::string& name, NodeId id, JobTable& jobs,
                              const MisfitSink& misfit) {
  // Tasks it still runs (after a restart of the controller, the node's come back).
  for (auto& [job_id, job] : jobs.all()) {
    JobRecord& rec = jobs.Rec(job);
    if (!InAttempt(rec.phase)) {
      continue;
    }
    rec.held.resize(rec.allocations.size(), 0);
    for (size_t t = 0; t < job.tasks.size() && t < rec.allocations.size(); ++t) {
      if (job.tasks[t].node != name || jobs.TaskExited(job, t) || rec.held[t] != 0) {
        continue;
      }
      rec.allocations[t].node = id;
      if (Status attached = lifecycle_->AttachTask(rec, t); !attached.ok()) {
        misfit(job, attached.message());
        break;
      }
    }
  }
}

void CoreSession::LeaveNode(const std::string& name, NodeRegistry& nodes) {
  nodes.respec().erase(name);
  if (state_ == nullptr || rebuild_) {
    return;
  }
  StatusOr<NodeId> id = state_->FindNode(name);
  if (!id.ok()) {
    return;  // never joined this core
  }
  Status s = state_->RemoveNode(id.value());
  if (!s.ok()) {
    std::cerr << "tessera server: node " << name << " left: " << s.ToString()
              << "; rebuilding the scheduler's cluster\n";
    rebuild_ = true;
    return;
  }
  NodesChanged();
}

void CoreSession::ApplyRespecs(NodeRegistry& nodes, const NodeHold& hold) {
  bool changed = false;
  for (auto it = nodes.respec().begin(); it != nodes.respec().end();) {
    auto node = nodes.all().find(*it);
    StatusOr<NodeId> id = state_->FindNode(*it);
    if (node == nodes.all().end() || !node->second.up || !id.ok()) {
      it = nodes.respec().erase(it);
      continue;
    }
    if (!state_->UpdateNode(id.value(), node->second.inventory.spec).ok()) {
      ++it;  // still holds work: stays drained
      continue;
    }
    std::cerr << "tessera server: node " << *it << " takes its new inventory\n";
    it = nodes.respec().erase(it);
    ApplyDrains(node->second, nodes, hold);
    changed = true;
  }
  if (changed) {
    NodesChanged();
  }
}

void CoreSession::ApplyDrains(const NodeInfo& node, const NodeRegistry& nodes,
                              const NodeHold& hold) {
  if (state_ == nullptr) {
    return;
  }
  const std::string& name = node.inventory.spec.name;
  StatusOr<NodeId> id = state_->FindNode(name);
  if (!id.ok()) {
    return;
  }
  // A node waiting to take a new inventory takes no work on the old one.
  (void)state_->SetNodeDrained(id.value(),
                               node.drain.has_value() || nodes.AwaitsRespec(name) || hold(name));
  const int gpus = state_->node(id.value()).gpu_count();
  for (int g = 0; g < gpus; ++g) {
    (void)state_->SetGpuDrained(id.value(), g, node.gpu_drains.count(g) > 0);
  }
}

StatusOr<LiveJob*> CoreSession::AddNodeJob(JobTable& jobs, const std::string& node,
                                           const NodeJob& request, Micros now) {
  if (state_ == nullptr) {
    return FailedPreconditionError("the scheduler is not built yet");
  }
  TESSERA_ASSIGN_OR_RETURN(NodeId id, state_->FindNode(node));
  NodeJobStart start = PlanNodeJob(id, state_->spec(id), state_->node(id), request, *tree_, now);
  // Checked on the live ledger first, so that a refusal changes nothing.
  TESSERA_RETURN_IF_ERROR(state_->Allocate(start.allocation));
  TESSERA_RETURN_IF_ERROR(state_->Release(start.allocation));
  LiveJob& job =
      jobs.AddStarted(std::move(start.submission), start.allocation, *catalog_, *tree_, now);
  // Not refused: the allocation was just checked.
  TESSERA_RETURN_IF_ERROR(lifecycle_->Restore(jobs.Rec(job)));
  return &job;
}

}  // namespace tessera
