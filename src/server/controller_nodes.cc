// Controller: node membership (removal, fencing on revocation), the paginated job
// listing and the nodes' view as a tenant sees it. Inventory bounds: inventory_bounds.h.
#include <algorithm>
#include <iostream>

#include "server/controller.h"

namespace tessera {
namespace {

constexpr const char* kRemovedNodePrefix = "removed_node/";  // + name: {"at_us"} or ""

}  // namespace

Controller::JobPage Controller::ListJobIds(const Principal& who, const JobFilter& filter,
                                           JobNumber after, size_t limit) {
  PublishedJobs::Page published = views_.List(who, filter, after, limit);
  return JobPage{std::move(published.jobs), published.more};
}

std::vector<JobNumber> Controller::JobPage::ids() const {
  std::vector<JobNumber> out;
  out.reserve(jobs.size());
  for (const auto& view : jobs) {
    out.push_back(view->id);
  }
  return out;
}

nlohmann::json Controller::Nodes(const Principal& who) {
  MutexLock lock(mu_);
  return {{"nodes", NodesJson("", &who)}};
}

StatusOr<nlohmann::json> Controller::RemoveNode(const std::string& name, WriteBatch extra) {
  if (!healthy()) {
    return UnavailableError("the state store failed; the controller accepts no changes");
  }
  Pending out;
  {
    MutexLock lock(mu_);
    auto it = nodes_.all().find(name);
    if (it == nodes_.all().end()) {
      return NotFoundError("no node '" + name + "'");
    }
    NodeInfo& node = it->second;
    std::vector<JobNumber> running;
    for (const auto& [id, job] : jobs_.all()) {
      const JobPhase phase = jobs_.Rec(job).phase;
      if (phase != JobPhase::kRunning && phase != JobPhase::kStopping) {
        continue;
      }
      bool runs_here = false;
      for (size_t t = 0; t < job.tasks.size(); ++t) {
        runs_here = runs_here || (job.tasks[t].node == name && !jobs_.TaskExited(job, t));
      }
      if (runs_here) {
        running.push_back(id);
      }
    }
    if (node.up && !running.empty()) {
      std::sort(running.begin(), running.end());
      std::string ids;
      for (size_t i = 0; i < running.size() && i < 10; ++i) {
        ids += (i == 0 ? "" : ", ") + ToString(running[i]);
      }
      return FailedPreconditionError(
          "node '" + name + "' is up and runs " + std::to_string(running.size()) + " job(s) (" +
          ids + "); drain it and let them finish, or remove it once it is down");
    }
    const Micros now = clock_->NowMicros();
    // What a down node still holds is requeued, as when a node is lost.
    NodeDown(node, "removed by the admin", now, out);
    out.batch.kv.emplace_back(kRemovedNodePrefix + name, nlohmann::json{{"at_us", now}}.dump());
    ModulesOnNodeRemoved(name, now, out);
    out.batch.kv.push_back(NodeRegistry::NoDrainsRow(name));
    for (TokenRow& t : extra.tokens) {
      out.batch.tokens.push_back(std::move(t));
    }
    for (auto& kv : extra.kv) {
      out.batch.kv.push_back(std::move(kv));
    }
    Seal(out);
    nodes_.all().erase(it);
    fit_stale_ = true;
    std::cerr << "tessera server: node " << name << " removed by the admin\n";
  }
  TESSERA_RETURN_IF_ERROR(Publish(std::move(out)));
  Wake();
  return nlohmann::json{{"removed", name}};
}

Status Controller::FenceNode(const std::string& name, const std::string& reason) {
  Pending out;
  {
    MutexLock lock(mu_);
    auto it = nodes_.all().find(name);
    if (it == nodes_.all().end()) {
      return NotFoundError("no node '" + name + "'");
    }
    // No new work from now on; the running work is requeued only when the node is
    // declared lost (its heartbeats are refused from now on), by when its tasks have
    // fenced themselves: a new attempt must not start while the old one may still run.
    const Micros now = clock_->NowMicros();
    SetDrain(it->second, -1, DrainInfo{reason, "admin", "admin", now}, out);
    Seal(out);
  }
  TESSERA_RETURN_IF_ERROR(Publish(std::move(out)));
  Wake();
  return Status::Ok();
}

Status Controller::DeclareNodeLost(const std::string& name, const std::string& reason) {
  if (!healthy()) {
    return UnavailableError("the state store failed; the controller accepts no changes");
  }
  Pending out;
  {
    MutexLock lock(mu_);
    auto it = nodes_.all().find(name);
    if (it == nodes_.all().end()) {
      return NotFoundError("no node '" + name + "'");
    }
    if (!it->second.up) {
      return FailedPreconditionError("node '" + name + "' is down already");
    }
    NodeDown(it->second, reason, clock_->NowMicros(), out);
    Seal(out);
  }
  TESSERA_RETURN_IF_ERROR(Publish(std::move(out)));
  Wake();
  return Status::Ok();
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
