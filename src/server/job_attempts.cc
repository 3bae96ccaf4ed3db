#include "server/job_attempts.h"

#include <utility>

#include "base/time_format.h"
#include "model/gpu_catalog.h"
#include "server/job_table.h"
#include "server/node_registry.h"

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

nlohmann::json StoredEndedAttempt(const LiveJob& job, const EndedAttempt& ended, Micros now,
                                  const NodeRegistry& nodes, const GpuCatalog& catalog) {
  int exit_code = 0;
  int signal = 0;
  nlohmann::json tasks = nlohmann::json::array();
  for (size_t t = 0; t < job.tasks.size(); ++t) {
    const TaskRun& run = job.tasks[t];
    const TaskOutcome outcome = t < ended.tasks.size() ? ended.tasks[t] : TaskOutcome{};
    if (exit_code == 0 && signal == 0) {
      exit_code = outcome.exit_code;
      signal = outcome.signal;
    }
    nlohmann::json gpus = nlohmann::json::array();
    auto found = nodes.all().find(run.node);
    const NodeInfo* node = found == nodes.all().end() ? nullptr : &found->second;
    if (t < ended.allocations.size()) {
      for (const GpuGrant& g : ended.allocations[t].gpus) {
        nlohmann::json gpu = {
            {"index", g.gpu}, {"milli", g.milli.value()}, {"mig_profile", nullptr}};
        const size_t gi = static_cast<size_t>(g.gpu);
        if (node != nullptr && gi < node->inventory.spec.gpus.size()) {
          const GpuModel& model = catalog.Get(node->inventory.spec.gpus[gi].model);
          gpu["model"] = model.name;
          if (g.is_mig()) {
            gpu["mig_profile"] = model.mig_profiles[static_cast<size_t>(g.mig_profile)].name;
          }
        }
        if (node != nullptr && gi < node->inventory.gpu_uuids.size()) {
          gpu["uuid"] = node->inventory.gpu_uuids[gi];
        }
        gpus.push_back(std::move(gpu));
      }
    }
    tasks.push_back({{"node", run.node},
                     {"exit_code", outcome.exit_code},
                     {"signal", outcome.signal},
                     {"gpus", std::move(gpus)}});
  }
  nlohmann::json out = {{"attempt", job.row.attempts}, {"start", ended.run_start},
                        {"end", now},                  {"ended", std::string(ended.as)},
                        {"exit_code", exit_code},      {"signal", signal},
                        {"tasks", std::move(tasks)}};
  if (ended.as == "failed" && job.row.reason.find(" failed to start: ") != std::string::npos) {
    out["detail"] = job.row.reason;  // no exit code says it: the launch failed
  }
  if (ended.requeued) {
    // The restart its policy counted so far and its backoff: the core's record of them,
    // put back at Open (RestoreRestarts).
    out["restarts"] = ended.restarts;
    if (ended.restart_at > 0) {
      out["restart_at"] = ended.restart_at;
    }
  }
  return out;
}

}  // namespace tessera
