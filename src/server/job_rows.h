// How a job is written in its store row and shown: the placement as stored (nodes by
// name, each task's exit), terminal states, times, identities. Used by the controller
// and its views (views/). Thread safety: functions.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "base/time_format.h"
#include "state/node_ledger.h"

namespace tessera::job_rows {

inline constexpr const char* kQueuesKey = "queues.yaml";




inline nlohmann::json TimeOrNull(Micros t) {
  return t > 0 ? nlohmann::json(FormatRfc3339(t)) : nlohmann::json(nullptr);
}

// A task of the current attempt as stored with the placement: where it runs and, once
// it has exited, how; so that an exit the controller acknowledged before a crash is
// never taken for a task still to run.
struct StoredTask {
  std::string node;
  bool exited = false;
  int exit_code = 0;
  int signal = 0;
};

// Placement as stored: one allocation per task, nodes by name (NodeIds change when
// the node set does), the tasks' exits, and what happens once a stopping job's tasks
// have all exited ("requeue", "cancel", "fail"; "" while it runs).
inline nlohmann::json PlacementJson(const std::vector<Allocation>& allocations,
                             const std::vector<StoredTask>& tasks, Micros run_start,
                             const std::string& after) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < allocations.size(); ++i) {
    const Allocation& a = allocations[i];
    nlohmann::json gpus = nlohmann::json::array();
    for (const GpuGrant& g : a.gpus) {
      gpus.push_back({{"gpu", g.gpu},
                      {"milli", g.milli.value()},
                      {"memory", g.memory.value()},
                      {"mig_profile", g.mig_profile},
                      {"mig_start", g.mig_start}});
    }
    const StoredTask& t = tasks[i];
    out.push_back({{"node", t.node},
                   {"cpu", a.cpu.value()},
                   {"memory", a.memory.value()},
                   {"gpus", std::move(gpus)},
                   {"exited", t.exited},
                   {"exit_code", t.exit_code},
                   {"signal", t.signal}});
  }
  return {{"run_start", run_start}, {"tasks", std::move(out)}, {"after", after}};
}

// The inverse of PlacementJson; node ids are left invalid (bound at attach time).
inline Status ParsePlacement(const std::string& text, std::vector<Allocation>* allocations,
                      std::vector<StoredTask>* tasks, Micros* run_start, std::string* after) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return InternalError("stored placement is not a JSON object");
  }
  try {
    *run_start = j.at("run_start").get<Micros>();
    for (const nlohmann::json& t : j.at("tasks")) {
      Allocation a;
      a.cpu = MilliCpu(t.at("cpu").get<int64_t>());
      a.memory = MiB(t.at("memory").get<int64_t>());
      for (const nlohmann::json& g : t.at("gpus")) {
        GpuGrant grant;
        grant.gpu = g.at("gpu").get<int>();
        grant.milli = MilliGpu(g.at("milli").get<int64_t>());
        grant.memory = MiB(g.at("memory").get<int64_t>());
        grant.mig_profile = g.at("mig_profile").get<int>();
        grant.mig_start = g.at("mig_start").get<int>();
        a.gpus.push_back(grant);
      }
      allocations->push_back(std::move(a));
      StoredTask st;
      st.node = t.at("node").get<std::string>();
      st.exited = t.value("exited", false);
      st.exit_code = t.value("exit_code", 0);
      st.signal = t.value("signal", 0);
      tasks->push_back(std::move(st));
    }
    *after = j.value("after", "");
  } catch (const nlohmann::json::exception& e) {
    return InternalError(std::string("stored placement: ") + e.what());
  }
  return Status::Ok();
}

inline std::string QueueKey(const std::string& tenant, const std::string& key) {
  return tenant + '\x1f' + key;
}

inline nlohmann::json RunAsJson(const std::optional<std::pair<int64_t, int64_t>>& id) {
  if (!id) {
    return nullptr;
  }
  return {{"uid", id->first}, {"gid", id->second}};
}

}  // namespace tessera::job_rows
