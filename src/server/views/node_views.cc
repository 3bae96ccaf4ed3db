// The nodes' JSON (views/node_views.h).
#include "server/views/node_views.h"

#include "base/time_format.h"
#include "server/job_rows.h"
#include "server/modules/gpu_health.h"

namespace tessera {
namespace {

using job_rows::TimeOrNull;

// The grants on one GPU as `viewer` may see them; adds up the GPU's used milli.
nlohmann::json HoldersJson(const std::vector<GpuHold>& here, const GpuModel& model,
                           const GpuTelemetry* sample, const Principal* viewer,
                           int64_t& milli) {
  nlohmann::json hs = nlohmann::json::array();
  for (const GpuHold& x : here) {
    const GpuGrant& grant = *x.grant;
    milli += grant.milli.value();
    nlohmann::json profile = nullptr;
    std::string mig_uuid;
    if (grant.is_mig()) {
      profile = model.mig_profiles[static_cast<size_t>(grant.mig_profile)].name;
      for (size_t i = 0; sample != nullptr && i < sample->mig.size(); ++i) {
        if (sample->mig[i].start == grant.mig_start) {
          mig_uuid = sample->mig[i].uuid;
        }
      }
    }
    // Another tenant's job: who holds the GPU (for capacity planning), not what.
    const bool hidden = viewer != nullptr && viewer->role != Role::kAdmin &&
                        !(viewer->role == Role::kTenant && viewer->tenant == x.row->tenant);
    hs.push_back({{"job", hidden ? nlohmann::json(nullptr) : nlohmann::json(x.job.value())},
                  {"job_name", hidden ? "(another tenant's job)" : x.row->name},
                  {"tenant", x.row->tenant},
                  {"queue", x.row->queue},
                  {"milli", grant.milli.value()},
                  {"memory_mib", grant.memory.value()},
                  {"mig_profile", std::move(profile)},
                  {"mig_start", grant.is_mig() ? nlohmann::json(grant.mig_start)
                                               : nlohmann::json(nullptr)},
                  {"mig_uuid", mig_uuid}});
  }
  return hs;
}

nlohmann::json TelemetryJson(const GpuTelemetry& sample, Micros at) {
  nlohmann::json mig = nlohmann::json::array();
  for (const MigTelemetry& m : sample.mig) {
    mig.push_back({{"uuid", m.uuid}, {"profile", m.profile}, {"start", m.start},
                   {"gi_id", m.gi_id}, {"fb_used_mib", m.fb_used_mib},
                   {"fb_free_mib", m.fb_free_mib}});
  }
  return {{"util_pct", sample.util_pct},
          {"fb_used_mib", sample.fb_used_mib},
          {"fb_free_mib", sample.fb_free_mib},
          {"temp_c", sample.temp_c},
          {"power_w", static_cast<double>(sample.power_mw) / 1000.0},
          {"sm_clock_mhz", sample.sm_clock_mhz},
          {"last_xid", sample.last_xid},
          {"xid_count", sample.xid_count},
          {"ecc_sbe_volatile", sample.ecc_sbe_volatile},
          {"ecc_dbe_volatile", sample.ecc_dbe_volatile},
          {"lost", sample.lost},
          {"at", TimeOrNull(at)},
          {"mig", std::move(mig)}};
}

nlohmann::json GpusJson(const NodeViewInputs& in, const std::string& name, const NodeInfo& node,
                        const Principal* viewer) {
  const NodeSpec& spec = node.inventory.spec;
  nlohmann::json gpus = nlohmann::json::array();
  for (size_t g = 0; g < spec.gpus.size(); ++g) {
    const GpuModel& model = in.catalog.Get(spec.gpus[g].model);
    const GpuTelemetry* sample = g < node.telemetry.size() ? &node.telemetry[g] : nullptr;
    int64_t milli = 0;
    nlohmann::json hs = nlohmann::json::array();
    if (auto h = in.holds.find({name, static_cast<int>(g)}); h != in.holds.end()) {
      hs = HoldersJson(h->second, model, sample, viewer, milli);
    }
    auto drain = node.gpu_drains.find(static_cast<int>(g));
    const bool drained = drain != node.gpu_drains.end();
    const bool lost = (sample != nullptr && sample->lost) ||
                      (drained && drain->second.kind == HealthKindName(HealthKind::kLost));
    gpus.push_back({{"index", g},
                    {"uuid", g < node.inventory.gpu_uuids.size() ? node.inventory.gpu_uuids[g] : ""},
                    {"model", model.name},
                    {"memory_mib", model.memory.value()},
                    {"mode", SharingModeName(spec.gpus[g].mode)},
                    {"replicas", spec.gpus[g].replicas},  // timeslice only; else 0
                    {"used_milli", milli},
                    {"health", lost ? "lost" : drained ? "drained" : "ok"},
                    {"drain", drained ? DrainJson(drain->second) : DrainJson(std::nullopt)},
                    {"holders", std::move(hs)},
                    {"telemetry", sample != nullptr && node.up
                                      ? TelemetryJson(*sample, node.telemetry_at)
                                      : nlohmann::json(nullptr)}});
  }
  return gpus;
}

}  // namespace

nlohmann::json DrainJson(const std::optional<DrainInfo>& drain) {
  if (!drain) {
    return nullptr;
  }
  return {{"reason", drain->reason},
          {"by", drain->by},
          {"kind", drain->kind},
          {"since", FormatRfc3339(drain->since)}};
}

nlohmann::json NodesJson(const NodeViewInputs& in, const std::string& only,
                         const Principal* viewer) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [name, node] : in.nodes) {
    if (!only.empty() && name != only) {
      continue;
    }
    const NodeSpec& spec = node.inventory.spec;
    auto u = in.used.find(name);
    nlohmann::json labels = nlohmann::json::object();
    for (const auto& [k, v] : spec.labels) {
      labels[k] = v;
    }
    auto held = in.module_holds.find(name);
    const std::string hold = held != in.module_holds.end() ? held->second : "";
    out.push_back({{"name", name},
                   {"labels", std::move(labels)},
                   {"state", node.up ? "up" : "down"},
                   {"reason", node.reason.empty() ? hold : node.reason},
                   {"schedulable", node.up && !node.drain.has_value() && hold.empty()},
                   {"drain", DrainJson(node.drain)},
                   {"address", node.address},
                   {"last_heartbeat", TimeOrNull(node.last_seen)},
                   {"cpu_milli", spec.cpu.value()},
                   {"cpu_used_milli", u != in.used.end() ? u->second.first : 0},
                   {"memory_mib", spec.memory.value()},
                   {"memory_used_mib", u != in.used.end() ? u->second.second : 0},
                   {"gpus", GpusJson(in, name, node, viewer)}});
  }
  return out;
}

