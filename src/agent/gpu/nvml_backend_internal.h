// The NVML backend's internals (nvml_backend.cc, nvml_topology.cc): the table of NVML
// functions resolved at run time, how NVML's MIG profiles map onto the catalog's, and
// the topology helpers (NVLink peers and domains, NUMA nodes and CPUs). Private to
// src/agent. Thread safety: functions and values.
#pragma once

#include <dlfcn.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "agent/gpu/gpu_backend.h"
#include "agent/gpu/nvml_api.h"
#include "base/strings.h"
#include "model/gpu_catalog.h"

namespace tessera::nvml_internal {

// The NVML functions the backend uses; null when the library lacks an optional one.
struct NvmlApi {
  decltype(&::nvmlInit_v2) Init = nullptr;
  decltype(&::nvmlShutdown) Shutdown = nullptr;
  decltype(&::nvmlErrorString) ErrorString = nullptr;
  decltype(&::nvmlSystemGetDriverVersion) SystemGetDriverVersion = nullptr;
  decltype(&::nvmlSystemGetNVMLVersion) SystemGetNVMLVersion = nullptr;
  decltype(&::nvmlDeviceGetCount_v2) DeviceGetCount = nullptr;
  decltype(&::nvmlDeviceGetHandleByIndex_v2) DeviceGetHandleByIndex = nullptr;
  decltype(&::nvmlDeviceGetName) DeviceGetName = nullptr;
  decltype(&::nvmlDeviceGetUUID) DeviceGetUUID = nullptr;
  decltype(&::nvmlDeviceGetMemoryInfo) DeviceGetMemoryInfo = nullptr;
  decltype(&::nvmlDeviceGetPciInfo_v3) DeviceGetPciInfo = nullptr;
  decltype(&::nvmlDeviceGetMigMode) DeviceGetMigMode = nullptr;
  decltype(&::nvmlDeviceGetGpuInstanceProfileInfo) DeviceGetGpuInstanceProfileInfo = nullptr;
  decltype(&::nvmlDeviceGetGpuInstances) DeviceGetGpuInstances = nullptr;
  decltype(&::nvmlDeviceGetGpuInstancePossiblePlacements_v2)
      DeviceGetGpuInstancePossiblePlacements = nullptr;
  decltype(&::nvmlDeviceCreateGpuInstanceWithPlacement) DeviceCreateGpuInstanceWithPlacement =
      nullptr;
  decltype(&::nvmlDeviceGetGpuInstanceById) DeviceGetGpuInstanceById = nullptr;
  decltype(&::nvmlGpuInstanceGetInfo) GpuInstanceGetInfo = nullptr;
  decltype(&::nvmlGpuInstanceGetComputeInstanceProfileInfo)
      GpuInstanceGetComputeInstanceProfileInfo = nullptr;
  decltype(&::nvmlGpuInstanceCreateComputeInstance) GpuInstanceCreateComputeInstance = nullptr;
  decltype(&::nvmlGpuInstanceGetComputeInstances) GpuInstanceGetComputeInstances = nullptr;
  decltype(&::nvmlComputeInstanceDestroy) ComputeInstanceDestroy = nullptr;
  decltype(&::nvmlGpuInstanceDestroy) GpuInstanceDestroy = nullptr;
  decltype(&::nvmlDeviceGetMaxMigDeviceCount) DeviceGetMaxMigDeviceCount = nullptr;
  decltype(&::nvmlDeviceGetMigDeviceHandleByIndex) DeviceGetMigDeviceHandleByIndex = nullptr;
  decltype(&::nvmlDeviceGetGpuInstanceId) DeviceGetGpuInstanceId = nullptr;
  decltype(&::nvmlDeviceGetComputeInstanceId) DeviceGetComputeInstanceId = nullptr;
  decltype(&::nvmlDeviceGetMinorNumber) DeviceGetMinorNumber = nullptr;
  decltype(&::nvmlDeviceGetNvLinkState) DeviceGetNvLinkState = nullptr;
  decltype(&::nvmlDeviceGetNvLinkRemotePciInfo_v2) DeviceGetNvLinkRemotePciInfo = nullptr;
  decltype(&::nvmlDeviceGetCpuAffinity) DeviceGetCpuAffinity = nullptr;
  decltype(&::nvmlDeviceGetNumaNodeId) DeviceGetNumaNodeId = nullptr;
  decltype(&::nvmlDeviceGetGpuFabricInfo) DeviceGetGpuFabricInfo = nullptr;
  decltype(&::nvmlDeviceGetGpuFabricInfoV) DeviceGetGpuFabricInfoV = nullptr;
  decltype(&::nvmlDeviceGetUtilizationRates) DeviceGetUtilizationRates = nullptr;
  decltype(&::nvmlDeviceGetTemperature) DeviceGetTemperature = nullptr;
  decltype(&::nvmlDeviceGetPowerUsage) DeviceGetPowerUsage = nullptr;
  decltype(&::nvmlDeviceGetClockInfo) DeviceGetClockInfo = nullptr;
  decltype(&::nvmlDeviceGetTotalEccErrors) DeviceGetTotalEccErrors = nullptr;
  decltype(&::nvmlEventSetCreate) EventSetCreate = nullptr;
  decltype(&::nvmlDeviceRegisterEvents) DeviceRegisterEvents = nullptr;
  decltype(&::nvmlEventSetWait_v2) EventSetWait = nullptr;
  decltype(&::nvmlEventSetFree) EventSetFree = nullptr;

