// The cluster's recorded history for what-if replays (cluster_history.h).
#include "server/cluster_history.h"

#include <map>
#include <utility>
#include <vector>

#include "server/modules/node_history.h"

namespace tessera {
namespace {

// Each job's ended runs within the window's reach, by job id.
StatusOr<std::map<uint64_t, nlohmann::json>> EndedRuns(Store& store,
                                                       const std::vector<JobRow>& rows,
                                                       Micros since) {
  std::map<uint64_t, nlohmann::json> runs;
  if (rows.empty()) {
    return runs;
  }
  TESSERA_ASSIGN_OR_RETURN(std::vector<UsageRow> usage,
                           store.LoadUsageOfJobs(rows.front().id, rows.back().id));
  for (const UsageRow& u : usage) {  // by job, then start
    if (u.end_us == 0 || u.end_us <= since) {
      continue;
    }
    runs[u.job].push_back(
        {{"start_us", u.start_us}, {"end_us", u.end_us}, {"gpu_milli", u.gpu_milli}});
  }
  return runs;
}

}  // namespace

StatusOr<nlohmann::json> ClusterHistoryPage(Store& store, const HistoryPolicy& policy,
                                            Micros since, Micros until, uint64_t after,
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
  page["policy"] = policy.policy;
  page["queues_yaml"] = policy.queues_yaml;
  TESSERA_ASSIGN_OR_RETURN(page["nodes"], NodeHistory::Records(store, until));
  // One page read from the store (a row more tells whether another page follows), and
  // the usage of its jobs only: a page costs the page, not the history.
  const size_t page_size = static_cast<size_t>(limit);
  TESSERA_ASSIGN_OR_RETURN(std::vector<JobRow> rows,
                           store.LoadJobsPage(after, since, until, page_size + 1));
  uint64_t next_after = 0;
  if (rows.size() > page_size) {
    rows.resize(page_size);
    next_after = rows.back().id;
  }
  TESSERA_ASSIGN_OR_RETURN(auto runs, EndedRuns(store, rows, since));
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
