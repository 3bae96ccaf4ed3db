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
  TESSERA_ASSIGN_OR_RETURN(ClusterState state, ClusterState::Create(std::move(specs), *catalog_));
  state_ = std::make_unique<ClusterState>(std::move(state));
  for (const auto& [name, node] : nodes_.all()) {
    if (node.up) {
      ApplyDrains(node);
    }
  }
  quota_ = std::make_unique<QuotaLedger>(*tree_);
  NoteCapacity();
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<JobOrderPlugin> job_order,
                           MakeJobOrder(policy_.job_order, policy_.options));
  std::unique_ptr<QueueOrderPlugin> queue_order;
  if (!policy_.queue_order.empty()) {
    TESSERA_ASSIGN_OR_RETURN(queue_order, MakeQueueOrder(policy_.queue_order));
  }
  TESSERA_ASSIGN_OR_RETURN(Profile profile, MakePlacement());
  CarryUsage(clock_->NowMicros());  // fair share outlives the scheduler
  scheduler_ = std::make_unique<JobScheduler>(*tree_, *state_, policy_.options,
                                              std::move(job_order), std::move(queue_order),
                                              std::move(profile), policy_.fairshare_half_life);
  if (carried_usage_) {
    scheduler_->RestoreUsage(*carried_usage_);
  }
  lifecycle_->set_tree(tree_.get());
  lifecycle_->Bind(state_.get(), quota_.get(), scheduler_.get());
  std::vector<std::pair<uint64_t, std::string>> misfits;  // jobs whose held task no longer fits
  for (auto& [id, job] : jobs_.all()) {
    JobRecord& rec = jobs_.Rec(job);
    if (!job.durable || rec.phase == JobPhase::kFinished) {
      continue;
    }
    StatusOr<QueueId> q = tree_->FindQueue(job.row.queue);
    if (!q.ok()) {
      return InternalError("job " + std::to_string(id) + ": queue '" + job.row.queue +
                           "' is not in the configuration");
    }
    rec.queue = q.value();
    if (rec.phase != JobPhase::kPending) {
      // Running or stopping: what still runs on nodes that are up is held again.
      rec.held.assign(rec.allocations.size(), 0);
      for (size_t t = 0; t < rec.allocations.size(); ++t) {
        StatusOr<NodeId> node = state_->FindNode(job.tasks[t].node);
        if (job.tasks[t].exited || !node.ok()) {
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
  rebuild_ = false;
  nodes_.respec().clear();  // every up node's spec is current in the new core
  ++rebuilds_;
  for (const auto& [id, why] : misfits) {
    RequeueMisfit(jobs_.all().at(id), why, now, out);
  }
  return Status::Ok();
}

void Controller::RequeueMisfit(LiveJob& job, const std::string& why, Micros now, Pending& out) {
  std::cerr << "tessera server: " << why << "; requeued\n";
  PlanRequeue(job, RequeueCause::kTaskLost,
              "requeued: its node came back without room for it (" + why + ")");
  StopJob(job, job.after, 0, now, out);
}

void Controller::NoteCapacity() {
  capacity_ = NodeCapacity{};
  reservation_.reset();
  for (size_t n = 0; n < state_->node_count(); ++n) {
    const NodeSpec& spec = state_->spec(NodeId(n));
    capacity_.cpu = std::max(capacity_.cpu, spec.cpu.value());
    capacity_.memory = std::max(capacity_.memory, spec.memory.value());
    std::map<std::pair<uint32_t, int>, int> here;
    for (const GpuSpec& g : spec.gpus) {
      ++here[{g.model.value(), static_cast<int>(g.mode)}];
    }
    for (const auto& [key, count] : here) {
      capacity_.gpus[key] = std::max(capacity_.gpus[key], count);
    }
  }
}

StatusOr<Profile> Controller::MakePlacement() const {
  PolicyContext context{ScaleOf(*state_), nullptr};
  return MakeProfile(options_.placement, context);
}

// ---- node changes in place ----------------------------------------------------------

void Controller::NodeJoined(const NodeInfo& node, Micros now, Pending& out) {
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
    nodes_.respec().insert(spec.name);  // drained below; updated once it holds nothing
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
        if (job.tasks[t].node != spec.name || job.tasks[t].exited || rec.held[t] != 0) {
          continue;
        }
        rec.allocations[t].node = id.value();
        if (Status attached = lifecycle_->AttachTask(rec, t); !attached.ok()) {
          RequeueMisfit(job, attached.message(), now, out);
          break;
        }
      }
    }
  }
  if (!s.ok()) {
    std::cerr << "tessera server: node " << spec.name << " joined: " << s.ToString()
              << "; rebuilding the scheduler's cluster\n";
    rebuild_ = true;
    return;
  }
  NodesChanged();
}

void Controller::NodeLeft(const std::string& name) {
  nodes_.respec().erase(name);
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

void Controller::ApplyRespecs() {
  bool changed = false;
  for (auto it = nodes_.respec().begin(); it != nodes_.respec().end();) {
    auto node = nodes_.all().find(*it);
    StatusOr<NodeId> id = state_->FindNode(*it);
    if (node == nodes_.all().end() || !node->second.up || !id.ok()) {
      it = nodes_.respec().erase(it);
      continue;
    }
    if (!state_->UpdateNode(id.value(), node->second.inventory.spec).ok()) {
      ++it;  // still holds work: stays drained
      continue;
    }
    std::cerr << "tessera server: node " << *it << " takes its new inventory\n";
    it = nodes_.respec().erase(it);
    ApplyDrains(node->second);
    changed = true;
  }
  if (changed) {
    NodesChanged();
  }
}

void Controller::NodesChanged() {
  NoteCapacity();
  StatusOr<Profile> profile = MakePlacement();
  if (!profile.ok()) {
    std::cerr << "tessera server: placement after a node change: " << profile.status().ToString()
              << "; rebuilding the scheduler's cluster\n";
    rebuild_ = true;
    return;
  }
  scheduler_->NodesChanged(*state_, std::move(profile).value());
}

}  // namespace tessera
