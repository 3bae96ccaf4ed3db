#include "server/job_history.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "base/time_format.h"
#include "server/job_attempts.h"

namespace tessera {
namespace {

constexpr int64_t kMinTime = std::numeric_limits<int64_t>::min();
constexpr int64_t kMaxTime = std::numeric_limits<int64_t>::max();
constexpr std::string_view kFinished[] = {"succeeded", "failed", "cancelled"};

bool Finished(std::string_view state) {
  return std::find(std::begin(kFinished), std::end(kFinished), state) != std::end(kFinished);
}

nlohmann::json TimeOrNull(Micros t) {
  return t > 0 ? nlohmann::json(FormatRfc3339(t)) : nlohmann::json(nullptr);
}

// The cursor before the first job submitted at or after `since`: ids grow with
// submission time, so bisect on "the next job after this id was submitted earlier".
StatusOr<uint64_t> CursorBefore(Store& store, Micros since) {
  auto next_before = [&](uint64_t after) -> StatusOr<bool> {
    TESSERA_ASSIGN_OR_RETURN(std::vector<JobRow> next,
                             store.LoadJobsPage(after, kMinTime, kMaxTime, 1));
    return !next.empty() && next[0].submit_us < since;
  };
  TESSERA_ASSIGN_OR_RETURN(std::vector<JobRow> first, store.LoadJobsPage(0, kMinTime, kMaxTime, 1));
  if (first.empty() || first[0].submit_us >= since) {
    return uint64_t{0};
  }
  uint64_t lo = first[0].id - 1;    // next_before(lo) holds
  uint64_t hi = uint64_t{1} << 62;  // beyond any id: nothing after it
  while (hi - lo > 1) {
    const uint64_t mid = lo + (hi - lo) / 2;
    TESSERA_ASSIGN_OR_RETURN(bool before, next_before(mid));
    (before ? lo : hi) = mid;
  }
  return hi;  // the job at `hi`, if any, was submitted before `since`
}

}  // namespace

std::string UserOfSpec(const std::string& spec_json) {
  if (spec_json.find("\"user\"") == std::string::npos) {
    return "";
  }
  const nlohmann::json spec = nlohmann::json::parse(spec_json, nullptr, false);
  if (!spec.is_object()) {
    return "";
  }
  auto it = spec.find("user");
  return it != spec.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Status CheckHistoryQuery(const HistoryQuery& query) {
  for (const std::string& state : query.states) {
    if (!Finished(state)) {
      return InvalidArgumentError(
          "state: history holds finished jobs (succeeded, failed, "
          "cancelled), got '" +
          state + "'");
    }
  }
  if (query.until <= query.since) {
    return InvalidArgumentError("until must be after since");
  }
  if (query.limit == 0) {
    return InvalidArgumentError("limit: must be at least 1");
  }
  return Status::Ok();
}

nlohmann::json HistoryEntry(const JobRow& row) {
  const nlohmann::json stored = StoredAttempts(row.placement_json);
  nlohmann::json attempts = nlohmann::json::array();
  nlohmann::json nodes = nlohmann::json::array();
  int64_t gpus = 0, gpu_milli = 0;
  for (const nlohmann::json& a : stored) {
    nlohmann::json tasks = nlohmann::json::array();
    gpus = 0;
    gpu_milli = 0;
    for (const nlohmann::json& t : a.value("tasks", nlohmann::json::array())) {
      const std::string node = t.value("node", "");
      if (!node.empty() && std::find(nodes.begin(), nodes.end(), node) == nodes.end()) {
        nodes.push_back(node);
      }
      nlohmann::json indices = nlohmann::json::array();
      for (const nlohmann::json& g : t.value("gpus", nlohmann::json::array())) {
        indices.push_back(g.value("index", -1));
        gpu_milli += g.value("milli", int64_t{1000});
        ++gpus;
      }
      tasks.push_back({{"node", node}, {"gpus", std::move(indices)}});
    }
    const Micros start = a.value("start", Micros{0});
    const Micros end = a.value("end", Micros{0});
    attempts.push_back({{"attempt", a.value("attempt", 0)},
                        {"start_time", TimeOrNull(start)},
                        {"end_time", TimeOrNull(end)},
                        {"ended", a.value("ended", "")},
                        {"exit_code", a.value("exit_code", 0)},
                        {"tasks", std::move(tasks)}});
  }
  return {{"id", row.id},
          {"name", row.name},
          {"tenant", row.tenant},
          {"user", UserOfSpec(row.spec_json)},
          {"queue", row.queue},
          {"state", row.state},
          {"exit_code",
           row.state == "cancelled" ? nlohmann::json(nullptr) : nlohmann::json(row.exit_code)},
          {"submit_time", TimeOrNull(row.submit_us)},
          {"start_time", TimeOrNull(row.start_us)},
          {"end_time", TimeOrNull(row.end_us)},
          {"elapsed_seconds", StoredRunSeconds(stored)},
          {"gpus", gpus},
          {"gpu_milli", gpu_milli},
          {"nodes", std::move(nodes)},
          {"attempts", std::move(attempts)}};
}

StatusOr<HistoryPage> ReadHistory(Store& store, const HistoryQuery& query, size_t max_scan) {
  TESSERA_RETURN_IF_ERROR(CheckHistoryQuery(query));
  HistoryPage page;
  uint64_t after = query.after;
  if (after == 0) {
    TESSERA_ASSIGN_OR_RETURN(after, CursorBefore(store, query.since));
  }
  // Unfiltered by the store, so that the scan is bounded by max_scan rows.
  TESSERA_ASSIGN_OR_RETURN(
      std::vector<JobRow> rows,
      store.LoadJobsPage(after, kMinTime, kMaxTime, std::max<size_t>(max_scan, 1)));
  for (const JobRow& row : rows) {
    if (row.submit_us >= query.until) {
      return page;  // later ids were submitted later still
    }
    const bool wanted = Finished(row.state) && row.submit_us >= query.since &&
                        (query.tenant.empty() || row.tenant == query.tenant) &&
                        (query.states.empty() || std::find(query.states.begin(), query.states.end(),
                                                           row.state) != query.states.end()) &&
                        (query.user.empty() || UserOfSpec(row.spec_json) == query.user);
    if (!wanted) {
      continue;
    }
    if (page.jobs.size() == query.limit) {
      page.next = page.jobs.back()["id"].get<uint64_t>();
      return page;
    }
    page.jobs.push_back(HistoryEntry(row));
  }
  if (rows.size() >= std::max<size_t>(max_scan, 1)) {
    page.next = rows.back().id;  // scanned its share: go on from here
  }
  return page;
}

StatusOr<std::map<uint64_t, JobOwner>> LoadJobOwners(Store& store, const std::set<uint64_t>& ids) {
  std::map<uint64_t, JobOwner> out;
  if (ids.empty()) {
    return out;
  }
  constexpr size_t kChunk = 1000;
  uint64_t after = *ids.begin() - 1;
  const uint64_t last = *ids.rbegin();
  while (after < last) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<JobRow> rows,
                             store.LoadJobsPage(after, kMinTime, kMaxTime, kChunk));
    if (rows.empty()) {
      break;
    }
    for (const JobRow& row : rows) {
      if (ids.count(row.id) > 0) {
        out[row.id] = JobOwner{row.tenant, UserOfSpec(row.spec_json)};
      }
    }
    after = rows.back().id;
  }
  return out;
}

}  // namespace tessera
