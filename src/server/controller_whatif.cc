// The cluster's recorded history for what-if replays (sim/whatif.h): the node
// inventory's changes, kept under "history/nodes/<name>/<time>", and GET
// /v1/admin/history (jobs with their attempts, nodes, policy, queues), read from the
// store so that archived jobs are included.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <utility>

#include "server/controller.h"

namespace tessera {
namespace {

constexpr const char* kNodeHistoryPrefix = "history/nodes/";

// Keys sort by node, then time: the time is zero-padded.
std::string NodeHistoryKey(const std::string& name, Micros at) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%020lld", static_cast<long long>(at));
  return kNodeHistoryPrefix + name + "/" + buf;
}

}  // namespace

Status Controller::LoadNodeHistory() {
  TESSERA_ASSIGN_OR_RETURN(auto records, store_->ListKv(kNodeHistoryPrefix));
  node_history_.clear();
  for (const auto& [key, text] : records) {  // by node, then time: the last one stays
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) {
      std::cerr << "tessera server: node history record " << key << " is malformed; ignored\n";
      continue;
    }
    const std::string name = j["name"].get<std::string>();
    if (j.value("event", "") == "leave" || !j.contains("inventory")) {
      node_history_[name] = std::nullopt;
      continue;
    }
    StatusOr<NodeInventory> inv = NodeInventoryFromJson(j["inventory"], *catalog_);
    if (inv.ok()) {
      node_history_[name] = std::move(inv->spec);
    }
  }
  return Status::Ok();
}

void Controller::RecordNodeJoin(const NodeInventory& inventory, Micros now, Pending& out) {
  const std::string& name = inventory.spec.name;
  auto it = node_history_.find(name);
  if (it != node_history_.end() && it->second && *it->second == inventory.spec) {
    return;  // only changes are recorded
  }
  node_history_[name] = inventory.spec;
  out.batch.kv.emplace_back(NodeHistoryKey(name, now),
                            nlohmann::json{{"name", name},
                                           {"at_us", now},
                                           {"event", "join"},
                                           {"inventory", ToJson(inventory, *catalog_)}}
                                .dump());
}

void Controller::RecordNodeLeave(const std::string& name, Micros now, Pending& out) {
  node_history_[name] = std::nullopt;
  out.batch.kv.emplace_back(
      NodeHistoryKey(name, now),
      nlohmann::json{{"name", name}, {"at_us", now}, {"event", "leave"}}.dump());
}

StatusOr<nlohmann::json> Controller::History(Micros since, Micros until, uint64_t after,
                                             int64_t limit) {
  if (until <= since) {
    return InvalidArgumentError("until: the window [since, until) is empty");
  }
  if (limit < 1 || limit > 10'000) {
    return InvalidArgumentError("limit: must be 1..10000 (got " + std::to_string(limit) + ")");
  }
  nlohmann::json page;
  page["since_us"] = since;
  page["until_us"] = until;
  {
    MutexLock lock(mu_);
    const SchedulerOptions& o = core_.policy().options;
    page["policy"] = {{"name", core_.policy().name},
                      {"placement", options_.placement},
                      {"seed", options_.seed},
                      {"restart_overhead_us", o.restart_overhead},
                      {"checkpoint_wait_us", o.checkpoint_wait},
                      {"min_run_before_reclaim_us", o.min_run_before_reclaim},
                      {"victim_hold_us", o.victim_hold},
                      {"grace_us", o.grace}};
    page["queues_yaml"] = core_.queues_yaml();
  }
  // The store is thread-safe and holds every durable row, archived jobs included.
  TESSERA_ASSIGN_OR_RETURN(auto records, store_->ListKv(kNodeHistoryPrefix));
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& [key, text] : records) {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_object() && j.contains("at_us") && j["at_us"].is_number_integer() &&
        j["at_us"].get<Micros>() < until) {
      nodes.push_back(std::move(j));
    }
  }
  page["nodes"] = std::move(nodes);

  // One page read from the store (a row more tells whether another page follows), and
  // the usage of its jobs only: a page costs the page, not the history.
  const size_t page_size = static_cast<size_t>(limit);
  TESSERA_ASSIGN_OR_RETURN(std::vector<JobRow> rows,
                           store_->LoadJobsPage(after, since, until, page_size + 1));
  uint64_t next_after = 0;
  if (rows.size() > page_size) {
    rows.resize(page_size);
    next_after = rows.back().id;
  }
  std::map<uint64_t, nlohmann::json> runs;
  if (!rows.empty()) {  // by id
    TESSERA_ASSIGN_OR_RETURN(std::vector<UsageRow> usage,
                             store_->LoadUsageOfJobs(rows.front().id, rows.back().id));
    for (const UsageRow& u : usage) {  // by job, then start
      // The runs that have ended, within the window's reach.
      if (u.end_us == 0 || u.end_us <= since) {
        continue;
      }
      runs[u.job].push_back(
          {{"start_us", u.start_us}, {"end_us", u.end_us}, {"gpu_milli", u.gpu_milli}});
    }
  }
  nlohmann::json jobs = nlohmann::json::array();
  for (const JobRow& row : rows) {
    nlohmann::json spec = nlohmann::json::parse(row.spec_json.str(), nullptr, false);
    if (spec.is_discarded()) {
      continue;  // not a submission this controller wrote
    }
    auto r = runs.find(row.id);
    jobs.push_back({{"id", row.id},
                    {"name", row.name},
                    {"tenant", row.tenant},
                    {"queue", row.queue},
                    {"state", row.state},
                    {"submit_us", row.submit_us},
                    {"start_us", row.start_us},
                    {"end_us", row.end_us},
                    {"attempts", row.attempts},
                    {"preemptions", row.preemptions},
                    {"exit_code", row.exit_code},
                    {"progress_us", row.progress_us},
                    {"spec", std::move(spec)},
                    {"runs", r != runs.end() ? r->second : nlohmann::json::array()}});
  }
  page["jobs"] = std::move(jobs);
  page["next_after"] = next_after > 0 ? nlohmann::json(next_after) : nlohmann::json(nullptr);
  return page;
}

}  // namespace tessera
