// GET /v1/admin/history, the cluster's recorded history for what-if replays
// (sim/whatif.h): jobs with their attempts, the node inventory's changes (recorded by
// modules/node_history.h), policy and queues, read from the store so that archived jobs
// are included.
#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "server/controller.h"

namespace tessera {

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
  TESSERA_ASSIGN_OR_RETURN(page["nodes"], NodeHistory::Records(*store_, until));

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
