#include "agent/fake_gpus.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "base/strings.h"

namespace tessera {
namespace {

constexpr int kMaxFakeGpus = 64;

struct Group {
  std::string item;  // as written, for error messages
  int repeat = 1;    // N
  int gpus = 1;      // G
  GpuModelId model;
  std::optional<SharingMode> mode;
};

Status BadItem(std::string_view item, std::string_view why) {
  return InvalidArgumentError("fake GPU spec item '" + std::string(item) + "': " +
                              std::string(why));
}

// Reads leading decimal digits of `text` into `value`; returns how many were read.
size_t ReadCount(std::string_view text, int64_t* value) {
  size_t n = 0;
  while (n < text.size() && std::isdigit(static_cast<unsigned char>(text[n])) != 0) {
    ++n;
  }
  if (n == 0 || n > 6) {
    return 0;
  }
  *value = ParseInt64(text.substr(0, n)).value();
  return n;
}

bool IsTimes(char c) { return c == 'x' || c == 'X'; }

StatusOr<Group> ParseGroup(std::string_view item, const GpuCatalog& catalog) {
  constexpr std::string_view kGrammar = "expected [N x] G x MODEL[:exclusive|mig|shared]";
  Group group;
  group.item = std::string(item);
  std::string_view head = item;
  size_t colon = item.find(':');
  if (colon != std::string_view::npos) {
    head = Trim(item.substr(0, colon));
    std::string_view mode_name = Trim(item.substr(colon + 1));
    auto mode = ParseSharingMode(mode_name);
    if (!mode.ok()) {
      return BadItem(item, mode.status().message());
    }
    group.mode = *mode;
  }
  // "N x G x MODEL" or "G x MODEL", spaces allowed around the x.
  int64_t first = 0;
  size_t n = ReadCount(head, &first);
  if (n == 0) {
    return BadItem(item, kGrammar);
  }
  std::string_view rest = Trim(head.substr(n));
  if (rest.empty() || !IsTimes(rest.front())) {
    return BadItem(item, kGrammar);
  }
  rest = Trim(rest.substr(1));
  int64_t second = 0;
  size_t m = ReadCount(rest, &second);
  if (m > 0 && Trim(rest.substr(m)).size() > 0 && IsTimes(Trim(rest.substr(m)).front())) {
    group.repeat = static_cast<int>(first);
    group.gpus = static_cast<int>(second);
    rest = Trim(Trim(rest.substr(m)).substr(1));
  } else {
    group.gpus = static_cast<int>(first);
  }
  if (group.repeat < 1 || group.gpus < 1) {
    return BadItem(item, "counts must be at least 1");
  }
  if (rest.empty()) {
    return BadItem(item, "missing GPU model");
  }
  auto model = catalog.Find(rest);
  if (!model.ok()) {
    return BadItem(item, model.status().message());
  }
  group.model = *model;
  return group;
}

struct ParsedSpec {
  std::vector<Group> groups;
  std::vector<GpuSpec> gpus;
};

StatusOr<ParsedSpec> Parse(std::string_view spec, const GpuCatalog& catalog) {
  ParsedSpec out;
  std::string_view text = Trim(spec);
  if (text.empty() || text == "none") {
    return out;
  }
  std::optional<SharingMode> default_mode;
  std::string default_item;
  int64_t total = 0;
  for (std::string_view raw : Split(text, ',')) {
    std::string_view item = Trim(raw);
    if (item.empty()) {
      return InvalidArgumentError("fake GPU spec '" + std::string(spec) + "' has an empty item");
    }
    if (item == "mig" || item == "shared" || item == "exclusive") {
      SharingMode mode = ParseSharingMode(item).value();
      if (default_mode && *default_mode != mode) {
        return BadItem(item, "conflicts with the earlier mode item '" + default_item + "'");
      }
      default_mode = mode;
      default_item = std::string(item);
      continue;
    }
    TESSERA_ASSIGN_OR_RETURN(Group group, ParseGroup(item, catalog));
    total += int64_t{group.repeat} * group.gpus;
    if (total > kMaxFakeGpus) {
      return BadItem(item, "more than " + std::to_string(kMaxFakeGpus) + " GPUs in all");
    }
    out.groups.push_back(std::move(group));
  }
  int numa = 0;
  int domain = 0;
  for (Group& group : out.groups) {
    if (!group.mode) {
      group.mode = default_mode.value_or(SharingMode::kExclusive);
    }
    const GpuModel& model = catalog.Get(group.model);
    if (*group.mode == SharingMode::kMig && !model.mig_capable()) {
      return BadItem(group.item, "GPU model " + model.name + " has no MIG");
    }
    for (int r = 0; r < group.repeat; ++r) {
      int group_domain = group.gpus > 1 ? domain++ : -1;
      for (int g = 0; g < group.gpus; ++g) {
        GpuSpec gpu;
        gpu.model = group.model;
        gpu.mode = *group.mode;
        gpu.numa_node = numa;
        gpu.nvlink_domain = group_domain;
        out.gpus.push_back(gpu);
      }
      ++numa;
    }
  }
  return out;
}

std::string Canonical(const std::vector<Group>& groups, const GpuCatalog& catalog) {
  if (groups.empty()) {
    return "no GPUs";
  }
  std::vector<std::string> items;
  for (const Group& g : groups) {
    std::string item;
    if (g.repeat > 1) {
      item += std::to_string(g.repeat) + "x";
    }
    item += std::to_string(g.gpus) + "x" + catalog.Get(g.model).name;
    if (g.mode && *g.mode != SharingMode::kExclusive) {
      item += ":" + std::string(SharingModeName(*g.mode));
    }
    items.push_back(std::move(item));
  }
  return Join(items, ",");
}

uint64_t Fnv1a(std::string_view text, uint64_t seed) {
  uint64_t h = 14695981039346656037ULL ^ seed;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  // Final avalanche (splitmix64) so that seeds differing in one character differ everywhere.
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h;
}

class FakeGpuBackend : public GpuBackend {
 public:
  FakeGpuBackend(const GpuCatalog& catalog, std::string node_name, ParsedSpec parsed)
      : catalog_(catalog), node_name_(std::move(node_name)) {
    description_ = "fake: " + Canonical(parsed.groups, catalog_);
    for (size_t i = 0; i < parsed.gpus.size(); ++i) {
      Gpu gpu;
      gpu.spec = parsed.gpus[i];
      gpu.uuid = FakeUuid("GPU-", "GPU-fake-" + node_name_ + "-" + std::to_string(i));
      gpus_.push_back(std::move(gpu));
    }
  }