  // Whether MIG instances can be listed, created and destroyed.
  bool HasMig() const {
    return DeviceGetMigMode && DeviceGetGpuInstanceProfileInfo && DeviceGetGpuInstances &&
           DeviceCreateGpuInstanceWithPlacement && DeviceGetGpuInstanceById &&
           GpuInstanceGetInfo && GpuInstanceCreateComputeInstance &&
           GpuInstanceGetComputeInstances && ComputeInstanceDestroy && GpuInstanceDestroy;
  }
  bool HasMigDevices() const {
    return DeviceGetMaxMigDeviceCount && DeviceGetMigDeviceHandleByIndex &&
           DeviceGetGpuInstanceId;
  }
  // Whether XID events can be received.
  bool HasEvents() const {
    return EventSetCreate && DeviceRegisterEvents && EventSetWait && EventSetFree;
  }
};

// Most events taken off the event set per ReadTelemetry (the rest wait for the next).
inline constexpr int kMaxEventsPerRead = 4096;

template <typename Fn>
void Resolve(void* handle, const char* name, Fn* out) {
  void* symbol = dlsym(handle, name);
  *out = reinterpret_cast<Fn>(symbol);
}

// How NVML's GPU instance profile indexes map onto catalog profiles (by shape, since
// names differ per model: 1g.5gb on an A100-40GB is 1g.10gb on an A100-80GB).
struct ProfileShape {
  unsigned int nvml_index;
  int compute_slices;
  int memory_slots;
  bool media_extensions;
};
inline constexpr ProfileShape kProfileShapes[] = {
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 1, 1, false},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 1, 1, true},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 1, 2, false},
    {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 2, 2, false},
    {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 3, 4, false},
    {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 4, 4, false},
    {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 7, 8, false},
};

inline std::optional<unsigned int> NvmlIndexFor(const MigProfile& p) {
  for (const ProfileShape& s : kProfileShapes) {
    if (s.compute_slices == p.compute_slices && s.memory_slots == p.memory_slots &&
        s.media_extensions == p.media_extensions) {
      return s.nvml_index;
    }
  }
  return std::nullopt;
}

// Catalog profile name for an NVML profile index and placement size, or "".
inline std::string CatalogProfileFor(const GpuModel* model, unsigned int nvml_index, int memory_slots) {
  if (model == nullptr) {
    return "";
  }
  for (const ProfileShape& s : kProfileShapes) {
    if (s.nvml_index != nvml_index || s.memory_slots != memory_slots) {
      continue;
    }
    for (const MigProfile& p : model->mig_profiles) {
      if (p.compute_slices == s.compute_slices && p.memory_slots == s.memory_slots &&
          p.media_extensions == s.media_extensions) {
        return p.name;
      }
    }
  }
  return "";
}

// The compute instance profile that fills a GPU instance of `slices` compute slices.
inline unsigned int ComputeProfileForSlices(unsigned int slices) {
  switch (slices) {
    case 1:
      return NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE;
    case 2:
      return NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE;
    case 3:
      return NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE;
    case 4:
      return NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE;
    case 6:
      return NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE;
    case 8:
      return NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE;
    default:
      return NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE;
  }
}

// "00000000:07:00.0" and "0000:07:00.0" -> "0000:07:00.0" (sysfs spelling).
inline std::string NormalizeBusId(std::string_view bus_id) {
  std::string text(Trim(bus_id));
  unsigned int domain = 0;
  unsigned int bus = 0;
  unsigned int device = 0;
  unsigned int function = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%x:%x:%x.%x%c", &domain, &bus, &device, &function, &tail) == 4) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", domain, bus, device, function);
    return buf;
  }
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

inline std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return std::nullopt;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

inline std::string CString(const char* buf, size_t size) {
  return std::string(buf, strnlen(buf, size));
}

// Union-find over string keys (PCI bus ids of GPUs and of whatever their links reach).
class Components {
 public:
  std::string Find(const std::string& key) {
    auto it = parent_.find(key);
    if (it == parent_.end()) {
      parent_[key] = key;
      return key;
    }
    if (it->second == key) {
      return key;
    }
    std::string root = Find(it->second);
    parent_[key] = root;
    return root;
  }
  void Join(const std::string& a, const std::string& b) {
    std::string ra = Find(a);
    std::string rb = Find(b);
    if (ra != rb) {
      parent_[ra] = rb;
    }
  }

 private:
  std::map<std::string, std::string> parent_;
};

// One GPU instance on a device, as NVML reports it.
struct GpuInstanceRecord {
  nvmlGpuInstance_t handle = nullptr;
  unsigned int id = 0;
  unsigned int nvml_index = 0;  // profile index (NVML_GPU_INSTANCE_PROFILE_*)
  unsigned int compute_slices = 0;
  int start = 0;
  int memory_slots = 0;
  std::string profile;  // catalog name, "" when the catalog has none
};

// Normalised PCI bus ids of whatever the device's active NVLinks reach.
std::vector<std::string> NvLinkPeers(const NvmlApi& api, nvmlDevice_t device);
// Sets each GPU's nvlink_domain: GPUs joined by NVLinks, in components of two or more.
void AssignNvLinkDomains(const std::vector<std::string>& bus_ids,
                         const std::vector<std::vector<std::string>>& peers,
                         std::vector<DiscoveredGpu>* gpus);
// The GPU's NUMA node (sysfs, else NVML) and its CPUs (NVML's affinity, else the node's
// cpulist under `sysfs_root`).
void PlaceOnNuma(const NvmlApi& api, const std::string& sysfs_root, nvmlDevice_t device,
                 const std::string& bus_id, DiscoveredGpu* gpu);
// The GPU's NVLink fabric as "<clusterUuid>/<cliqueId>" (the V call, else the v1 one),
// "" when neither exists, the driver answers NOT_SUPPORTED or anything else than a
// completed registration, or the cluster UUID is all zeros.
std::string FabricDomain(const NvmlApi& api, nvmlDevice_t device);

}  // namespace tessera::nvml_internal