NodeUse NodeUseOf(const JobTable& jobs, const std::string& only) {
  NodeUse use;
  for (const auto& [id, job] : jobs.all()) {
    const JobRecord& rec = jobs.Rec(job);
    if (!InAttempt(rec.phase)) {
      continue;
    }
    for (size_t t = 0; t < rec.allocations.size() && t < job.tasks.size(); ++t) {
      if (jobs.TaskExited(job, t) || (!only.empty() && job.tasks[t].node != only)) {
        continue;
      }
      const Allocation& a = rec.allocations[t];
      for (const GpuGrant& g : a.gpus) {
        use.holds[{job.tasks[t].node, g.gpu}].push_back(GpuHold{id, &job.row, &g});
      }
      auto& u = use.used[job.tasks[t].node];
      u.first += a.cpu.value();
      u.second += a.memory.value();
    }
  }
  return use;
}

std::map<std::string, std::string> ModuleHoldsOf(
    const std::map<std::string, NodeInfo>& nodes, const std::string& only,
    const std::function<std::string(const std::string&)>& hold) {
  std::map<std::string, std::string> held;
  for (const auto& [name, node] : nodes) {
    if (!only.empty() && name != only) {
      continue;
    }
    if (std::string why = hold(name); !why.empty()) {
      held.emplace(name, std::move(why));
    }
  }
  return held;
}

}  // namespace tessera
