#include "server/job_attempts.h"

#include <utility>

#include "base/time_format.h"

namespace tessera {

nlohmann::json StoredAttempts(const std::string& placement_json) {
  // Most jobs have run once or not at all: no parse for them.
  if (placement_json.find("\"attempts\"") == std::string::npos) {
    return nlohmann::json::array();
  }
  nlohmann::json j = nlohmann::json::parse(placement_json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return nlohmann::json::array();
  }
  auto it = j.find("attempts");
  if (it == j.end() || !it->is_array()) {
    return nlohmann::json::array();
  }
  return std::move(*it);
}

std::string WithStoredAttempts(nlohmann::json placement, const std::string& old_placement_json) {
  nlohmann::json attempts = StoredAttempts(old_placement_json);
  if (!attempts.empty()) {
    placement["attempts"] = std::move(attempts);
  }
  // A job that holds nothing and never ran keeps the store's "no placement".
  return placement.empty() ? std::string() : placement.dump();
}

std::string AppendAttempt(const std::string& old_placement_json, nlohmann::json ended) {
  nlohmann::json attempts = StoredAttempts(old_placement_json);
  attempts.push_back(std::move(ended));
  if (attempts.size() > kMaxStoredAttempts) {
    attempts.erase(attempts.begin(), attempts.begin() + static_cast<std::ptrdiff_t>(
                                                            attempts.size() - kMaxStoredAttempts));
  }
  return nlohmann::json{{"attempts", std::move(attempts)}}.dump();
}

namespace {

double RunSeconds(const nlohmann::json& a) {
  const Micros start = a.value("start", Micros{0});
  const Micros end = a.value("end", Micros{0});
  return start > 0 && end > start ? static_cast<double>(end - start) / 1e6 : 0.0;
}

}  // namespace

nlohmann::json AttemptsView(const nlohmann::json& stored) {
  nlohmann::json out = nlohmann::json::array();
  for (const nlohmann::json& a : stored) {
    if (!a.is_object()) {
      continue;
    }
    const Micros start = a.value("start", Micros{0});
    const Micros end = a.value("end", Micros{0});
    out.push_back(
        {{"attempt", a.value("attempt", 0)},
         {"start_time", start > 0 ? nlohmann::json(FormatRfc3339(start)) : nlohmann::json()},
         {"end_time", end > 0 ? nlohmann::json(FormatRfc3339(end)) : nlohmann::json()},
         {"run_seconds", RunSeconds(a)},
         {"ended", a.value("ended", "")},
         {"exit_code", a.value("exit_code", 0)},
         {"signal", a.value("signal", 0)},
         // gpu-fault: which GPU and what it reported; the restarts counted so far.
         {"detail", a.value("detail", "")},
         {"restarts", a.value("restarts", 0)},
         {"tasks", a.value("tasks", nlohmann::json::array())}});
  }
  return out;
}

double StoredRunSeconds(const nlohmann::json& stored) {
  double total = 0;
  for (const nlohmann::json& a : stored) {
    if (a.is_object()) {
      total += RunSeconds(a);
    }
  }
  return total;
}

int StoredRestarts(const nlohmann::json& stored) {
  for (auto it = stored.rbegin(); it != stored.rend(); ++it) {
    if (it->is_object() && it->contains("restarts")) {
      return it->value("restarts", 0);
    }
  }
  return 0;
}

}  // namespace tessera
