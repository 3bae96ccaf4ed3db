#include "agent/gpu/gpu_probe.h"

#include <algorithm>
#include <thread>

namespace tessera {
namespace {

using Json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

double MillisSince(SteadyClock::time_point start) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
}

Json GpuEntry(const DiscoveredGpu& g, const GpuCatalog& catalog) {
  Json mig = Json::array();
  for (const MigInstanceInfo& m : g.mig_instances) {
    mig.push_back({{"uuid", m.uuid}, {"profile", m.profile}, {"start", m.start}});
  }
  return {{"index", g.index},
          {"uuid", g.uuid},
          {"product", g.product_name},
          {"model", g.model.valid() ? catalog.Get(g.model).name : ""},
          {"memory_mib", g.memory_mib},
          {"mig_enabled", g.mig_enabled},
          {"numa_node", g.numa_node},
          {"nvlink_domain", g.nvlink_domain},
          {"fabric_domain", g.fabric_domain},
          {"cpus", g.cpus.size()},
          {"mig_instances", std::move(mig)}};
}

// The smallest catalog profile (fewest memory slots, no media extensions) with a legal
// start next to what the GPU already holds; nullopt when none fits.
std::optional<std::pair<const MigProfile*, int>> FreeSmallestSlot(const GpuModel& model,
                                                                 const DiscoveredGpu& g) {
  std::vector<MigSlotUse> uses;
  for (const MigInstanceInfo& m : g.mig_instances) {
    std::optional<int> p = model.FindMigProfile(m.profile);
    if (!p) {
      continue;  // CheckMigPlacement cannot weigh an unknown profile; the driver will
    }
    const MigProfile& prof = model.mig_profiles[*p];
    uses.push_back({m.start, prof.memory_slots, prof.compute_slices, prof.name});
  }
  std::vector<const MigProfile*> profiles;
  for (const MigProfile& p : model.mig_profiles) {
    if (!p.media_extensions) {
      profiles.push_back(&p);
    }
  }
  std::sort(profiles.begin(), profiles.end(), [](const MigProfile* a, const MigProfile* b) {
    return a->memory_slots != b->memory_slots ? a->memory_slots < b->memory_slots
                                              : a->compute_slices < b->compute_slices;
  });
  for (const MigProfile* p : profiles) {
    for (int start : p->starts) {
      if (CheckMigPlacement(model, p->name, start, uses).ok()) {
        return std::make_pair(p, start);
      }
    }
  }
  return std::nullopt;
}

bool Holds(const std::vector<DiscoveredGpu>& gpus, int index, const std::string& uuid) {
  for (const DiscoveredGpu& g : gpus) {
    if (g.index == index) {
      return std::any_of(g.mig_instances.begin(), g.mig_instances.end(),
                         [&](const MigInstanceInfo& m) { return m.uuid == uuid; });
    }
  }
  return false;
}

// Creates, sees, destroys and misses one instance on GPU `g`.
Json CheckMig(GpuBackend& backend, const GpuCatalog& catalog, const DiscoveredGpu& g, bool* ok) {
  Json r = {{"gpu", g.index}};
  if (!g.mig_enabled) {
    r["skipped"] = "not in MIG mode (the probe never changes a GPU's mode)";
    return r;
  }
  if (!g.model.valid() || !catalog.Get(g.model).mig_capable()) {
    r["skipped"] = "the catalog has no MIG profiles for this product";
    return r;
  }
  auto slot = FreeSmallestSlot(catalog.Get(g.model), g);
  if (!slot) {
    r["skipped"] = "no free slot for any profile (the GPU's instances are in use)";
    return r;
  }
  r["profile"] = slot->first->name;
  r["start"] = slot->second;
  const auto t0 = SteadyClock::now();
  StatusOr<MigInstanceInfo> made = backend.CreateMigInstance(g.index, slot->first->name, slot->second);
  r["create_ms"] = MillisSince(t0);
  r["created"] = made.ok();
  if (!made.ok()) {
    r["error"] = made.status().ToString();
    *ok = false;
    return r;
  }
  r["uuid"] = made->uuid;
  StatusOr<std::vector<DiscoveredGpu>> after = backend.Discover();
  r["visible"] = after.ok() && Holds(*after, g.index, made->uuid);
  const auto t1 = SteadyClock::now();
  Status destroyed = backend.DestroyMigInstance(g.index, made->uuid);
  r["destroy_ms"] = MillisSince(t1);
  r["destroyed"] = destroyed.ok();
  if (!destroyed.ok()) {
    r["error"] = destroyed.ToString();
  }
  StatusOr<std::vector<DiscoveredGpu>> later = backend.Discover();
  r["gone"] = later.ok() && !Holds(*later, g.index, made->uuid);
  if (!r["visible"].get<bool>() || !destroyed.ok() || !r["gone"].get<bool>()) {
    *ok = false;
  }
  return r;
}

}  // namespace

StatusOr<Json> RunGpuProbe(GpuBackend& backend, const GpuCatalog& catalog,
                           const GpuProbeOptions& options) {
  if (options.samples < 1) {
    return InvalidArgumentError("samples: must be at least 1");
  }
  auto sleep = options.sleep ? options.sleep
                             : [](std::chrono::milliseconds d) { std::this_thread::sleep_for(d); };
  TESSERA_ASSIGN_OR_RETURN(std::vector<DiscoveredGpu> gpus, backend.Discover());
  bool ok = true;
  Json report = {{"backend", backend.Describe()}, {"gpus", Json::array()}};
  for (const DiscoveredGpu& g : gpus) {
    report["gpus"].push_back(GpuEntry(g, catalog));
  }
  Json samples = Json::array();
  for (int s = 0; s < options.samples; ++s) {
    if (s > 0) {
      sleep(options.interval);
    }
    StatusOr<std::vector<GpuTelemetry>> t = backend.ReadTelemetry();
    if (!t.ok()) {
      ok = false;
      samples.push_back({{"error", t.status().ToString()}});
      continue;
    }
    Json one = Json::array();
    for (const GpuTelemetry& g : *t) {
      one.push_back(ToJson(g));
    }
    samples.push_back(std::move(one));
  }
  report["samples"] = std::move(samples);
  Json mig = Json::array();
  if (options.mig_check) {
    for (const DiscoveredGpu& g : gpus) {
      if (!options.mig_gpus.empty() &&
          std::find(options.mig_gpus.begin(), options.mig_gpus.end(), g.index) == options.mig_gpus.end()) {
        continue;
      }
      mig.push_back(CheckMig(backend, catalog, g, &ok));
    }
  }
  report["mig_check"] = std::move(mig);
  report["ok"] = ok && !gpus.empty();
  return report;
}

}  // namespace tessera