  std::string Describe() const override { return description_; }

  StatusOr<std::vector<DiscoveredGpu>> Discover() override {
    std::vector<DiscoveredGpu> out;
    for (size_t i = 0; i < gpus_.size(); ++i) {
      const Gpu& gpu = gpus_[i];
      const GpuModel& model = catalog_.Get(gpu.spec.model);
      DiscoveredGpu d;
      d.index = static_cast<int>(i);
      d.uuid = gpu.uuid;
      d.product_name = FakeProductName(model);
      d.model = gpu.spec.model;
      d.mode = gpu.spec.mode;
      d.numa_node = gpu.spec.numa_node;
      d.nvlink_domain = gpu.spec.nvlink_domain;
      d.memory_mib = model.memory.value();
      d.mig_enabled = gpu.spec.mode == SharingMode::kMig;
      d.mig_instances = gpu.instances;
      out.push_back(std::move(d));
    }
    return out;
  }

  StatusOr<MigInstanceInfo> CreateMigInstance(int gpu_index, std::string_view profile,
                                              int start) override {
    TESSERA_ASSIGN_OR_RETURN(Gpu * gpu, GetGpu(gpu_index));
    const GpuModel& model = catalog_.Get(gpu->spec.model);
    if (gpu->spec.mode != SharingMode::kMig) {
      return FailedPreconditionError("GPU " + std::to_string(gpu_index) + " (" + model.name +
                                     ") is not in MIG mode (mode " +
                                     std::string(SharingModeName(gpu->spec.mode)) + ")");
    }
    std::vector<MigSlotUse> uses;
    for (const MigInstanceInfo& inst : gpu->instances) {
      const MigProfile& p =
          model.mig_profiles[static_cast<size_t>(*model.FindMigProfile(inst.profile))];
      uses.push_back({inst.start, p.memory_slots, p.compute_slices, p.name});
    }
    TESSERA_RETURN_IF_ERROR(CheckMigPlacement(model, profile, start, uses));
    MigInstanceInfo info;
    info.uuid = FakeUuid("MIG-", "MIG-fake-" + node_name_ + "-" + std::to_string(gpu_index) +
                                     "-" + std::to_string(next_instance_++));
    info.profile = std::string(profile);
    info.start = start;
    gpu->instances.push_back(info);
    std::sort(gpu->instances.begin(), gpu->instances.end(),
              [](const MigInstanceInfo& a, const MigInstanceInfo& b) { return a.start < b.start; });
    return info;
  }

