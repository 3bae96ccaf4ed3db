// Controller: node membership (what the core keeps of a node the admin removed: its
// marker, services/node_actions.h removes). Inventory bounds: inventory_bounds.h.
#include <iostream>

#include "server/controller.h"

namespace tessera {
namespace {

constexpr const char* kRemovedNodePrefix = "removed_node/";  // + name: {"at_us"} or ""

}  // namespace

void Controller::ForgetNode(const std::string& name, Micros now, Pending& out) {
  out.batch.kv.emplace_back(kRemovedNodePrefix + name, nlohmann::json{{"at_us", now}}.dump());
  host_.OnNodeRemoved(name, *HookStep(now, &out));
  out.batch.kv.push_back(NodeRegistry::NoDrainsRow(name));
  nodes_.all().erase(name);
  fit_stale_ = true;
  std::cerr << "tessera server: node " << name << " removed by the admin\n";
}

Status Controller::ForgetRemovedNodes() {
  TESSERA_ASSIGN_OR_RETURN(auto removed, store_->ListKv(kRemovedNodePrefix));
  MutexLock lock(mu_);
  for (const auto& [key, value] : removed) {
    if (!value.empty()) {
      nodes_.all().erase(key.substr(std::string(kRemovedNodePrefix).size()));
      core_.RequestRebuild();
      fit_stale_ = true;
    }
  }
  return Status::Ok();
}

Status Controller::ClearRemovedNode(const std::string& name) {
  TESSERA_ASSIGN_OR_RETURN(std::optional<std::string> marker,
                           store_->GetKv(kRemovedNodePrefix + name));
  if (!marker || marker->empty()) {
    return Status::Ok();
  }
  WriteBatch batch;
  batch.kv.emplace_back(kRemovedNodePrefix + name, "");
  return store_->Commit(std::move(batch));
}

void Controller::CountForeignReports(const std::string& node,
                                     const std::vector<TaskReport>& reports) {
  if (reports.empty()) {
    return;
  }
  MutexLock lock(mu_);
  for (const TaskReport& r : reports) {
    LiveJob* job = jobs_.Find(JobNumber(r.key.job));
    if (job == nullptr || r.key.task < 0 || static_cast<size_t>(r.key.task) >= job->tasks.size() ||
        job->row.attempts != r.key.attempt) {
      continue;  // stale or unknown: the usual reconciliation answers it
    }
    const std::string& placed = job->tasks[static_cast<size_t>(r.key.task)].node;
    if (placed != node) {
      ++counters_.foreign_reports;
      std::cerr << "tessera server: node " << node << " reported on task " << r.key.task
                << " of job " << r.key.job << " (attempt " << r.key.attempt << "), placed on "
                << placed << ": ignored\n";
    }
  }
}

}  // namespace tessera
