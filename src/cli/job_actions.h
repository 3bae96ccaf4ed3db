// `tessera hold|release|requeue JOB...` (POST /v1/jobs/{id}/hold|release|requeue) and
// how `tessera jobs` shows job arrays (squeue's way: one row for an array's pending
// elements, "12_[3-999%50]"; its running elements one row each, "12_2").
// Thread safety: pure functions, but for the requests each Run makes.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "cli/api_client.h"

namespace tessera {

// `action` is "hold", "release" or "requeue"; `jobs` as users name them ("12", "12_3";
// an array's id acts on every element). Exit codes as the other cluster commands.
int RunJobAction(const ClientConfig& config, const std::string& action,
                 const std::vector<std::string>& jobs, std::ostream& out, std::ostream& err);

// The listing with each array element's "display_id" ("12_3") and the pending elements
// of one array that wait for the same reason folded into one entry ("12_[3-7,9]",
// "array_pending": their count). Jobs outside arrays are passed on unchanged; the order
// is kept (the folded entry stands where its first element stood).
nlohmann::json FoldArrays(const nlohmann::json& jobs);

}  // namespace tessera
