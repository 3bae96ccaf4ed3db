#include <algorithm>
#include <cstdio>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/gpu/nvml_backend_internal.h"
#include "base/strings.h"

namespace tessera::nvml_internal {

std::vector<std::string> NvLinkPeers(const NvmlApi& api_, nvmlDevice_t device) {
  std::vector<std::string> peers;
  if (!api_.DeviceGetNvLinkState || !api_.DeviceGetNvLinkRemotePciInfo) {
    return peers;
  }
  for (unsigned int link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
    nvmlEnableState_t active = NVML_FEATURE_DISABLED;
    nvmlReturn_t r = api_.DeviceGetNvLinkState(device, link, &active);
    if (r == NVML_ERROR_NOT_SUPPORTED && link == 0) {
      break;  // no NVLink on this GPU
    }
    if (r != NVML_SUCCESS || active != NVML_FEATURE_ENABLED) {
      continue;
    }
    nvmlPciInfo_t pci = {};
    if (api_.DeviceGetNvLinkRemotePciInfo(device, link, &pci) != NVML_SUCCESS) {
      continue;
    }
    std::string peer = NormalizeBusId(CString(pci.busId, sizeof(pci.busId)));
    if (!peer.empty()) {
      peers.push_back(std::move(peer));
    }
  }
  return peers;
}

void AssignNvLinkDomains(const std::vector<std::string>& bus_ids,
                         const std::vector<std::vector<std::string>>& peers,
                         std::vector<DiscoveredGpu>* gpus) {
  Components components;
  for (size_t i = 0; i < gpus->size(); ++i) {
    if (bus_ids[i].empty()) {
      continue;
    }
    for (const std::string& peer : peers[i]) {
      components.Join(bus_ids[i], peer);
    }
  }
  // Count the GPUs per component; only components of two or more GPUs are domains.
  std::map<std::string, int> members;
  for (size_t i = 0; i < gpus->size(); ++i) {
    if (!bus_ids[i].empty() && !peers[i].empty()) {
      ++members[components.Find(bus_ids[i])];
    }
  }
  std::map<std::string, int> domain_of;
  for (size_t i = 0; i < gpus->size(); ++i) {
    if (bus_ids[i].empty() || peers[i].empty()) {
      continue;
    }
    std::string root = components.Find(bus_ids[i]);
    if (members[root] < 2) {
      continue;
    }
    auto [it, inserted] = domain_of.emplace(root, static_cast<int>(domain_of.size()));
    (*gpus)[i].nvlink_domain = it->second;
  }
}

void PlaceOnNuma(const NvmlApi& api_, const std::string& sysfs_root_, nvmlDevice_t device,
                 const std::string& bus_id, DiscoveredGpu* gpu) {
  std::optional<int> numa;
  if (!bus_id.empty()) {
    auto text = ReadFile(sysfs_root_ + "/bus/pci/devices/" + bus_id + "/numa_node");
    if (text) {
      auto value = ParseInt64(*text);
      if (value.ok() && *value >= 0 && *value < 4096) {
        numa = static_cast<int>(*value);
      }
    }
  }
  if (!numa && api_.DeviceGetNumaNodeId) {
    unsigned int node = 0;
    if (api_.DeviceGetNumaNodeId(device, &node) == NVML_SUCCESS && node < 4096) {
      numa = static_cast<int>(node);
    }
  }
  gpu->numa_node = numa.value_or(0);

  if (api_.DeviceGetCpuAffinity) {
    constexpr unsigned int kWords = 16;  // 1024 CPUs
    unsigned long set[kWords] = {};
    if (api_.DeviceGetCpuAffinity(device, kWords, set) == NVML_SUCCESS) {
      constexpr int kBits = static_cast<int>(8 * sizeof(unsigned long));
      for (int w = 0; w < static_cast<int>(kWords); ++w) {
        for (int b = 0; b < kBits; ++b) {
          if ((set[w] >> b) & 1UL) {
            gpu->cpus.push_back(w * kBits + b);
          }
        }
      }
    }
  }
  if (gpu->cpus.empty() && numa) {
    auto text = ReadFile(sysfs_root_ + "/devices/system/node/node" + std::to_string(*numa) +
                         "/cpulist");
    if (text && !Trim(*text).empty()) {
      auto cpus = ParseIntList(Trim(*text));
      if (cpus.ok()) {
        for (int64_t c : *cpus) {
          gpu->cpus.push_back(static_cast<int>(c));
        }
      }
    }
  }
}

namespace {

std::string FormatFabric(const unsigned char (&uuid)[NVML_GPU_FABRIC_UUID_LEN],
                         unsigned int clique) {
  if (std::all_of(std::begin(uuid), std::end(uuid), [](unsigned char b) { return b == 0; })) {
    return "";
  }
  std::string out;
  char hex[3];
  for (unsigned int i = 0; i < NVML_GPU_FABRIC_UUID_LEN; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) {
      out += '-';
    }
    std::snprintf(hex, sizeof(hex), "%02x", uuid[i]);
    out += hex;
  }
  return out + "/" + std::to_string(clique);
}

}  // namespace

std::string FabricDomain(const NvmlApi& api_, nvmlDevice_t device) {
  if (api_.DeviceGetGpuFabricInfoV) {
    nvmlGpuFabricInfo_v2_t info = {};
    info.version = nvmlGpuFabricInfo_v2;
    if (api_.DeviceGetGpuFabricInfoV(device, &info) != NVML_SUCCESS ||
        info.state != NVML_GPU_FABRIC_STATE_COMPLETED || info.status != NVML_SUCCESS) {
      return "";
    }
    return FormatFabric(info.clusterUuid, info.cliqueId);
  }
  if (api_.DeviceGetGpuFabricInfo) {
    nvmlGpuFabricInfo_t info = {};
    if (api_.DeviceGetGpuFabricInfo(device, &info) != NVML_SUCCESS ||
        info.state != NVML_GPU_FABRIC_STATE_COMPLETED || info.status != NVML_SUCCESS) {
      return "";
    }
    return FormatFabric(info.clusterUuid, info.cliqueId);
  }
  return "";
}

}  // namespace tessera::nvml_internal
