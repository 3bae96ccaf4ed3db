#include "cli/job_actions.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "api/job_relations.h"
#include "cli/json_read.h"

namespace tessera {

using json = nlohmann::json;
using json_read::Field;
using json_read::Str;

int RunJobAction(const ClientConfig& config, const std::string& action,
                 const std::vector<std::string>& jobs, std::ostream& out, std::ostream& err) {
  if (jobs.empty()) {
    return ReportError(InvalidArgumentError("name at least one job to " + action), err);
  }
  for (const std::string& j : jobs) {
    if (!ParseJobRef(j).ok()) {
      return ReportError(InvalidArgumentError("expected a job id (a positive integer, or "
                                              "ARRAY_INDEX for an array's element), got '" +
                                              j + "'"),
                         err);
    }
  }
  StatusOr<std::unique_ptr<ApiClient>> client = ApiClient::Create(config);
  if (!client.ok()) {
    return ReportError(client.status(), err);
  }
  const std::string done = action == "hold" ? "held" : action == "release" ? "released" : "requeued";
  int exit_code = 0;
  for (const std::string& j : jobs) {
    const std::string path = "/v1/jobs/" + j + "/" + action;
    StatusOr<ApiResponse> response = (*client)->Post(path, "", "application/json");
    StatusOr<json> body = response.ok() ? ParseJsonBody(response->body, "POST " + path)
                                        : StatusOr<json>(response.status());
    if (!body.ok()) {
      const int code = ReportError(body.status(), err);
      exit_code = exit_code == 0 ? code : exit_code;
      if (code == 5) {
        break;  // the controller is unreachable: the next ones would fail the same way
      }
      continue;
    }
    const json* ids = Field(*body, "jobs");
    const size_t n = ids != nullptr && ids->is_array() ? ids->size() : 0;
    if (j.find('_') == std::string::npos && n != 1) {
      out << "array " << j << ": " << n << " elements " << done << "\n";
    } else {
      out << "job " << j << " " << done << "\n";
    }
  }
  return exit_code;
}

json FoldArrays(const json& jobs) {
  json out = json::array();
  // Where each array's folded entry sits in `out`, by array id and reason.
  std::map<std::pair<uint64_t, std::string>, size_t> folded;
  std::map<size_t, std::vector<int64_t>> indices;  // per folded entry
  for (const json& job : jobs) {
    const json* array = Field(job, "array_job");
    if (array == nullptr || !array->is_number_unsigned()) {
      out.push_back(job);
      continue;
    }
    const uint64_t a = array->get<uint64_t>();
    const json* index = Field(job, "array_index");
    const int64_t i = index != nullptr && index->is_number_integer() ? index->get<int64_t>() : -1;
    json entry = job;
    entry["display_id"] = std::to_string(a) + "_" + std::to_string(i);
    if (Str(job, "state") != "pending") {
      out.push_back(std::move(entry));
      continue;
    }
    const auto key = std::make_pair(a, Str(job, "reason"));
    auto it = folded.find(key);
    if (it == folded.end()) {
      folded.emplace(key, out.size());
      indices[out.size()].push_back(i);
      out.push_back(std::move(entry));
      continue;
    }
    indices[it->second].push_back(i);
  }
  for (auto& [at, list] : indices) {
    if (list.size() < 2) {
      continue;
    }
    ArraySpec spec;
    spec.indices = list;
    std::sort(spec.indices.begin(), spec.indices.end());
    json& entry = out[at];
    std::string text = ArraySpecText(spec);
    // The array's throttle, as squeue shows it.
    if (StatusOr<ArraySpec> whole = ParseArraySpec(Str(entry, "array")); whole.ok() && whole->throttle > 0) {
      text += "%" + std::to_string(whole->throttle);
    }
    entry["display_id"] = std::to_string(entry["array_job"].get<uint64_t>()) + "_[" + text + "]";
    entry["array_pending"] = list.size();
  }
  return out;
}

}  // namespace tessera
