#include "agent/gpu/gpu_backend.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>

#include "base/strings.h"

namespace tessera {
namespace {

std::string Upper(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return out;
}

bool StartsWithNoCase(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && Upper(text.substr(0, prefix.size())) == Upper(prefix);
}

// "NVIDIA H100 80GB HBM3" -> "H100-80GB-HBM3"; "Tesla V100-SXM2-16GB" -> "V100-SXM2-16GB".
std::string NormalizeProductName(std::string_view name) {
  std::string_view rest = Trim(name);
  bool stripped = true;
  while (stripped) {
    stripped = false;
    for (std::string_view vendor : {"NVIDIA ", "Tesla ", "GeForce ", "Quadro "}) {
      if (StartsWithNoCase(rest, vendor)) {
        rest = Trim(rest.substr(vendor.size()));
        stripped = true;
      }
    }
  }
  std::string out;
  for (char c : rest) {
    bool sep = c == ' ' || c == '_' || c == '-';
    if (sep) {
      if (!out.empty() && out.back() != '-') {
        out.push_back('-');
      }
    } else {
      out.push_back(c);
    }
  }
  while (!out.empty() && out.back() == '-') {
    out.pop_back();
  }
  return out;
}

std::string_view Family(std::string_view name) { return name.substr(0, name.find('-')); }

bool SameFamily(const GpuModel& model, std::string_view family) {
  if (Upper(Family(model.name)) == family) {
    return true;
  }
  return std::any_of(model.aliases.begin(), model.aliases.end(),
                     [&](const std::string& a) { return Upper(Family(a)) == family; });
}

// A "80GB" or "141GB" token of a normalised name, in MiB.
std::optional<int64_t> MemoryFromName(std::string_view normalized) {
  for (std::string_view token : Split(normalized, '-')) {
    std::string t = Upper(token);
    if (t.size() > 2 && EndsWith(t, "GB")) {
      auto gb = ParseInt64(std::string_view(t).substr(0, t.size() - 2));
      if (gb.ok() && *gb > 0 && *gb < 10'000) {
        return *gb * 1024;
      }
    }
  }
  return std::nullopt;
}

bool MemoryAgrees(int64_t model_mib, int64_t mib) {
  if (model_mib <= 0 || mib <= 0) {
    return true;
  }
  return std::llabs(model_mib - mib) * 100 <= model_mib * 8;
}

}  // namespace

std::string NodeFabricDomain(const std::vector<DiscoveredGpu>& gpus) {
  std::string domain;
  for (const DiscoveredGpu& g : gpus) {
    if (g.fabric_domain.empty()) {
      continue;
    }
    if (!domain.empty() && domain != g.fabric_domain) {
      return "";
    }
    domain = g.fabric_domain;
  }
  return domain;
}

StatusOr<GpuModelId> MatchCatalogModel(std::string_view product_name, int64_t memory_mib,
                                       const GpuCatalog& catalog) {
  const std::string normalized = NormalizeProductName(product_name);
  const std::string what =
      "no catalog model matches GPU '" + std::string(product_name) + "' with " +
      (memory_mib > 0 ? std::to_string(memory_mib) + " MiB" : std::string("unknown memory"));
  if (normalized.empty()) {
    return NotFoundError(what);
  }
  int64_t mib = memory_mib;
  if (mib <= 0) {
    mib = MemoryFromName(normalized).value_or(0);
  }
  auto direct = catalog.Find(normalized);
  if (direct.ok() && MemoryAgrees(catalog.Get(*direct).memory.value(), mib)) {
    return *direct;
  }
  const std::string family = Upper(Family(normalized));
  std::vector<const GpuModel*> members;
  for (const GpuModel& m : catalog.models()) {
    if (SameFamily(m, family)) {
      members.push_back(&m);
    }
  }
  if (mib <= 0) {
    // No memory to tell family members apart: only a family of one decides.
    if (members.size() == 1) {
      return members.front()->id;
    }
    return NotFoundError(what);
  }
  const GpuModel* best = nullptr;
  for (const GpuModel* m : members) {
    int64_t model_mib = m->memory.value();
    if (model_mib <= 0 || !MemoryAgrees(model_mib, mib)) {
      continue;
    }
    if (best == nullptr ||
        std::llabs(model_mib - mib) < std::llabs(best->memory.value() - mib)) {
      best = m;
    }
  }
  if (best == nullptr) {
    return NotFoundError(what);
  }
  return best->id;
}

Status CheckMigPlacement(const GpuModel& model, std::string_view profile_name, int start,
                         const std::vector<MigSlotUse>& existing) {
  std::optional<int> index = model.FindMigProfile(profile_name);
  if (!index) {
    std::vector<std::string> names;
    for (const MigProfile& p : model.mig_profiles) {
      names.push_back(p.name);
    }
    return InvalidArgumentError(
        "GPU model " + model.name + " has no MIG profile '" + std::string(profile_name) + "'" +
        (names.empty() ? std::string(" (it has no MIG)") : "; profiles: " + Join(names, ", ")));
  }
  const MigProfile& profile = model.mig_profiles[static_cast<size_t>(*index)];
  if (std::find(profile.starts.begin(), profile.starts.end(), start) == profile.starts.end()) {
    std::vector<std::string> starts;
    for (int s : profile.starts) {
      starts.push_back(std::to_string(s));
    }
    return InvalidArgumentError("MIG profile " + profile.name + " cannot start at slot " +
                                std::to_string(start) + "; legal starts: " + Join(starts, ","));
  }
  int end = start + profile.memory_slots;
  int compute = profile.compute_slices;
  int same = 0;
  for (const MigSlotUse& use : existing) {
    int use_end = use.start + use.memory_slots;
    if (start < use_end && use.start < end) {
      return FailedPreconditionError(
          "MIG profile " + profile.name + " at slot " + std::to_string(start) +
          " overlaps the instance " + (use.profile.empty() ? std::string("") : use.profile + " ") +
          "at slots " + std::to_string(use.start) + ".." + std::to_string(use_end - 1));
    }
    compute += use.compute_slices;
    if (use.profile == profile.name) {
      ++same;
    }
  }
  if (compute > kMigComputeSlices) {
    return FailedPreconditionError("MIG profile " + profile.name + " needs " +
                                   std::to_string(profile.compute_slices) +
                                   " compute slices; only " +
                                   std::to_string(kMigComputeSlices + profile.compute_slices -
                                                  compute) +
                                   " are free");
  }
  if (same >= profile.max_instances) {
    return FailedPreconditionError("at most " + std::to_string(profile.max_instances) +
                                   " instances of MIG profile " + profile.name +
                                   " fit on one GPU");
  }
  return Status::Ok();
}

}  // namespace tessera
