#include "model/gpu_catalog.h"

#include <algorithm>
#include <cctype>

#include "base/strings.h"

namespace tessera {
namespace {

// NVIDIA's placement table (`nvidia-smi mig -lgipp`), the same on A100, H100 and H200:
//   1g (1 slot)   {0..6}:1      1g (2 slots) {0,2,4,6}:2    2g {0,2,4}:2
//   3g            {0,4}:4       4g           {0}:4          7g {0}:8
// Memory per instance is what `nvidia-smi mig -lgip` reports, in MiB (GiB x 1024).
struct MigSizes {
  const char* one_g;      // 1g, one memory slot
  const char* one_g_two;  // 1g, two memory slots
  const char* two_g;
  const char* three_g;
  const char* four_g;
  const char* seven_g;
  int64_t mib_one, mib_two, mib_four, mib_eight;
  int64_t mib_two_g;  // 2g usually equals the 2-slot 1g; kept apart for clarity
};

std::vector<MigProfile> MigTable(const MigSizes& s) {
  std::string one_g = s.one_g;
  return {
      {one_g, 1, 1, MiB(s.mib_one), 7, {0, 1, 2, 3, 4, 5, 6}, false},
      {one_g + "+me", 1, 1, MiB(s.mib_one), 1, {0, 1, 2, 3, 4, 5, 6}, true},
      {s.one_g_two, 1, 2, MiB(s.mib_two), 4, {0, 2, 4, 6}, false},
      {s.two_g, 2, 2, MiB(s.mib_two_g), 3, {0, 2, 4}, false},
      {s.three_g, 3, 4, MiB(s.mib_four), 2, {0, 4}, false},
      {s.four_g, 4, 4, MiB(s.mib_four), 1, {0}, false},
      {s.seven_g, 7, 8, MiB(s.mib_eight), 1, {0}, false},
  };
}

GpuModel Model(std::string name, int64_t memory_mib, std::vector<std::string> aliases,
               std::vector<MigProfile> mig = {}) {
  GpuModel m;
  m.name = std::move(name);
  m.memory = MiB(memory_mib);
  m.aliases = std::move(aliases);
  m.mig_profiles = std::move(mig);
  return m;
}

}  // namespace

std::optional<int> GpuModel::FindMigProfile(std::string_view profile_name) const {
  for (size_t i = 0; i < mig_profiles.size(); ++i) {
    if (mig_profiles[i].name == profile_name) {
      return static_cast<int>(i);
    }
  }
  return std::nullopt;
}

const GpuCatalog& GpuCatalog::Default() {
  // Memory is the total NVML reports with current drivers. The anonymised Alibaba
  // models G2 and G3 do not disclose memory (0); V100M16/V100M32 are V100s by name.
  static const GpuCatalog* catalog = new GpuCatalog({
      Model("A100-40GB", 40960, {"A100-SXM4-40GB", "A100-PCIE-40GB", "A100"},
            MigTable({"1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb", 4864, 9856,
                      19968, 40192, 9856})),
      Model("A100-80GB", 81920, {"A100-SXM4-80GB", "A100-PCIE-80GB", "A100-80GB-PCIe"},
            MigTable({"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", 9728, 19968,
                      40192, 80896, 19968})),
      Model("H100-80GB", 81559, {"H100", "H100-SXM5-80GB", "H100-PCIE-80GB", "H100-80GB-HBM3"},
            MigTable({"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", 9984, 20096,
                      40448, 81152, 20096})),
      Model("H200-141GB", 143771, {"H200", "H200-SXM5-141GB", "H200-NVL"},
            MigTable({"1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb", 16384,
                      33024, 71168, 143104, 33024})),
      Model("L40S", 46068, {"L40S-48GB"}),
      Model("A10", 23028, {"A10-24GB"}),
      Model("T4", 15360, {"T4-16GB", "Tesla-T4"}),
      Model("V100-16GB", 16384, {"V100", "V100-SXM2-16GB", "V100-PCIE-16GB"}),
      Model("V100-32GB", 32768, {"V100-SXM2-32GB", "V100-PCIE-32GB"}),
      Model("P100", 16384, {"P100-16GB", "Tesla-P100"}),
      Model("G2", 0, {}),
      Model("G3", 0, {}),
      Model("V100M16", 16384, {}),
      Model("V100M32", 32768, {}),
  });
  return *catalog;
}

GpuCatalog::GpuCatalog(std::vector<GpuModel> models) : models_(std::move(models)) {
  for (size_t i = 0; i < models_.size(); ++i) {
    models_[i].id = GpuModelId(static_cast<uint16_t>(i));
  }
}

StatusOr<GpuModelId> GpuCatalog::Find(std::string_view name) const {
  std::string want = AsciiLower(Trim(name));
  for (const GpuModel& m : models_) {
    if (AsciiLower(m.name) == want) {
      return m.id;
    }
    for (const std::string& alias : m.aliases) {
      if (AsciiLower(alias) == want) {
        return m.id;
      }
    }
  }
  std::vector<std::string> names;
  names.reserve(models_.size());
  for (const GpuModel& m : models_) {
    names.push_back(m.name);
  }
  return InvalidArgumentError("unknown GPU model '" + std::string(name) +
                              "'; known models: " + Join(names, ", "));
}

StatusOr<GpuModelSet> GpuCatalog::ParseModelSet(std::string_view spec) const {
  GpuModelSet set;
  if (Trim(spec).empty()) {
    return set;
  }
  for (std::string_view part : Split(spec, '|')) {
    if (Trim(part).empty()) {
      continue;
    }
    TESSERA_ASSIGN_OR_RETURN(GpuModelId id, Find(part));
    set.Add(id);
  }
  return set;
}

}  // namespace tessera
