#include "agent/gpu/fake_gpus.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <string>

#include "api/json_fields.h"
#include "base/strings.h"

namespace tessera {
namespace {

constexpr int kMaxFakeGpus = 64;

struct Group {
  std::string item;  // as written, for error messages
  int repeat = 1;    // N
  int gpus = 1;      // G
  GpuModelId model;
  std::optional<GpuSharing> mode;
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
  constexpr std::string_view kGrammar =
      "expected [N x] G x MODEL[:exclusive|mig|shared|timeslice=N]";
  Group group;
  group.item = std::string(item);
  std::string_view head = item;
  size_t colon = item.find(':');
  if (colon != std::string_view::npos) {
    head = Trim(item.substr(0, colon));
    std::string_view mode_name = Trim(item.substr(colon + 1));
    auto mode = ParseGpuSharing(mode_name);
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
  std::optional<GpuSharing> default_mode;
  std::string default_item;
  int64_t total = 0;
  for (std::string_view raw : Split(text, ',')) {
    std::string_view item = Trim(raw);
    if (item.empty()) {
      return InvalidArgumentError("fake GPU spec '" + std::string(spec) + "' has an empty item");
    }
    if (item == "mig" || item == "shared" || item == "exclusive" ||
        item.starts_with("timeslice")) {
      StatusOr<GpuSharing> parsed = ParseGpuSharing(item);
      if (!parsed.ok()) {
        return BadItem(item, parsed.status().message());
      }
      const GpuSharing mode = *parsed;
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
      group.mode = default_mode.value_or(GpuSharing{});
    }
    const GpuModel& model = catalog.Get(group.model);
    if (group.mode->mode == SharingMode::kMig && !model.mig_capable()) {
      return BadItem(group.item, "GPU model " + model.name + " has no MIG");
    }
    for (int r = 0; r < group.repeat; ++r) {
      int group_domain = group.gpus > 1 ? domain++ : -1;
      for (int g = 0; g < group.gpus; ++g) {
        GpuSpec gpu;
        gpu.model = group.model;
        gpu.mode = group.mode->mode;
        gpu.replicas = group.mode->replicas;
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
    if (g.mode && g.mode->mode != SharingMode::kExclusive) {
      item += ":" + GpuSharingText(*g.mode);
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

// Board power and boost SM clock of the catalogued models the fake makes readings for.
struct ModelPower {
  int64_t board_mw;
  int boost_mhz;
};

ModelPower PowerOf(const GpuModel& model) {
  static constexpr std::pair<std::string_view, ModelPower> kPower[] = {
      {"A100-40GB", {400'000, 1410}}, {"A100-80GB", {400'000, 1410}},
      {"H100-80GB", {700'000, 1980}}, {"H200-141GB", {700'000, 1980}},
      {"L40S", {350'000, 2520}},      {"A10", {150'000, 1695}},
      {"T4", {70'000, 1590}},         {"V100-16GB", {300'000, 1530}},
      {"V100-32GB", {300'000, 1530}}, {"P100", {250'000, 1480}},
  };
  for (const auto& [name, power] : kPower) {
    if (model.name == name) {
      return power;
    }
  }
  return {300'000, 1500};
}

constexpr int kIdleTempC = 30;
constexpr int kIdleSmClockMhz = 210;
constexpr int64_t kIdlePowerPct = 15;
constexpr int64_t kUncappedMemoryPct = 80;  // of its part of the card, for a load without a cap

class FakeGpuBackend : public GpuBackend {
 public:
  FakeGpuBackend(const GpuCatalog& catalog, std::string node_name, ParsedSpec parsed,
                 FakeGpuOptions options)
      : catalog_(catalog), node_name_(std::move(node_name)), options_(std::move(options)) {
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
      d.minor = static_cast<int>(i);
      d.uuid = gpu.uuid;
      d.product_name = FakeProductName(model);
      d.model = gpu.spec.model;
      d.mode = gpu.spec.mode;
      d.replicas = gpu.spec.replicas;
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
    int gi_id = 1;
    while (std::any_of(gpu->gi_ids.begin(), gpu->gi_ids.end(),
                       [&](const auto& kv) { return kv.second == gi_id; })) {
      ++gi_id;
    }
    gpu->gi_ids[info.uuid] = gi_id;
    info.gpu_instance = gi_id;
    info.compute_instance = 0;  // one compute instance per GPU instance, as NVML's first
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
    gpu->gi_ids.erase(it->uuid);
    gpu->instances.erase(it);
    return Status::Ok();
  }

  StatusOr<std::vector<GpuTelemetry>> ReadTelemetry() override {
    TESSERA_RETURN_IF_ERROR(ReadFaults());
    ++samples_;
    std::vector<GpuTelemetry> out;
    out.reserve(gpus_.size());
    for (size_t i = 0; i < gpus_.size(); ++i) {
      out.push_back(Sample(static_cast<int>(i)));
    }
    return out;
  }

  void SetTaskLoad(std::string_view task_id, std::vector<GpuLoad> load) override {
    if (load.empty()) {
      loads_.erase(std::string(task_id));
    } else {
      loads_[std::string(task_id)] = std::move(load);
    }
  }

 private:
  struct Gpu {
    GpuSpec spec;
    std::string uuid;
    std::vector<MigInstanceInfo> instances;  // ascending start
    std::map<std::string, int> gi_ids;       // by instance UUID
    // Injected faults.
    int64_t xid_count = 0;
    int last_xid = 0;
    int64_t ecc_sbe = 0;
    int64_t ecc_dbe = 0;
    std::optional<int> temp_override;
    std::optional<int> util_override;  // a job made to look idle (or busy)
    bool lost = false;
  };

  // Every load the agent reported on GPU `index` and, for a MIG instance, `mig_uuid`.
  std::vector<GpuLoad> LoadsOn(int index, std::string_view mig_uuid) const {
    std::vector<GpuLoad> out;
    for (const auto& [task, loads] : loads_) {
      for (const GpuLoad& l : loads) {
        if (l.gpu == index && l.mig_uuid == mig_uuid) {
          out.push_back(l);
        }
      }
    }
    return out;
  }

  GpuTelemetry Sample(int index) const {
    const Gpu& gpu = gpus_[static_cast<size_t>(index)];
    const GpuModel& model = catalog_.Get(gpu.spec.model);
    GpuTelemetry t;
    t.index = index;
    t.uuid = gpu.uuid;
    t.xid_count = gpu.xid_count;
    t.last_xid = gpu.last_xid;
    if (gpu.lost) {
      t.lost = true;
      return t;
    }
    t.ecc_sbe_volatile = t.ecc_sbe_aggregate = gpu.ecc_sbe;
    t.ecc_dbe_volatile = t.ecc_dbe_aggregate = gpu.ecc_dbe;
    const int64_t total = model.memory.value();
    int64_t share = 0;  // busy milli
    int64_t used = 0;
    if (gpu.spec.mode == SharingMode::kMig) {
      for (const MigInstanceInfo& inst : gpu.instances) {
        MigTelemetry m;
        m.uuid = inst.uuid;
        m.profile = inst.profile;
        m.start = inst.start;
        auto id = gpu.gi_ids.find(inst.uuid);
        m.gi_id = id != gpu.gi_ids.end() ? id->second : -1;
        std::optional<int> p = model.FindMigProfile(inst.profile);
        const MigProfile* profile = p ? &model.mig_profiles[static_cast<size_t>(*p)] : nullptr;
        const int64_t memory = profile != nullptr ? profile->memory.value() : 0;
        const std::vector<GpuLoad> loads = LoadsOn(index, inst.uuid);
        int64_t inst_used = 0;
        for (const GpuLoad& l : loads) {
          inst_used += l.memory_mib > 0 ? l.memory_mib : memory * kUncappedMemoryPct / 100;
        }
        inst_used = std::min(inst_used, memory);
        m.fb_used_mib = inst_used;
        m.fb_free_mib = memory - inst_used;
        if (!loads.empty() && profile != nullptr) {
          share += profile->ChargedMilli().value();
        }
        used += inst_used;
        t.mig.push_back(std::move(m));
      }
    } else {
      for (const GpuLoad& l : LoadsOn(index, "")) {
        const int64_t milli = std::clamp<int64_t>(l.milli, 1, kMilliPerGpu);
        share += milli;
        used += l.memory_mib > 0 ? l.memory_mib
                                 : total * milli / kMilliPerGpu * kUncappedMemoryPct / 100;
      }
    }
    share = std::min<int64_t>(share, kMilliPerGpu);
    used = std::min(used, total);
    t.fb_used_mib = used;
    t.fb_free_mib = total - used;
    const ModelPower power = PowerOf(model);
    const int64_t idle_mw = power.board_mw * kIdlePowerPct / 100;
    t.temp_c = kIdleTempC + index % 4;
    t.power_mw = idle_mw;
    t.sm_clock_mhz = kIdleSmClockMhz;
    if (share > 0) {
      const std::string seed =
          node_name_ + "/" + std::to_string(index) + "/" + std::to_string(samples_);
      const int64_t jitter = 60 + static_cast<int64_t>(Fnv1a(seed, options_.seed) % 41);
      t.util_pct = static_cast<int>(std::max<int64_t>(1, jitter * share / kMilliPerGpu));
      t.temp_c += static_cast<int>(10 + 30 * share / kMilliPerGpu + (jitter - 60) / 10);
      t.power_mw = idle_mw + (power.board_mw - idle_mw) * share / kMilliPerGpu * jitter / 100;
      t.sm_clock_mhz = power.boost_mhz;
    }
    if (gpu.temp_override) {
      t.temp_c = *gpu.temp_override;
    }
    if (gpu.util_override) {
      t.util_pct = *gpu.util_override;
    }
    return t;
  }

  // Applies the lines appended to the fault file since the last call.
  Status ReadFaults() {
    if (options_.faults_path.empty()) {
      return Status::Ok();
    }
    const std::string& path = options_.faults_path;
    std::error_code ec;
    const std::filesystem::file_status st = std::filesystem::status(path, ec);
    if (st.type() == std::filesystem::file_type::not_found) {
      faults_offset_ = 0;  // a file made later is read from its start
      faults_line_ = 0;
      return Status::Ok();
    }
    if (st.type() != std::filesystem::file_type::regular) {
      return FailedPreconditionError("fake fault file '" + path + "' is not a regular file");
    }
    struct stat info = {};
    if (::stat(path.c_str(), &info) == 0 &&
        (info.st_dev != faults_dev_ || info.st_ino != faults_ino_)) {
      faults_dev_ = info.st_dev;  // another file moved into its place: read from its start
      faults_ino_ = info.st_ino;
      faults_offset_ = 0;
      faults_line_ = 0;
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      return FailedPreconditionError("cannot read fake fault file '" + path + "'");
    }
    in.seekg(0, std::ios::end);
    const std::streamoff size = in.tellg();
    if (size < 0) {
      return FailedPreconditionError("cannot read fake fault file '" + path + "'");
    }
    if (static_cast<uint64_t>(size) < faults_offset_) {
      faults_offset_ = 0;  // truncated or replaced: read it again
      faults_line_ = 0;
    }
    std::string chunk(static_cast<size_t>(static_cast<uint64_t>(size) - faults_offset_), '\0');
    in.seekg(static_cast<std::streamoff>(faults_offset_));
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    chunk.resize(static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
    size_t pos = 0;
    for (size_t nl = chunk.find('\n'); nl != std::string::npos; nl = chunk.find('\n', pos)) {
      ++faults_line_;
      Status applied = ApplyFault(std::string_view(chunk).substr(pos, nl - pos));
      if (!applied.ok()) {
        std::cerr << "tessera agent: fake fault file " << path << " line " << faults_line_
                  << " skipped: " << applied.message() << "\n";
      }
      pos = nl + 1;
    }
    faults_offset_ += pos;  // a line without its newline yet waits for the next call
    return Status::Ok();
  }

  // One line of the fault file; nothing changes unless the whole line is valid.
  Status ApplyFault(std::string_view line) {
    line = Trim(line);
    if (line.empty()) {
      return Status::Ok();
    }
    TESSERA_ASSIGN_OR_RETURN(Json j, ParseJsonText(line, "fault", JsonTextLimits{4096, 4}));
    FieldReader r;
    TESSERA_RETURN_IF_ERROR(
        r.CheckObject(j, "", {"gpu", "xid", "ecc_dbe", "ecc_sbe", "temp_c", "util_pct", "lost"}));
    const Json* g = FindField(j, "gpu");
    if (g == nullptr) {
      return r.Error("gpu", "is required");
    }
    TESSERA_ASSIGN_OR_RETURN(int64_t index,
                             r.Int(*g, "gpu", 0, static_cast<int64_t>(gpus_.size()) - 1));
    std::optional<int> xid;
    int64_t dbe = 0;
    int64_t sbe = 0;
    std::optional<std::optional<int>> temp;  // set: change the override (inner nullopt: clear)
    std::optional<bool> lost;
    constexpr int64_t kMaxCount = 1'000'000'000;
    if (const Json* v = FindField(j, "xid")) {
      TESSERA_ASSIGN_OR_RETURN(int64_t x, r.Int(*v, "xid", 1, std::numeric_limits<int>::max()));
      xid = static_cast<int>(x);
    }
    if (const Json* v = FindField(j, "ecc_dbe")) {
      TESSERA_ASSIGN_OR_RETURN(dbe, r.Int(*v, "ecc_dbe", 0, kMaxCount));
    }
    if (const Json* v = FindField(j, "ecc_sbe")) {
      TESSERA_ASSIGN_OR_RETURN(sbe, r.Int(*v, "ecc_sbe", 0, kMaxCount));
    }
    if (j.contains("temp_c")) {
      if (j["temp_c"].is_null()) {
        temp = std::optional<int>();
      } else {
        TESSERA_ASSIGN_OR_RETURN(int64_t c, r.Int(j["temp_c"], "temp_c", -273, 1000));
        temp = std::optional<int>(static_cast<int>(c));
      }
    }
    std::optional<std::optional<int>> util;  // as temp
    if (j.contains("util_pct")) {
      if (j["util_pct"].is_null()) {
        util = std::optional<int>();
      } else {
        TESSERA_ASSIGN_OR_RETURN(int64_t u, r.Int(j["util_pct"], "util_pct", 0, 100));
        util = std::optional<int>(static_cast<int>(u));
      }
    }
    if (const Json* v = FindField(j, "lost")) {
      TESSERA_ASSIGN_OR_RETURN(lost, r.Bool(*v, "lost"));
    }
    if (!xid && !FindField(j, "ecc_dbe") && !FindField(j, "ecc_sbe") && !temp && !util && !lost) {
      return InvalidArgumentError(
          "names no fault (xid, ecc_dbe, ecc_sbe, temp_c, util_pct or lost)");
    }
    Gpu& gpu = gpus_[static_cast<size_t>(index)];
    if (xid) {
      ++gpu.xid_count;
      gpu.last_xid = *xid;
    }
    gpu.ecc_dbe += dbe;
    gpu.ecc_sbe += sbe;
    if (temp) {
      gpu.temp_override = *temp;
    }
    if (util) {
      gpu.util_override = *util;
    }
    if (lost) {
      gpu.lost = *lost;
    }
    return Status::Ok();
  }

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
  FakeGpuOptions options_;
  std::map<std::string, std::vector<GpuLoad>> loads_;  // by task id
  uint64_t samples_ = 0;                               // ReadTelemetry calls
  uint64_t faults_offset_ = 0;                         // bytes of the fault file applied
  int64_t faults_line_ = 0;                            // lines of the fault file read
  dev_t faults_dev_ = 0;                               // identity of the file read
  ino_t faults_ino_ = 0;
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
  return MakeFakeGpuBackend(spec, catalog, node_name, FakeGpuOptions{});
}

StatusOr<std::unique_ptr<GpuBackend>> MakeFakeGpuBackend(std::string_view spec,
                                                         const GpuCatalog& catalog,
                                                         std::string_view node_name,
                                                         const FakeGpuOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(ParsedSpec parsed, Parse(spec, catalog));
  return std::unique_ptr<GpuBackend>(std::make_unique<FakeGpuBackend>(
      catalog, std::string(node_name), std::move(parsed), options));
}

}  // namespace tessera
