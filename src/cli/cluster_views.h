// What the cluster commands print, rendered from the controller's JSON: the job, node,
// GPU-map and queue tables and one job's details. Absent or mistyped fields render as
// "-" rather than failing (the CLI may be older or newer than the server).
// Thread safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/clock.h"

namespace tessera {

// A scalar as text: strings as they are, numbers as JSON writes them, null as "-".
std::string ScalarText(const nlohmann::json& v);
// succeeded, failed or cancelled.
bool IsTerminal(std::string_view state);

// GET /v1/jobs's jobs as `tessera jobs` prints them (`wide`: more columns).
std::string JobsTable(const nlohmann::json& jobs, bool wide, Micros now);
// GET /v1/jobs/{id} as `tessera show` prints it.
std::string JobDetails(const nlohmann::json& job, Micros now);
// GET /v1/nodes as `tessera nodes` and `tessera nodes --gpus` print it.
std::string NodesTable(const nlohmann::json& nodes, Micros now);
std::string GpuMap(const nlohmann::json& nodes);
// GET /v1/queues as `tessera queues` prints it.
std::string QueuesTable(const nlohmann::json& queues);
// GET /v1/usage as `tessera usage` prints it (`since`/`until`: the query's, for a body
// without them), with USED-GPU-HOURS and EFFICIENCY when the controller sends them;
// and as `--output csv`.
std::string UsageTable(const nlohmann::json& body, const std::string& by, const std::string& since,
                       const std::string& until);
std::string UsageCsv(const nlohmann::json& body, const std::string& by);

}  // namespace tessera