  Status DestroyMigInstance(int gpu_index, std::string_view uuid) override {
    TESSERA_ASSIGN_OR_RETURN(Gpu * gpu, GetGpu(gpu_index));
    auto it = std::find_if(gpu->instances.begin(), gpu->instances.end(),
                           [&](const MigInstanceInfo& i) { return i.uuid == uuid; });
    if (it == gpu->instances.end()) {
      return NotFoundError("GPU " + std::to_string(gpu_index) + " has no MIG instance '" +
                           std::string(uuid) + "'");
    }
    gpu->instances.erase(it);
    return Status::Ok();
  }

 private:
  struct Gpu {
    GpuSpec spec;
    std::string uuid;
    std::vector<MigInstanceInfo> instances;  // ascending start
  };

  StatusOr<Gpu*> GetGpu(int index) {
    if (index < 0 || static_cast<size_t>(index) >= gpus_.size()) {
      return InvalidArgumentError("no GPU " + std::to_string(index) + "; the node has " +
                                  std::to_string(gpus_.size()));
    }
    return &gpus_[static_cast<size_t>(index)];
  }

  const GpuCatalog& catalog_;
  std::string node_name_;
  std::string description_;
  std::vector<Gpu> gpus_;
  uint64_t next_instance_ = 0;
};

}  // namespace

std::string FakeUuid(std::string_view prefix, std::string_view seed) {
  uint64_t a = Fnv1a(seed, 0);
  uint64_t b = Fnv1a(seed, 0x9e3779b97f4a7c15ULL);
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%08x-%04x-%04x-%04x-%012llx",
                static_cast<unsigned>(a >> 32), static_cast<unsigned>((a >> 16) & 0xffff),
                static_cast<unsigned>(a & 0xffff), static_cast<unsigned>(b >> 48),
                static_cast<unsigned long long>(b & 0xffffffffffffULL));
  return std::string(prefix) + buf;
}

std::string FakeProductName(const GpuModel& model) {
  static constexpr std::pair<std::string_view, std::string_view> kNames[] = {
      {"A100-40GB", "NVIDIA A100-SXM4-40GB"},
      {"A100-80GB", "NVIDIA A100-SXM4-80GB"},
      {"H100-80GB", "NVIDIA H100 80GB HBM3"},
      {"H200-141GB", "NVIDIA H200"},
      {"L40S", "NVIDIA L40S"},
      {"A10", "NVIDIA A10"},
      {"T4", "Tesla T4"},
      {"V100-16GB", "Tesla V100-SXM2-16GB"},
      {"V100-32GB", "Tesla V100-SXM2-32GB"},
      {"P100", "Tesla P100-PCIE-16GB"},
  };
  for (const auto& [name, product] : kNames) {
    if (model.name == name) {
      return std::string(product);
    }
  }
  return "NVIDIA " + model.name;
}

StatusOr<std::vector<GpuSpec>> ParseFakeGpuSpec(std::string_view spec,
                                                const GpuCatalog& catalog) {
  TESSERA_ASSIGN_OR_RETURN(ParsedSpec parsed, Parse(spec, catalog));
  return std::move(parsed.gpus);
}

StatusOr<std::unique_ptr<GpuBackend>> MakeFakeGpuBackend(std::string_view spec,
                                                         const GpuCatalog& catalog,
                                                         std::string_view node_name) {
  TESSERA_ASSIGN_OR_RETURN(ParsedSpec parsed, Parse(spec, catalog));
  return std::unique_ptr<GpuBackend>(
      std::make_unique<FakeGpuBackend>(catalog, std::string(node_name), std::move(parsed)));
}

}  // namespace tessera
