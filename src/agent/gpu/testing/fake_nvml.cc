// A fake libnvidia-ml for tests: emulates a configurable machine well enough for
// every NVML call the NVML backend makes, MIG instance create/destroy included, and
// exports a few fakeNvml* functions through which tests observe and steer its state.
//
// Configuration, read by the first nvmlInit_v2 (and again after the last nvmlShutdown):
//   FAKE_NVML_SPEC     comma-separated groups "N x MODEL[:mig][:nolink]" (default
//                      "1xA100-SXM4-80GB"). Each group is one NUMA node (numbered in order,
//                      4 CPUs each: node k has CPUs 4k..4k+3) and one NVLink group: A100s
//                      link to each other directly, H100/H200s through the group's own
//                      NVSwitches, the others have no NVLink. MODEL is one of
//                      A100-SXM4-80GB, A100-SXM4-40GB, H100-80GB, H100-PCIE, H200, L40S,
//                      T4, MYSTERY (a product no catalog knows).
//   FAKE_NVML_OPTIONS  comma-separated: fail_init (nvmlInit_v2 answers DRIVER_NOT_LOADED),
//                      no_nvlink, no_numa, no_affinity (those calls answer NOT_SUPPORTED),
//                      driver=VERSION, fabric=CLIQUE (every GPU is in the NVLink fabric
//                      cluster 6b1f2c3d-0000-4a5b-9c8d-112233445566, clique CLIQUE; without
//                      it nvmlDeviceGetGpuFabricInfoV answers NOT_SUPPORTED),
//                      fabric_pending (the fabric registration has not completed).
// GPU k has PCI bus id 00000000:<0x10+k>:00.0. An invalid spec makes nvmlInit_v2 fail
// with NVML_ERROR_UNKNOWN.
//
// Telemetry: GPU k reads, until a test sets otherwise with fakeNvmlSetReading,
// utilisation 10+k % (NOT_SUPPORTED in MIG mode, as on real GPUs), 1024*(k+1) MiB of
// memory used, 40+k degrees C, 100000+1000*k mW, an SM clock of 1000+10*k MHz and no
// ECC errors (MYSTERY has no ECC: NOT_SUPPORTED). A MIG device of GPU instance g uses
// 256*g MiB. fakeNvmlInjectXid queues an XID event on every event set that registered
// the GPU; fakeNvmlSetLost makes a GPU answer NVML_ERROR_GPU_IS_LOST.
//
// Built twice: as libnvidia-ml-fake.so, and with FAKE_NVML_MINIMAL as
// libnvidia-ml-fake-minimal.so, which lacks the optional functions (NVLink, NUMA, CPU
// affinity, device minor numbers, NVML version, GPU fabric, possible placements, compute instance profile info,
// utilisation, temperature, power, clocks, ECC counters and events) so that
// tests see how the backend copes with an older driver. Thread safety: one mutex
// around the whole state, as NVML is thread-safe.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "agent/gpu/nvml_api.h"

#define FAKE_NVML_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

constexpr unsigned int kMaxMigDevices = 7;
constexpr unsigned int kTotalComputeSlices = 7;
constexpr int kCpusPerNuma = 4;

enum class LinkKind { kNone, kDirect, kSwitch };

// One GPU instance profile, by NVML profile index.
struct GiProfile {
  unsigned int index;
  unsigned int id;  // what nvidia-smi calls the profile ID
  unsigned int slices;
  unsigned int size;  // memory slots
  unsigned int max_instances;
  std::vector<unsigned int> starts;
};

const std::vector<GiProfile>& GiProfiles() {
  static const std::vector<GiProfile> profiles = {
      {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, 1, 1, 7, {0, 1, 2, 3, 4, 5, 6}},
      {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, 2, 2, 3, {0, 2, 4}},
      {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, 3, 4, 2, {0, 4}},
      {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, 4, 4, 1, {0}},
      {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, 7, 8, 1, {0}},
      {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, 1, 1, 1, {0, 1, 2, 3, 4, 5, 6}},
      {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, 1, 2, 4, {0, 2, 4, 6}},
  };
  return profiles;
}

const GiProfile* ProfileByIndex(unsigned int index) {
  for (const GiProfile& p : GiProfiles()) {
    if (p.index == index) {
      return &p;
    }
  }
  return nullptr;
}

const GiProfile* ProfileById(unsigned int id) {
  for (const GiProfile& p : GiProfiles()) {
    if (p.id == id) {
      return &p;
    }
  }
  return nullptr;
}

struct Model {
  const char* key;
  const char* product;
  unsigned long long memory_mib;
  bool mig;
  LinkKind links;
  unsigned int link_count;
  // MiB per MIG slot count (1, 2, 4, 8 slots), as nvidia-smi mig -lgip shows.
  unsigned long long slot_mib[4];
};

const Model kModels[] = {
    {"A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", 81920, true, LinkKind::kDirect, 12,
     {9728, 19968, 40192, 80896}},
    {"A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB", 40960, true, LinkKind::kDirect, 12,
     {4864, 9856, 19968, 40192}},
    {"H100-80GB", "NVIDIA H100 80GB HBM3", 81559, true, LinkKind::kSwitch, 18,
     {9984, 20096, 40448, 81152}},
    {"H100-PCIE", "NVIDIA H100 PCIe", 81559, true, LinkKind::kNone, 0,
     {9984, 20096, 40448, 81152}},
    {"H200", "NVIDIA H200", 143771, true, LinkKind::kSwitch, 18, {16384, 33024, 71168, 143104}},
    {"L40S", "NVIDIA L40S", 46068, false, LinkKind::kNone, 0, {0, 0, 0, 0}},
    {"T4", "Tesla T4", 15360, false, LinkKind::kNone, 0, {0, 0, 0, 0}},
    {"MYSTERY", "NVIDIA Mystery Accelerator", 12288, false, LinkKind::kNone, 0, {0, 0, 0, 0}},
};

