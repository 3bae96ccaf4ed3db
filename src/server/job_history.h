// Job history (what Slurm's sacct gives): finished jobs read from the store, archived
// ones included, with who ran them (tenant and user) and where each attempt ran (nodes
// and GPU indices, from the attempts a job keeps in its placement: job_attempts.h).
// Also the owners (tenant, user) of jobs by id, for usage by user.
//
// A page reads at most `max_scan` store rows (by id, from the cursor on), so a request
// costs the same however selective its filters are; `next` says where to go on.
// Thread safety: functions; the Store is thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "server/modules/usage_report.h"
#include "store/store.h"

namespace tessera {

struct HistoryQuery {
  std::string tenant;  // "": any (a tenant token's own is forced by the route)
  std::string user;    // "": any
  std::vector<std::string>
      states;        // finished states (succeeded, failed, cancelled); empty: all three
  Micros since = 0;  // submitted in [since, until)
  Micros until = 0;
  uint64_t after = 0;  // the cursor: ids above it
  size_t limit = 100;  // jobs per page
};

struct HistoryPage {
  nlohmann::json jobs = nlohmann::json::array();  // by id, oldest first
  uint64_t next = 0;                              // the cursor of the next page; 0: none
};

// InvalidArgument for a state that is not a finished one, an empty window or limit 0.
Status CheckHistoryQuery(const HistoryQuery& query);

// One page of finished jobs matching `query`, reading at most `max_scan` rows. The first
// page (after == 0) starts at the first job submitted at or after `since` (found by
// bisecting ids, which grow with submission time), not at the oldest job.
StatusOr<HistoryPage> ReadHistory(Store& store, const HistoryQuery& query, size_t max_scan);

// A finished job's history entry: id, name, tenant, user, queue, state, exit_code,
// submit/start/end times (RFC 3339), elapsed_seconds (the attempts' run time), gpus and
// gpu_milli (of its last attempt), nodes (of every attempt, in order, each once) and
// attempts ([{attempt, start_time, end_time, ended, exit_code, tasks: [{node, gpus:
// [index...]}]}]).
nlohmann::json HistoryEntry(const JobRow& row);

// The user a stored spec names; "" when none.
std::string UserOfSpec(const std::string& spec_json);

// The tenant and user of each job of `ids` that the store holds.
StatusOr<std::map<uint64_t, JobOwner>> LoadJobOwners(Store& store, const std::set<uint64_t>& ids);

}  // namespace tessera