unsigned long long SlotMib(const Model& m, unsigned int size) {
  switch (size) {
    case 1:
      return m.slot_mib[0];
    case 2:
      return m.slot_mib[1];
    case 4:
      return m.slot_mib[2];
    default:
      return m.slot_mib[3];
  }
}

std::string BusId(unsigned int bus) {
  char buf[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
  std::snprintf(buf, sizeof(buf), "00000000:%02X:00.0", bus);
  return buf;
}

nvmlReturn_t CopyString(const std::string& value, char* out, unsigned int length) {
  if (out == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (value.size() + 1 > length) {
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  std::memcpy(out, value.c_str(), value.size() + 1);
  return NVML_SUCCESS;
}

}  // namespace

struct nvmlComputeInstance_st {
  nvmlGpuInstance_st* gi = nullptr;
  unsigned int id = 0;
  unsigned int profile = 0;  // compute instance profile index (== its id here)
  unsigned int slices = 0;
  std::unique_ptr<nvmlDevice_st> mig_device;  // the MIG device this compute instance forms
};

struct nvmlGpuInstance_st {
  nvmlDevice_st* device = nullptr;
  unsigned int id = 0;
  const GiProfile* profile = nullptr;
  unsigned int start = 0;
  std::vector<std::unique_ptr<nvmlComputeInstance_st>> cis;
};

struct nvmlDevice_st {
  // A MIG device handle points at its compute instance; a physical one has none.
  nvmlComputeInstance_st* ci = nullptr;
  std::string uuid;
  // Physical GPUs only.
  unsigned int index = 0;
  const Model* model = nullptr;
  bool mig_enabled = false;
  bool nvlink = true;
  unsigned int bus = 0;
  int numa = 0;
  int group = 0;
  std::vector<std::string> link_targets;  // remote bus id per active link
  std::vector<std::unique_ptr<nvmlGpuInstance_st>> gis;  // creation order
  // Telemetry readings: physical GPUs (all but mem_used_mib, which MIG devices have too).
  unsigned long long mem_used_mib = 0;
  unsigned int util = 0;
  unsigned int temp = 0;
  unsigned int power_mw = 0;
  unsigned int sm_clock = 0;
  unsigned long long ecc[2][2] = {};  // [error type][counter type]
  bool ecc_supported = true;
  int lost = 0;  // 1: calls answer GPU_IS_LOST; 2: nvmlDeviceGetHandleByIndex too
};

struct nvmlEventSet_st {
  std::vector<nvmlDevice_st*> xid_devices;  // registered for nvmlEventTypeXidCriticalError
  std::deque<nvmlEventData_t> pending;
};

namespace {

struct State {
  std::mutex mu;
  int init_count = 0;
  std::vector<std::unique_ptr<nvmlDevice_st>> devices;
  std::string driver = "550.54.15";
  bool no_numa = false;
  bool no_affinity = false;
  int fabric_clique = -1;  // -1: no fabric
  bool fabric_pending = false;
  unsigned long long serial = 0;  // for unique MIG UUIDs
  std::map<std::string, nvmlReturn_t> fail_next;
  std::vector<std::unique_ptr<nvmlEventSet_st>> event_sets;
};

State& S() {
  static State state;  // destroyed when the library is unloaded
  return state;
}

std::vector<std::string_view> SplitOn(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t pos = text.find(sep, start);
    out.push_back(text.substr(start, pos == std::string_view::npos ? pos : pos - start));
    if (pos == std::string_view::npos) {
      return out;
    }
    start = pos + 1;
  }
}

std::string_view TrimSpaces(std::string_view s) {
  while (!s.empty() && s.front() == ' ') {
    s.remove_prefix(1);
  }
  while (!s.empty() && s.back() == ' ') {
    s.remove_suffix(1);
  }
  return s;
}

// Consumes a pending injected failure for `function`.
bool TakeFailure(State& s, const char* function, nvmlReturn_t* code) {
  auto it = s.fail_next.find(function);
  if (it == s.fail_next.end()) {
    return false;
  }
  *code = it->second;
  s.fail_next.erase(it);
  return true;
}

bool Configure(State& s) {
  s.devices.clear();
  s.driver = "550.54.15";
  s.no_numa = false;
  s.no_affinity = false;
  s.fabric_clique = -1;
  s.fabric_pending = false;
  bool no_nvlink = false;
  const char* options = std::getenv("FAKE_NVML_OPTIONS");
  for (std::string_view opt : SplitOn(options != nullptr ? options : "", ',')) {
    opt = TrimSpaces(opt);
    if (opt == "fail_init") {
      return false;
    }
    if (opt == "no_nvlink") {
      no_nvlink = true;
    } else if (opt == "no_numa") {
      s.no_numa = true;
    } else if (opt == "no_affinity") {
      s.no_affinity = true;
    } else if (opt.substr(0, 7) == "driver=") {
      s.driver = std::string(opt.substr(7));
    } else if (opt.substr(0, 7) == "fabric=") {
      s.fabric_clique = std::atoi(std::string(opt.substr(7)).c_str());
    } else if (opt == "fabric_pending") {
      s.fabric_pending = true;
    }
  }
  const char* spec_env = std::getenv("FAKE_NVML_SPEC");
  std::string_view spec = spec_env != nullptr ? spec_env : "1xA100-SXM4-80GB";
  int group = 0;
  for (std::string_view item : SplitOn(spec, ',')) {
    item = TrimSpaces(item);
    if (item.empty()) {
      continue;
    }
    std::vector<std::string_view> parts = SplitOn(item, ':');
    std::string_view head = parts[0];
    size_t x = head.find_first_of("xX");
    if (x == std::string_view::npos || x == 0) {
      return false;
    }
    int count = std::atoi(std::string(head.substr(0, x)).c_str());
    std::string_view name = TrimSpaces(head.substr(x + 1));
    const Model* model = nullptr;
    for (const Model& m : kModels) {
      if (name == m.key) {
        model = &m;
      }
    }
    if (model == nullptr || count < 1 || s.devices.size() + static_cast<size_t>(count) > 64) {
      return false;
    }
    bool mig = false;
    bool nolink = no_nvlink;
    for (size_t i = 1; i < parts.size(); ++i) {
      if (parts[i] == "mig" && model->mig) {
        mig = true;
      } else if (parts[i] == "nolink") {
        nolink = true;
      } else {
        return false;
      }
    }
    size_t first = s.devices.size();
    for (int k = 0; k < count; ++k) {
      auto d = std::make_unique<nvmlDevice_st>();
      d->index = static_cast<unsigned int>(s.devices.size());
      d->model = model;
      d->mig_enabled = mig;
      d->nvlink = !nolink && model->links != LinkKind::kNone;
      d->bus = 0x10 + d->index;
      d->numa = group;
      d->group = group;
      char uuid[64];
      std::snprintf(uuid, sizeof(uuid), "GPU-fa4e0000-0000-4000-8000-%012x", d->index);
      d->uuid = uuid;
      d->util = 10 + d->index;
      d->mem_used_mib = std::min<unsigned long long>(1024ULL * (d->index + 1), model->memory_mib);
      d->temp = 40 + d->index;
      d->power_mw = 100000 + 1000 * d->index;
      d->sm_clock = 1000 + 10 * d->index;
      d->ecc_supported = std::string_view(model->key) != "MYSTERY";
      s.devices.push_back(std::move(d));
    }
    // Wire the links of the group.
    for (int k = 0; k < count; ++k) {
      nvmlDevice_st& d = *s.devices[first + static_cast<size_t>(k)];
      if (!d.nvlink) {
        continue;
      }
      if (model->links == LinkKind::kDirect) {
        for (int peer = 1; peer < count; ++peer) {
          const nvmlDevice_st& p = *s.devices[first + static_cast<size_t>((k + peer) % count)];
          d.link_targets.push_back(BusId(p.bus));
        }
      } else {
        for (unsigned int link = 0; link < model->link_count; ++link) {
          d.link_targets.push_back(BusId(0xA0 + static_cast<unsigned int>(group) * 4 + link % 4));
        }
      }
    }
    ++group;
  }
  return true;
}

nvmlDevice_st* Physical(State& s, nvmlDevice_t device) {
  for (auto& d : s.devices) {
    if (d.get() == device) {
      return d.get();
    }
  }
  return nullptr;
}

// A live MIG device handle, or null.
nvmlDevice_st* MigDevice(State& s, nvmlDevice_t device) {
  for (auto& d : s.devices) {
    for (auto& gi : d->gis) {
      for (auto& ci : gi->cis) {
        if (ci->mig_device.get() == device) {
          return device;
        }
      }
    }
  }
  return nullptr;
}

// The physical GPU of a physical or MIG device handle, or null.
nvmlDevice_st* ParentGpu(State& s, nvmlDevice_t device) {
  if (nvmlDevice_st* d = Physical(s, device)) {
    return d;
  }
  if (nvmlDevice_st* m = MigDevice(s, device)) {
    return m->ci->gi->device;
  }
  return nullptr;
}

bool IsLost(State& s, nvmlDevice_t device) {
  nvmlDevice_st* d = ParentGpu(s, device);
  return d != nullptr && d->lost != 0;
}

[[maybe_unused]] nvmlEventSet_st* LiveSet(State& s, nvmlEventSet_t set) {
  for (auto& e : s.event_sets) {
    if (e.get() == set) {
      return set;
    }
  }
  return nullptr;
}

nvmlGpuInstance_st* LiveGi(State& s, nvmlGpuInstance_t gi) {
  for (auto& d : s.devices) {
    for (auto& g : d->gis) {
      if (g.get() == gi) {
        return gi;
      }
    }
  }
  return nullptr;
}

nvmlComputeInstance_st* LiveCi(State& s, nvmlComputeInstance_t ci) {
  for (auto& d : s.devices) {
    for (auto& g : d->gis) {
      for (auto& c : g->cis) {
        if (c.get() == ci) {
          return ci;
        }
      }
    }
  }
  return nullptr;
}

unsigned int ComputeSlices(unsigned int ci_profile) {
  static const unsigned int kSlices[NVML_COMPUTE_INSTANCE_PROFILE_COUNT] = {1, 2, 3, 4, 7, 8, 6, 1};
  return ci_profile < NVML_COMPUTE_INSTANCE_PROFILE_COUNT ? kSlices[ci_profile] : 0;
}

// Which compute instance profiles a GPU instance offers: those that fit it, without
// the 8/6-slice and REV1 variants (as on A100/H100).
bool ComputeProfileOffered(const nvmlGpuInstance_st& gi, unsigned int ci_profile) {
  return ci_profile <= NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE &&
         ComputeSlices(ci_profile) <= gi.profile->slices;
}

std::vector<nvmlComputeInstance_st*> AllCis(nvmlDevice_st& d) {
  std::vector<nvmlComputeInstance_st*> out;
  for (auto& gi : d.gis) {
    for (auto& ci : gi->cis) {
      out.push_back(ci.get());
    }
  }
  return out;
}

nvmlReturn_t CreateGi(State& s, nvmlDevice_st& d, const GiProfile& p, unsigned int start,
                      unsigned int size, nvmlGpuInstance_st** out) {
  if (!d.mig_enabled) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  if (size != p.size || std::find(p.starts.begin(), p.starts.end(), start) == p.starts.end()) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  unsigned int slices = p.slices;
  unsigned int same = 0;
  for (auto& gi : d.gis) {
    unsigned int end = gi->start + gi->profile->size;
    if (start < end && gi->start < start + size) {
      return NVML_ERROR_INSUFFICIENT_RESOURCES;
    }
    slices += gi->profile->slices;
    if (gi->profile == &p) {
      ++same;
    }
  }
  if (slices > kTotalComputeSlices || same >= p.max_instances) {
    return NVML_ERROR_INSUFFICIENT_RESOURCES;
  }
  nvmlReturn_t injected = NVML_SUCCESS;
  if (TakeFailure(s, "nvmlDeviceCreateGpuInstanceWithPlacement", &injected)) {
    return injected;
  }
  unsigned int id = 1;
  while (std::any_of(d.gis.begin(), d.gis.end(), [&](const auto& g) { return g->id == id; })) {
    ++id;
  }
  auto gi = std::make_unique<nvmlGpuInstance_st>();
  gi->device = &d;
  gi->id = id;
  gi->profile = &p;
  gi->start = start;
  *out = gi.get();
  d.gis.push_back(std::move(gi));
  return NVML_SUCCESS;
}

nvmlReturn_t CreateCi(State& s, nvmlGpuInstance_st& gi, unsigned int ci_profile,
                      nvmlComputeInstance_st** out) {
  if (!ComputeProfileOffered(gi, ci_profile)) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  unsigned int used = ComputeSlices(ci_profile);
  for (auto& ci : gi.cis) {
    used += ci->slices;
  }
  if (used > gi.profile->slices) {
    return NVML_ERROR_INSUFFICIENT_RESOURCES;
  }
  nvmlReturn_t injected = NVML_SUCCESS;
  if (TakeFailure(s, "nvmlGpuInstanceCreateComputeInstance", &injected)) {
    return injected;
  }
  unsigned int id = 0;
  while (std::any_of(gi.cis.begin(), gi.cis.end(), [&](const auto& c) { return c->id == id; })) {
    ++id;
  }
  auto ci = std::make_unique<nvmlComputeInstance_st>();
  ci->gi = &gi;
  ci->id = id;
  ci->profile = ci_profile;
  ci->slices = ComputeSlices(ci_profile);
  ci->mig_device = std::make_unique<nvmlDevice_st>();
  ci->mig_device->ci = ci.get();
  char uuid[64];
  std::snprintf(uuid, sizeof(uuid), "MIG-fa4e%04x-%04x-4000-8000-%012llx", gi.device->index,
                gi.id, ++s.serial);
  ci->mig_device->uuid = uuid;
  ci->mig_device->mem_used_mib = 256ULL * gi.id;
  *out = ci.get();
  gi.cis.push_back(std::move(ci));
  return NVML_SUCCESS;
}

}  // namespace

// ---- NVML entry points --------------------------------------------------------------

#define FAKE_LOCK                    \
  State& s = S();                    \
  std::lock_guard<std::mutex> lock(s.mu)
#define FAKE_REQUIRE_INIT          \
  if (s.init_count == 0) {         \
    return NVML_ERROR_UNINITIALIZED; \
  }

FAKE_NVML_EXPORT nvmlReturn_t nvmlInit_v2() {
  FAKE_LOCK;
  if (s.init_count == 0 && !Configure(s)) {
    s.devices.clear();
    const char* options = std::getenv("FAKE_NVML_OPTIONS");
    return options != nullptr && std::strstr(options, "fail_init") != nullptr
               ? NVML_ERROR_DRIVER_NOT_LOADED
               : NVML_ERROR_UNKNOWN;
  }
  ++s.init_count;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlShutdown() {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  if (--s.init_count == 0) {
    s.event_sets.clear();
    s.devices.clear();
    s.fail_next.clear();
  }
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
      return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND:
      return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_IN_USE:
      return "In use by another client";
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
      return "Insufficient resources";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    default:
      return "Unknown Error";
  }
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  return CopyString(s.driver, version, length);
}

#ifndef FAKE_NVML_MINIMAL
FAKE_NVML_EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  return CopyString("12." + s.driver, version, length);
}
#endif

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* device_count) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  if (device_count == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  *device_count = static_cast<unsigned int>(s.devices.size());
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index,
                                                            nvmlDevice_t* device) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  if (device == nullptr || index >= s.devices.size()) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (s.devices[index]->lost == 2) {
    return NVML_ERROR_GPU_IS_LOST;
  }
  *device = s.devices[index].get();
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name,
                                                unsigned int length) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  if (IsLost(s, device)) {
    return NVML_ERROR_GPU_IS_LOST;
  }
  if (nvmlDevice_st* d = Physical(s, device)) {
    return CopyString(d->model->product, name, length);
  }
  if (nvmlDevice_st* m = MigDevice(s, device)) {
    const nvmlGpuInstance_st& gi = *m->ci->gi;
    return CopyString(std::string(gi.device->model->product) + " MIG " +
                          std::to_string(gi.profile->slices) + "g",
                      name, length);
  }
  return NVML_ERROR_INVALID_ARGUMENT;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid,
                                                unsigned int length) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  if (IsLost(s, device)) {
    return NVML_ERROR_GPU_IS_LOST;
  }
  if (Physical(s, device) == nullptr && MigDevice(s, device) == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  return CopyString(device->uuid, uuid, length);
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  if (memory == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (IsLost(s, device)) {
    return NVML_ERROR_GPU_IS_LOST;
  }
  unsigned long long mib = 0;
  unsigned long long used = 0;
  if (nvmlDevice_st* d = Physical(s, device)) {
    mib = d->model->memory_mib;
    used = d->mem_used_mib;
  } else if (nvmlDevice_st* m = MigDevice(s, device)) {
    mib = SlotMib(*m->ci->gi->device->model, m->ci->gi->profile->size);
    used = m->mem_used_mib;
  } else {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  used = std::min(used, mib);
  memory->total = mib << 20;
  memory->used = used << 20;
  memory->free = memory->total - memory->used;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  nvmlDevice_st* d = Physical(s, device);
  if (d == nullptr || pci == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  std::memset(pci, 0, sizeof(*pci));
  std::string id = BusId(d->bus);
  std::snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "0000:%02X:00.0", d->bus);
  std::snprintf(pci->busId, sizeof(pci->busId), "%s", id.c_str());
  pci->domain = 0;
  pci->bus = d->bus;
  pci->device = 0;
  pci->pciDeviceId = 0x20B510DE;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* current_mode,
                                                   unsigned int* pending_mode) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  nvmlDevice_st* d = Physical(s, device);
  if (d == nullptr || current_mode == nullptr || pending_mode == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (d->lost != 0) {
    return NVML_ERROR_GPU_IS_LOST;
  }
  if (!d->model->mig) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  *current_mode = d->mig_enabled ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
  *pending_mode = *current_mode;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(
    nvmlDevice_t device, unsigned int profile, nvmlGpuInstanceProfileInfo_t* info) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  nvmlDevice_st* d = Physical(s, device);
  if (d == nullptr || info == nullptr || profile >= kNvmlGpuInstanceProfileProbeCount) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  const GiProfile* p = ProfileByIndex(profile);
  if (!d->model->mig || p == nullptr) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  std::memset(info, 0, sizeof(*info));
  info->id = p->id;
  info->isP2pSupported = 0;
  info->sliceCount = p->slices;
  info->instanceCount = p->max_instances;
  info->multiprocessorCount = p->slices * 16;
  info->copyEngineCount = p->slices;
  info->memorySizeMB = SlotMib(*d->model, p->size);
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device,
                                                        unsigned int profile_id,
                                                        nvmlGpuInstance_t* gpu_instances,
                                                        unsigned int* count) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  nvmlDevice_st* d = Physical(s, device);
  const GiProfile* p = ProfileById(profile_id);
  if (d == nullptr || p == nullptr || gpu_instances == nullptr || count == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (!d->model->mig || !d->mig_enabled) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  unsigned int n = 0;
  for (auto& gi : d->gis) {
    if (gi->profile == p) {
      gpu_instances[n++] = gi.get();
    }
  }
  *count = n;
  return NVML_SUCCESS;
}

#ifndef FAKE_NVML_MINIMAL
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(
    nvmlDevice_t device, unsigned int profile_id, nvmlGpuInstancePlacement_t* placements,
    unsigned int* count) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  nvmlDevice_st* d = Physical(s, device);
  const GiProfile* p = ProfileById(profile_id);
  if (d == nullptr || p == nullptr || count == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (!d->model->mig) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  unsigned int n = static_cast<unsigned int>(p->starts.size());
  if (placements == nullptr) {
    *count = n;
    return NVML_SUCCESS;
  }
  if (*count < n) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (unsigned int i = 0; i < n; ++i) {
    placements[i].start = p->starts[i];
    placements[i].size = p->size;
  }
  *count = n;
  return NVML_SUCCESS;
}
#endif

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(
    nvmlDevice_t device, unsigned int profile_id, const nvmlGpuInstancePlacement_t* placement,
    nvmlGpuInstance_t* gpu_instance) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  nvmlDevice_st* d = Physical(s, device);
  const GiProfile* p = ProfileById(profile_id);
  if (d == nullptr || p == nullptr || placement == nullptr || gpu_instance == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (!d->model->mig) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  return CreateGi(s, *d, *p, placement->start, placement->size, gpu_instance);
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                                           nvmlGpuInstance_t* gpu_instance) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  nvmlDevice_st* d = Physical(s, device);
  if (d == nullptr || gpu_instance == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (!d->model->mig || !d->mig_enabled) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  for (auto& gi : d->gis) {
    if (gi->id == id) {
      *gpu_instance = gi.get();
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpu_instance,
                                                     nvmlGpuInstanceInfo_t* info) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  nvmlGpuInstance_st* gi = LiveGi(s, gpu_instance);
  if (gi == nullptr || info == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  info->device = gi->device;
  info->id = gi->id;
  info->profileId = gi->profile->id;
  info->placement.start = gi->start;
  info->placement.size = gi->profile->size;
  return NVML_SUCCESS;
}

#ifndef FAKE_NVML_MINIMAL
FAKE_NVML_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(
    nvmlGpuInstance_t gpu_instance, unsigned int profile, unsigned int eng_profile,
    nvmlComputeInstanceProfileInfo_t* info) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  nvmlGpuInstance_st* gi = LiveGi(s, gpu_instance);
  if (gi == nullptr || info == nullptr || profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT ||
      eng_profile != NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (!ComputeProfileOffered(*gi, profile)) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  std::memset(info, 0, sizeof(*info));
  info->id = profile;
  info->sliceCount = ComputeSlices(profile);
  info->instanceCount = gi->profile->slices / ComputeSlices(profile);
  info->multiprocessorCount = ComputeSlices(profile) * 16;
  return NVML_SUCCESS;
}
#endif

FAKE_NVML_EXPORT nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(
    nvmlGpuInstance_t gpu_instance, unsigned int profile_id,
    nvmlComputeInstance_t* compute_instance) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  nvmlGpuInstance_st* gi = LiveGi(s, gpu_instance);
  if (gi == nullptr || compute_instance == nullptr ||
      profile_id >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  return CreateCi(s, *gi, profile_id, compute_instance);
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstances(
    nvmlGpuInstance_t gpu_instance, unsigned int profile_id,
    nvmlComputeInstance_t* compute_instances, unsigned int* count) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  nvmlGpuInstance_st* gi = LiveGi(s, gpu_instance);
  if (gi == nullptr || compute_instances == nullptr || count == nullptr ||
      profile_id >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  unsigned int n = 0;
  for (auto& ci : gi->cis) {
    if (ci->profile == profile_id) {
      compute_instances[n++] = ci.get();
    }
  }
  *count = n;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t compute_instance) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  nvmlComputeInstance_st* ci = LiveCi(s, compute_instance);
  if (ci == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  nvmlReturn_t injected = NVML_SUCCESS;
  if (TakeFailure(s, "nvmlComputeInstanceDestroy", &injected)) {
    return injected;
  }
  auto& cis = ci->gi->cis;
  cis.erase(std::find_if(cis.begin(), cis.end(), [&](const auto& c) { return c.get() == ci; }));
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gpu_instance) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  nvmlGpuInstance_st* gi = LiveGi(s, gpu_instance);
  if (gi == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (!gi->cis.empty()) {
    return NVML_ERROR_IN_USE;
  }
  nvmlReturn_t injected = NVML_SUCCESS;
  if (TakeFailure(s, "nvmlGpuInstanceDestroy", &injected)) {
    return injected;
  }
  auto& gis = gi->device->gis;
  gis.erase(std::find_if(gis.begin(), gis.end(), [&](const auto& g) { return g.get() == gi; }));
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device,
                                                             unsigned int* count) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  nvmlDevice_st* d = Physical(s, device);
  if (d == nullptr || count == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (!d->model->mig) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  *count = kMaxMigDevices;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device,
                                                                  unsigned int index,
                                                                  nvmlDevice_t* mig_device) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  nvmlDevice_st* d = Physical(s, device);
  if (d == nullptr || mig_device == nullptr || index >= kMaxMigDevices) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (!d->model->mig || !d->mig_enabled) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  std::vector<nvmlComputeInstance_st*> cis = AllCis(*d);
  if (index >= cis.size()) {
    return NVML_ERROR_NOT_FOUND;
  }
  *mig_device = cis[index]->mig_device.get();
  return NVML_SUCCESS;
}

namespace {

// One id of a MIG device's instances (`pick` chooses which), as NVML answers for it.
template <typename Pick>
nvmlReturn_t MigDeviceId(nvmlDevice_t device, unsigned int* id, Pick pick) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  if (id == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (Physical(s, device) != nullptr) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  nvmlDevice_st* m = MigDevice(s, device);
  if (m == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  *id = pick(*m->ci);
  return NVML_SUCCESS;
}

}  // namespace

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
  return MigDeviceId(device, id, [](const nvmlComputeInstance_st& ci) { return ci.gi->id; });
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device,
                                                             unsigned int* id) {
  return MigDeviceId(device, id, [](const nvmlComputeInstance_st& ci) { return ci.id; });
}

#ifndef FAKE_NVML_MINIMAL
// Device minors are not NVML indexes in general; here GPU k is /dev/nvidia<2k+1>, so
// that a caller confusing the two is caught.
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int* minor) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  nvmlDevice_st* d = Physical(s, device);
  if (d == nullptr || minor == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  *minor = 2 * d->index + 1;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                                       nvmlEnableState_t* is_active) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  nvmlDevice_st* d = Physical(s, device);
  if (d == nullptr || is_active == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (!d->nvlink) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  if (link >= d->model->link_count) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  *is_active = link < d->link_targets.size() ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device,
                                                                  unsigned int link,
                                                                  nvmlPciInfo_t* pci) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  nvmlDevice_st* d = Physical(s, device);
  if (d == nullptr || pci == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (!d->nvlink) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  if (link >= d->link_targets.size()) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  std::memset(pci, 0, sizeof(*pci));
  std::snprintf(pci->busId, sizeof(pci->busId), "%s", d->link_targets[link].c_str());
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device,
                                                       unsigned int cpu_set_size,
                                                       unsigned long* cpu_set) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  nvmlDevice_st* d = Physical(s, device);
  if (d == nullptr || cpu_set == nullptr || cpu_set_size == 0) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (s.no_affinity) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  std::memset(cpu_set, 0, cpu_set_size * sizeof(unsigned long));
  constexpr int kBits = static_cast<int>(8 * sizeof(unsigned long));
  for (int c = d->numa * kCpusPerNuma; c < (d->numa + 1) * kCpusPerNuma; ++c) {
    if (static_cast<unsigned int>(c / kBits) < cpu_set_size) {
      cpu_set[c / kBits] |= 1UL << (c % kBits);
    }
  }
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int* node) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  nvmlDevice_st* d = Physical(s, device);
  if (d == nullptr || node == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (s.no_numa) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  *node = static_cast<unsigned int>(d->numa);
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device,
                                                          nvmlGpuFabricInfo_v2_t* info) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  nvmlDevice_st* d = Physical(s, device);
  if (d == nullptr || info == nullptr || info->version != nvmlGpuFabricInfo_v2) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (s.fabric_clique < 0) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  static constexpr unsigned char kCluster[NVML_GPU_FABRIC_UUID_LEN] = {
      0x6b, 0x1f, 0x2c, 0x3d, 0x00, 0x00, 0x4a, 0x5b,
      0x9c, 0x8d, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66};
  std::memcpy(info->clusterUuid, kCluster, sizeof(kCluster));
  info->status = NVML_SUCCESS;
  info->cliqueId = static_cast<unsigned int>(s.fabric_clique);
  info->state = s.fabric_pending ? 2 : NVML_GPU_FABRIC_STATE_COMPLETED;
  info->healthMask = 0;
  return NVML_SUCCESS;
}
#endif

#ifndef FAKE_NVML_MINIMAL
// ---- Telemetry ------------------------------------------------------------------------

// Binds `d` to the physical GPU `device` names, for a telemetry call; returns from
// the call for a bad handle, a null `out` or a lost GPU.
#define FAKE_TELEMETRY_DEVICE(device, out) \
  nvmlDevice_st* d = Physical(s, device);  \
  if (d == nullptr || (out) == nullptr) {  \
    return NVML_ERROR_INVALID_ARGUMENT;    \
  }                                        \
  if (d->lost != 0) {                      \
    return NVML_ERROR_GPU_IS_LOST;         \
  }

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                            nvmlUtilization_t* utilization) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  FAKE_TELEMETRY_DEVICE(device, utilization);
  if (d->mig_enabled) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  utilization->gpu = d->util;
  utilization->memory = d->util / 2;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device,
                                                       nvmlTemperatureSensors_t sensor,
                                                       unsigned int* temp) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  FAKE_TELEMETRY_DEVICE(device, temp);
  if (sensor != NVML_TEMPERATURE_GPU) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  *temp = d->temp;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power_mw) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  FAKE_TELEMETRY_DEVICE(device, power_mw);
  *power_mw = d->power_mw;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                                     unsigned int* clock_mhz) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  FAKE_TELEMETRY_DEVICE(device, clock_mhz);
  switch (type) {
    case NVML_CLOCK_GRAPHICS:
    case NVML_CLOCK_SM:
      *clock_mhz = d->sm_clock;
      return NVML_SUCCESS;
    case NVML_CLOCK_MEM:
      *clock_mhz = 1593;
      return NVML_SUCCESS;
    default:
      return NVML_ERROR_INVALID_ARGUMENT;
  }
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device,
                                                          nvmlMemoryErrorType_t error_type,
                                                          nvmlEccCounterType_t counter_type,
                                                          unsigned long long* ecc_counts) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  FAKE_TELEMETRY_DEVICE(device, ecc_counts);
  if (error_type < 0 || error_type > 1 || counter_type < 0 || counter_type > 1) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (!d->ecc_supported) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  *ecc_counts = d->ecc[error_type][counter_type];
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  if (set == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  s.event_sets.push_back(std::make_unique<nvmlEventSet_st>());
  *set = s.event_sets.back().get();
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device,
                                                       unsigned long long event_types,
                                                       nvmlEventSet_t set) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  nvmlDevice_st* d = Physical(s, device);
  nvmlEventSet_st* e = LiveSet(s, set);
  if (d == nullptr || e == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if ((event_types & ~nvmlEventTypeXidCriticalError) != 0) {
    return NVML_ERROR_NOT_SUPPORTED;  // only XIDs are emulated
  }
  if ((event_types & nvmlEventTypeXidCriticalError) != 0 &&
      std::find(e->xid_devices.begin(), e->xid_devices.end(), d) == e->xid_devices.end()) {
    e->xid_devices.push_back(d);
  }
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data,
                                                  unsigned int timeout_ms) {
  (void)timeout_ms;  // events are queued by the test before the call: nothing to wait for
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  nvmlEventSet_st* e = LiveSet(s, set);
  if (e == nullptr || data == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (e->pending.empty()) {
    return NVML_ERROR_TIMEOUT;
  }
  *data = e->pending.front();
  e->pending.pop_front();
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  auto it = std::find_if(s.event_sets.begin(), s.event_sets.end(),
                         [&](const auto& e) { return e.get() == set; });
  if (it == s.event_sets.end()) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  s.event_sets.erase(it);
  return NVML_SUCCESS;
}
#endif

// ---- Test hooks ---------------------------------------------------------------------

// How many nvmlInit_v2 calls are not yet matched by nvmlShutdown.
FAKE_NVML_EXPORT int fakeNvmlInitCount() {
  FAKE_LOCK;
  return s.init_count;
}

// GPU instances / compute instances on GPU `gpu`; -1 for no such GPU.
FAKE_NVML_EXPORT int fakeNvmlGpuInstanceCount(unsigned int gpu) {
  FAKE_LOCK;
  if (gpu >= s.devices.size()) {
    return -1;
  }
  return static_cast<int>(s.devices[gpu]->gis.size());
}

FAKE_NVML_EXPORT int fakeNvmlComputeInstanceCount(unsigned int gpu) {
  FAKE_LOCK;
  if (gpu >= s.devices.size()) {
    return -1;
  }
  return static_cast<int>(AllCis(*s.devices[gpu]).size());
}

// Writes "gpu0:mig[9@0/1,19@4/1];gpu1:-" (profile id @ start slot / compute instances,
// ascending start; "-" for a GPU not in MIG mode). Returns the length, or -1 when
// `size` is too small.
FAKE_NVML_EXPORT int fakeNvmlDescribeState(char* buf, unsigned int size) {
  FAKE_LOCK;
  std::string out;
  for (auto& d : s.devices) {
    if (!out.empty()) {
      out += ";";
    }
    out += "gpu" + std::to_string(d->index) + ":";
    if (!d->mig_enabled) {
      out += "-";
      continue;
    }
    std::vector<const nvmlGpuInstance_st*> gis;
    for (auto& gi : d->gis) {
      gis.push_back(gi.get());
    }
    std::sort(gis.begin(), gis.end(), [](auto* a, auto* b) { return a->start < b->start; });
    out += "mig[";
    for (size_t i = 0; i < gis.size(); ++i) {
      out += (i > 0 ? "," : "") + std::to_string(gis[i]->profile->id) + "@" +
             std::to_string(gis[i]->start) + "/" + std::to_string(gis[i]->cis.size());
    }
    out += "]";
  }
  if (buf == nullptr || out.size() + 1 > size) {
    return -1;
  }
  std::memcpy(buf, out.c_str(), out.size() + 1);
  return static_cast<int>(out.size());
}

// Makes the next call of `function` (nvmlDeviceCreateGpuInstanceWithPlacement,
// nvmlGpuInstanceCreateComputeInstance, nvmlComputeInstanceDestroy or
// nvmlGpuInstanceDestroy) fail with `code` once its own checks pass.
FAKE_NVML_EXPORT void fakeNvmlFailNext(const char* function, int code) {
  FAKE_LOCK;
  s.fail_next[function] = code;
}

// Creates a GPU instance of NVML profile index `profile_index` at `start` on GPU
// `gpu`, with one full compute instance when `with_compute_instance`; returns the
// NVML status. Stands in for instances made outside the agent (nvidia-smi).
FAKE_NVML_EXPORT int fakeNvmlAddGpuInstance(unsigned int gpu, unsigned int profile_index,
                                            unsigned int start, int with_compute_instance) {
  FAKE_LOCK;
  FAKE_REQUIRE_INIT;
  const GiProfile* p = ProfileByIndex(profile_index);
  if (gpu >= s.devices.size() || p == nullptr || !s.devices[gpu]->model->mig) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  nvmlGpuInstance_st* gi = nullptr;
  nvmlReturn_t r = CreateGi(s, *s.devices[gpu], *p, start, p->size, &gi);
  if (r != NVML_SUCCESS || with_compute_instance == 0) {
    return r;
  }
  unsigned int ci_profile = NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE;
  for (unsigned int c = 0; c <= NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE; ++c) {
    if (ComputeSlices(c) == p->slices) {
      ci_profile = c;
    }
  }
  nvmlComputeInstance_st* ci = nullptr;
  return CreateCi(s, *gi, ci_profile, &ci);
}

// Sets one telemetry reading of GPU `gpu`: "util" (%), "mem_used_mib", "temp" (C),
// "power_mw", "sm_clock" (MHz), "ecc_sbe_volatile", "ecc_dbe_volatile",
// "ecc_sbe_aggregate", "ecc_dbe_aggregate", "ecc_supported" (0/1). Returns
// NVML_SUCCESS, or NVML_ERROR_INVALID_ARGUMENT for no such GPU or reading.
FAKE_NVML_EXPORT int fakeNvmlSetReading(unsigned int gpu, const char* name, long long value) {
  FAKE_LOCK;
  if (gpu >= s.devices.size() || name == nullptr || value < 0) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  nvmlDevice_st& d = *s.devices[gpu];
  const std::string_view n(name);
  const auto u32 = static_cast<unsigned int>(value);
  const auto u64 = static_cast<unsigned long long>(value);
  if (n == "util") {
    d.util = u32;
  } else if (n == "mem_used_mib") {
    d.mem_used_mib = u64;
  } else if (n == "temp") {
    d.temp = u32;
  } else if (n == "power_mw") {
    d.power_mw = u32;
  } else if (n == "sm_clock") {
    d.sm_clock = u32;
  } else if (n == "ecc_sbe_volatile") {
    d.ecc[NVML_MEMORY_ERROR_TYPE_CORRECTED][NVML_VOLATILE_ECC] = u64;
  } else if (n == "ecc_dbe_volatile") {
    d.ecc[NVML_MEMORY_ERROR_TYPE_UNCORRECTED][NVML_VOLATILE_ECC] = u64;
  } else if (n == "ecc_sbe_aggregate") {
    d.ecc[NVML_MEMORY_ERROR_TYPE_CORRECTED][NVML_AGGREGATE_ECC] = u64;
  } else if (n == "ecc_dbe_aggregate") {
    d.ecc[NVML_MEMORY_ERROR_TYPE_UNCORRECTED][NVML_AGGREGATE_ECC] = u64;
  } else if (n == "ecc_supported") {
    d.ecc_supported = value != 0;
  } else {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  return NVML_SUCCESS;
}

// Queues an XID event with code `xid` for GPU `gpu` on every event set that
// registered it. Returns how many sets got it; -1 for no such GPU.
FAKE_NVML_EXPORT int fakeNvmlInjectXid(unsigned int gpu, unsigned long long xid) {
  FAKE_LOCK;
  if (gpu >= s.devices.size()) {
    return -1;
  }
  nvmlDevice_st* d = s.devices[gpu].get();
  int delivered = 0;
  for (auto& e : s.event_sets) {
    if (std::find(e->xid_devices.begin(), e->xid_devices.end(), d) != e->xid_devices.end()) {
      e->pending.push_back(nvmlEventData_t{d, nvmlEventTypeXidCriticalError, xid,
                                           NVML_INSTANCE_ID_NONE, NVML_INSTANCE_ID_NONE});
      ++delivered;
    }
  }
  return delivered;
}

// Makes GPU `gpu` lost: mode 1, its calls answer NVML_ERROR_GPU_IS_LOST; mode 2,
// nvmlDeviceGetHandleByIndex does too; 0 brings it back. Returns NVML_SUCCESS or
// NVML_ERROR_INVALID_ARGUMENT.
FAKE_NVML_EXPORT int fakeNvmlSetLost(unsigned int gpu, int mode) {
  FAKE_LOCK;
  if (gpu >= s.devices.size() || mode < 0 || mode > 2) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  s.devices[gpu]->lost = mode;
  return NVML_SUCCESS;
}
