#include "agent/gpu/nvml_backend.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "agent/gpu/nvml_api.h"
#include "agent/gpu/nvml_backend_internal.h"
#include "base/strings.h"

namespace tessera {
namespace {

using namespace nvml_internal;  // NOLINT: the backend's own helpers

class NvmlBackend : public GpuBackend {
 public:
  NvmlBackend(const GpuCatalog& catalog, void* library, NvmlApi api, std::string sysfs_root)
      : catalog_(catalog), library_(library), api_(api), sysfs_root_(std::move(sysfs_root)) {}

  ~NvmlBackend() override {
    if (event_set_ != nullptr) {
      api_.EventSetFree(event_set_);
    }
    api_.Shutdown();
    dlclose(library_);
  }

  NvmlBackend(const NvmlBackend&) = delete;
  NvmlBackend& operator=(const NvmlBackend&) = delete;

  // Builds the description once NVML is initialised.
  void Init() {
    std::string driver = "unknown";
    std::string nvml = "unknown";
    char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
    if (api_.SystemGetDriverVersion &&
        api_.SystemGetDriverVersion(buf, sizeof(buf)) == NVML_SUCCESS) {
      driver = CString(buf, sizeof(buf));
    }
    char vbuf[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE] = {};
    if (api_.SystemGetNVMLVersion &&
        api_.SystemGetNVMLVersion(vbuf, sizeof(vbuf)) == NVML_SUCCESS) {
      nvml = CString(vbuf, sizeof(vbuf));
    }
    unsigned int count = 0;
    if (api_.DeviceGetCount(&count) != NVML_SUCCESS) {
      count = 0;
    }
    description_ = "NVML " + nvml + " driver " + driver + ", " + std::to_string(count) +
                   (count == 1 ? " GPU" : " GPUs");
    RegisterXidEvents(count);
  }

  std::string Describe() const override { return description_; }

  StatusOr<std::vector<DiscoveredGpu>> Discover() override {
    unsigned int count = 0;
    nvmlReturn_t r = api_.DeviceGetCount(&count);
    if (r != NVML_SUCCESS) {
      return FromNvml(r, "nvmlDeviceGetCount");
    }
    std::vector<DiscoveredGpu> gpus;
    std::vector<std::string> bus_ids(count);
    std::vector<std::vector<std::string>> link_peers(count);
    for (unsigned int i = 0; i < count; ++i) {
      TESSERA_ASSIGN_OR_RETURN(nvmlDevice_t device, Handle(static_cast<int>(i)));
      DiscoveredGpu gpu;
      gpu.index = static_cast<int>(i);
      unsigned int minor = 0;
      if (api_.DeviceGetMinorNumber && api_.DeviceGetMinorNumber(device, &minor) == NVML_SUCCESS) {
        gpu.minor = static_cast<int>(minor);
      }
      TESSERA_ASSIGN_OR_RETURN(gpu.product_name, Name(device));
      TESSERA_ASSIGN_OR_RETURN(gpu.uuid, Uuid(device));
      TESSERA_ASSIGN_OR_RETURN(gpu.memory_mib, MemoryMib(device));
      const GpuModel* model = ModelOf(gpu.product_name, gpu.memory_mib);
      if (model != nullptr) {
        gpu.model = model->id;
      }
      gpu.mig_enabled = MigEnabled(device);
      gpu.mode = gpu.mig_enabled ? SharingMode::kMig : SharingMode::kExclusive;
      if (gpu.mig_enabled) {
        TESSERA_ASSIGN_OR_RETURN(std::vector<GpuInstanceRecord> instances,
                                 ListGpuInstances(device, model));
        std::map<unsigned int, std::string> uuids = MigDeviceUuids(device);
        std::map<unsigned int, int> cis = ComputeInstanceIds(device);
        for (const GpuInstanceRecord& gi : instances) {
          MigInstanceInfo info;
          auto it = uuids.find(gi.id);
          info.uuid = it != uuids.end() ? it->second : GpuInstanceUuid(gpu.uuid, gi.id);
          info.gpu_instance = static_cast<int>(gi.id);
          info.compute_instance = cis.count(gi.id) > 0 ? cis[gi.id] : -1;
          info.profile = gi.profile.empty()
                             ? "nvml-profile-" + std::to_string(gi.nvml_index)
                             : gi.profile;
          info.start = gi.start;
          gpu.mig_instances.push_back(std::move(info));
        }
      }
      nvmlPciInfo_t pci = {};
      if (api_.DeviceGetPciInfo && api_.DeviceGetPciInfo(device, &pci) == NVML_SUCCESS) {
        bus_ids[i] = NormalizeBusId(CString(pci.busId, sizeof(pci.busId)));
      }
      link_peers[i] = NvLinkPeers(api_, device);
      PlaceOnNuma(api_, sysfs_root_, device, bus_ids[i], &gpu);
      gpu.fabric_domain = FabricDomain(api_, device);
      gpus.push_back(std::move(gpu));
    }
    AssignNvLinkDomains(bus_ids, link_peers, &gpus);
    return gpus;
  }

  StatusOr<MigInstanceInfo> CreateMigInstance(int gpu_index, std::string_view profile_name,
                                              int start) override {
    TESSERA_ASSIGN_OR_RETURN(nvmlDevice_t device, Handle(gpu_index));
    const std::string where = "GPU " + std::to_string(gpu_index);
    if (!api_.HasMig()) {
      return FailedPreconditionError(where + ": this NVML library has no MIG functions");
    }
    if (!MigEnabled(device)) {
      return FailedPreconditionError(where + " is not in MIG mode");
    }
    TESSERA_ASSIGN_OR_RETURN(std::string name, Name(device));
    TESSERA_ASSIGN_OR_RETURN(int64_t memory_mib, MemoryMib(device));
    const GpuModel* model = ModelOf(name, memory_mib);
    if (model == nullptr) {
      return FailedPreconditionError(where + " ('" + name +
                                     "') is not a catalogued model; its MIG profiles are unknown");
    }
    TESSERA_ASSIGN_OR_RETURN(std::vector<GpuInstanceRecord> existing,
                             ListGpuInstances(device, model));
    std::vector<MigSlotUse> uses;
    for (const GpuInstanceRecord& gi : existing) {
      uses.push_back({gi.start, gi.memory_slots, static_cast<int>(gi.compute_slices), gi.profile});
    }
    TESSERA_RETURN_IF_ERROR(CheckMigPlacement(*model, profile_name, start, uses));
    const MigProfile& profile =
        model->mig_profiles[static_cast<size_t>(*model->FindMigProfile(profile_name))];
    std::optional<unsigned int> nvml_index = NvmlIndexFor(profile);
    if (!nvml_index) {
      return InvalidArgumentError(where + ": MIG profile " + profile.name +
                                  " has no NVML equivalent");
    }
    nvmlGpuInstanceProfileInfo_t info = {};
    nvmlReturn_t r = api_.DeviceGetGpuInstanceProfileInfo(device, *nvml_index, &info);
    if (r != NVML_SUCCESS) {
      return InvalidArgumentError(where + ": the driver does not offer MIG profile " +
                                  profile.name + " (" + ErrorText(r) + ")");
    }
    if (api_.DeviceGetGpuInstancePossiblePlacements) {
      std::vector<nvmlGpuInstancePlacement_t> placements(kMigMemorySlots);
      unsigned int n = static_cast<unsigned int>(placements.size());
      r = api_.DeviceGetGpuInstancePossiblePlacements(device, info.id, placements.data(), &n);
      if (r == NVML_SUCCESS) {
        placements.resize(std::min<size_t>(n, placements.size()));
        bool legal = std::any_of(placements.begin(), placements.end(), [&](const auto& p) {
          return static_cast<int>(p.start) == start;
        });
        if (!legal) {
          std::vector<std::string> starts;
          for (const auto& p : placements) {
            starts.push_back(std::to_string(p.start));
          }
          return InvalidArgumentError(where + ": the driver does not place MIG profile " +
                                      profile.name + " at slot " + std::to_string(start) +
                                      "; legal starts: " + Join(starts, ","));
        }
      }
    }
    nvmlGpuInstancePlacement_t placement = {static_cast<unsigned int>(start),
                                            static_cast<unsigned int>(profile.memory_slots)};
    nvmlGpuInstance_t gi = nullptr;
    r = api_.DeviceCreateGpuInstanceWithPlacement(device, info.id, &placement, &gi);
    if (r != NVML_SUCCESS) {
      return FromNvml(r, where + ": creating a " + profile.name + " GPU instance at slot " +
                             std::to_string(start));
    }
    nvmlGpuInstanceInfo_t gi_info = {};
    r = api_.GpuInstanceGetInfo(gi, &gi_info);
    if (r != NVML_SUCCESS) {
      Status status = FromNvml(r, where + ": reading the new GPU instance");
      api_.GpuInstanceDestroy(gi);
      return status;
    }
    unsigned int ci_profile = ComputeProfileForSlices(info.sliceCount);
    unsigned int ci_profile_id = ci_profile;
    nvmlComputeInstanceProfileInfo_t ci_info = {};
    if (api_.GpuInstanceGetComputeInstanceProfileInfo &&
        api_.GpuInstanceGetComputeInstanceProfileInfo(
            gi, ci_profile, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &ci_info) ==
            NVML_SUCCESS) {
      ci_profile_id = ci_info.id;
    }
    nvmlComputeInstance_t ci = nullptr;
    r = api_.GpuInstanceCreateComputeInstance(gi, ci_profile_id, &ci);
    if (r != NVML_SUCCESS) {
      Status status = FromNvml(r, where + ": creating the compute instance of a " +
                                      profile.name + " GPU instance");
      nvmlReturn_t undo = api_.GpuInstanceDestroy(gi);
      if (undo != NVML_SUCCESS) {
        return InternalError(status.message() + "; destroying the GPU instance again failed: " +
                             ErrorText(undo));
      }
      return status;
    }
    TESSERA_ASSIGN_OR_RETURN(std::string gpu_uuid, Uuid(device));
    std::map<unsigned int, std::string> uuids = MigDeviceUuids(device);
    MigInstanceInfo out;
    auto it = uuids.find(gi_info.id);
    out.uuid = it != uuids.end() ? it->second : GpuInstanceUuid(gpu_uuid, gi_info.id);
    out.profile = profile.name;
    out.start = static_cast<int>(gi_info.placement.start);
    out.gpu_instance = static_cast<int>(gi_info.id);
    std::map<unsigned int, int> cis = ComputeInstanceIds(device);
    out.compute_instance = cis.count(gi_info.id) > 0 ? cis[gi_info.id] : -1;
    return out;
  }

  StatusOr<std::vector<GpuTelemetry>> ReadTelemetry() override {
    unsigned int count = 0;
    nvmlReturn_t r = api_.DeviceGetCount(&count);
    if (r != NVML_SUCCESS) {
      return FromNvml(r, "nvmlDeviceGetCount");
    }
    if (xid_counts_.size() < count) {
      xid_counts_.resize(count, 0);
      last_xids_.resize(count, 0);
      uuids_.resize(count);
    }
    DrainXidEvents();
    std::vector<GpuTelemetry> out;
    out.reserve(count);
    for (unsigned int i = 0; i < count; ++i) {
      out.push_back(SampleGpu(i));
    }
    return out;
  }

  Status DestroyMigInstance(int gpu_index, std::string_view uuid) override {
    TESSERA_ASSIGN_OR_RETURN(nvmlDevice_t device, Handle(gpu_index));
    const std::string where = "GPU " + std::to_string(gpu_index);
    if (!api_.HasMig()) {
      return FailedPreconditionError(where + ": this NVML library has no MIG functions");
    }
    TESSERA_ASSIGN_OR_RETURN(std::string gpu_uuid, Uuid(device));
    std::optional<unsigned int> gi_id;
    const std::string own_prefix = "MIG-" + gpu_uuid + "/";
    if (StartsWith(uuid, own_prefix)) {
      // "MIG-<gpu uuid>/<gi>" or the older "MIG-GPU-<uuid>/<gi>/<ci>".
      std::string_view rest = uuid.substr(own_prefix.size());
      auto id = ParseInt64(rest.substr(0, rest.find('/')));
      if (id.ok() && *id >= 0) {
        gi_id = static_cast<unsigned int>(*id);
      }
    } else {
      for (const auto& [id, mig_uuid] : MigDeviceUuids(device)) {
        if (mig_uuid == uuid) {
          gi_id = id;
        }
      }
    }
    const std::string not_found =
        where + " has no MIG instance '" + std::string(uuid) + "'";
    if (!gi_id) {
      return NotFoundError(not_found);
    }
    nvmlGpuInstance_t gi = nullptr;
    nvmlReturn_t r = api_.DeviceGetGpuInstanceById(device, *gi_id, &gi);
    if (r == NVML_ERROR_NOT_FOUND || r == NVML_ERROR_INVALID_ARGUMENT) {
      return NotFoundError(not_found);
    }
    if (r != NVML_SUCCESS) {
      return FromNvml(r, where + ": looking up GPU instance " + std::to_string(*gi_id));
    }
    for (unsigned int p = 0; p < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; ++p) {
      unsigned int profile_id = p;
      nvmlComputeInstanceProfileInfo_t ci_info = {};
      if (api_.GpuInstanceGetComputeInstanceProfileInfo) {
        if (api_.GpuInstanceGetComputeInstanceProfileInfo(
                gi, p, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &ci_info) != NVML_SUCCESS) {
          continue;
        }
        profile_id = ci_info.id;
      }
      std::vector<nvmlComputeInstance_t> cis(kMigComputeSlices + 1);
      unsigned int n = static_cast<unsigned int>(cis.size());
      if (api_.GpuInstanceGetComputeInstances(gi, profile_id, cis.data(), &n) != NVML_SUCCESS) {
        continue;
      }
      for (unsigned int k = 0; k < n && k < cis.size(); ++k) {
        r = api_.ComputeInstanceDestroy(cis[k]);
        if (r != NVML_SUCCESS) {
          return FromNvml(r, where + ": destroying a compute instance of " + std::string(uuid));
        }
      }
    }
    r = api_.GpuInstanceDestroy(gi);
    if (r != NVML_SUCCESS) {
      return FromNvml(r, where + ": destroying MIG instance " + std::string(uuid));
    }
    return Status::Ok();
  }

 private:
  // Registers every GPU for XID events on one event set; a GPU (or driver) that does
  // not offer them simply reports none.
  void RegisterXidEvents(unsigned int count) {
    if (!api_.HasEvents() || api_.EventSetCreate(&event_set_) != NVML_SUCCESS) {
      event_set_ = nullptr;
      return;
    }
    event_devices_.assign(count, nullptr);
    for (unsigned int i = 0; i < count; ++i) {
      nvmlDevice_t device = nullptr;
      if (api_.DeviceGetHandleByIndex(i, &device) == NVML_SUCCESS &&
          api_.DeviceRegisterEvents(device, nvmlEventTypeXidCriticalError, event_set_) ==
              NVML_SUCCESS) {
        event_devices_[i] = device;
      }
    }
  }

  // Takes the pending events off the event set without waiting, counting XIDs per GPU.
  void DrainXidEvents() {
    if (event_set_ == nullptr) {
      return;
    }
    for (int n = 0; n < kMaxEventsPerRead; ++n) {
      nvmlEventData_t data = {};
      if (api_.EventSetWait(event_set_, &data, 0) != NVML_SUCCESS) {
        return;  // NVML_ERROR_TIMEOUT: nothing left
      }
      if ((data.eventType & nvmlEventTypeXidCriticalError) == 0) {
        continue;
      }
      for (size_t i = 0; i < event_devices_.size() && i < xid_counts_.size(); ++i) {
        if (event_devices_[i] != nullptr && event_devices_[i] == data.device) {
          ++xid_counts_[i];
          last_xids_[i] = static_cast<int>(
              std::min<unsigned long long>(data.eventData, std::numeric_limits<int>::max()));
        }
      }
    }
  }

  // One GPU's sample; lost=true when the driver cannot reach it.
  GpuTelemetry SampleGpu(unsigned int index) {
    GpuTelemetry t;
    t.index = static_cast<int>(index);
    bool lost = false;
    // Whether `r` is a success; notes a lost GPU. Other failures leave the reading 0.
    auto ok = [&lost](nvmlReturn_t r) {
      if (r == NVML_ERROR_GPU_IS_LOST) {
        lost = true;
      }
      return r == NVML_SUCCESS;
    };
    nvmlDevice_t device = nullptr;
    if (!ok(api_.DeviceGetHandleByIndex(index, &device)) || device == nullptr) {
      lost = true;
    }
    if (!lost) {
      char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
      if (ok(api_.DeviceGetUUID(device, buf, sizeof(buf)))) {
        uuids_[index] = CString(buf, sizeof(buf));
      }
      nvmlMemory_t memory = {};
      if (ok(api_.DeviceGetMemoryInfo(device, &memory))) {
        t.fb_used_mib = static_cast<int64_t>(memory.used >> 20);
        t.fb_free_mib = static_cast<int64_t>(memory.free >> 20);
      }
      if (api_.DeviceGetUtilizationRates) {
        nvmlUtilization_t util = {};
        if (ok(api_.DeviceGetUtilizationRates(device, &util))) {
          t.util_pct = static_cast<int>(std::min(util.gpu, 100u));
        }
      }
      unsigned int value = 0;
      if (api_.DeviceGetTemperature &&
          ok(api_.DeviceGetTemperature(device, NVML_TEMPERATURE_GPU, &value))) {
        t.temp_c = static_cast<int>(std::min<unsigned int>(value, 1000));
      }
      if (api_.DeviceGetPowerUsage && ok(api_.DeviceGetPowerUsage(device, &value))) {
        t.power_mw = value;
      }
      if (api_.DeviceGetClockInfo && ok(api_.DeviceGetClockInfo(device, NVML_CLOCK_SM, &value))) {
        t.sm_clock_mhz = static_cast<int>(std::min<unsigned int>(
            value, static_cast<unsigned int>(std::numeric_limits<int>::max())));
      }
      if (api_.DeviceGetTotalEccErrors) {
        // NOT_SUPPORTED (no ECC, or ECC off) leaves the counters at 0.
        const std::pair<std::pair<nvmlMemoryErrorType_t, nvmlEccCounterType_t>, int64_t*>
            counters[] = {
                {{NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC}, &t.ecc_sbe_volatile},
                {{NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC}, &t.ecc_dbe_volatile},
                {{NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC}, &t.ecc_sbe_aggregate},
                {{NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC}, &t.ecc_dbe_aggregate},
            };
        for (const auto& [kind, out] : counters) {
          unsigned long long n = 0;
          if (ok(api_.DeviceGetTotalEccErrors(device, kind.first, kind.second, &n))) {
            *out = static_cast<int64_t>(
                std::min<unsigned long long>(n, std::numeric_limits<int64_t>::max()));
          }
        }
      }
      if (!lost && MigEnabled(device)) {
        t.mig = MigSamples(index, device, &lost);
      }
    }
    if (lost) {
      t = GpuTelemetry{};
      t.index = static_cast<int>(index);
      t.lost = true;
    }
    t.uuid = uuids_[index];
    t.xid_count = xid_counts_[index];
    t.last_xid = last_xids_[index];
    return t;
  }

  // The MIG instances of a GPU in MIG mode, ascending start slot.
  std::vector<MigTelemetry> MigSamples(unsigned int index, nvmlDevice_t device, bool* lost) {
    std::vector<MigTelemetry> out;
    const GpuModel* model = nullptr;
    auto cached = models_.find(index);
    if (cached != models_.end()) {
      model = cached->second;
    } else {
      auto name = Name(device);
      auto memory = MemoryMib(device);
      if (name.ok() && memory.ok()) {
        model = ModelOf(*name, *memory);
        models_[index] = model;
      }
    }
    StatusOr<std::vector<GpuInstanceRecord>> instances = ListGpuInstances(device, model);
    if (!instances.ok()) {
      if (instances.status().code() == StatusCode::kUnavailable) {
        *lost = true;
      }
      return out;
    }
    std::map<unsigned int, nvmlDevice_t> mig_devices = MigDevices(device);
    for (const GpuInstanceRecord& gi : *instances) {
      MigTelemetry m;
      m.profile = gi.profile.empty() ? "nvml-profile-" + std::to_string(gi.nvml_index) : gi.profile;
      m.start = gi.start;
      m.gi_id = static_cast<int>(gi.id);
      auto it = mig_devices.find(gi.id);
      if (it != mig_devices.end()) {
        auto uuid = Uuid(it->second);
        m.uuid = uuid.ok() ? *uuid : GpuInstanceUuid(uuids_[index], gi.id);
        nvmlMemory_t memory = {};
        nvmlReturn_t r = api_.DeviceGetMemoryInfo(it->second, &memory);
        if (r == NVML_SUCCESS) {
          m.fb_used_mib = static_cast<int64_t>(memory.used >> 20);
          m.fb_free_mib = static_cast<int64_t>(memory.free >> 20);
        } else if (r == NVML_ERROR_GPU_IS_LOST) {
          *lost = true;
        }
      } else {
        m.uuid = GpuInstanceUuid(uuids_[index], gi.id);  // no compute instance: no MIG device
      }
      out.push_back(std::move(m));
    }
    return out;
  }

  std::string ErrorText(nvmlReturn_t r) const {
    const char* text = api_.ErrorString ? api_.ErrorString(r) : nullptr;
    return std::string(text != nullptr ? text : "error") + " (NVML error " + std::to_string(r) +
           ")";
  }

  Status FromNvml(nvmlReturn_t r, const std::string& context) const {
    std::string message = context + ": " + ErrorText(r);
    switch (r) {
      case NVML_ERROR_INVALID_ARGUMENT:
        return InvalidArgumentError(message);
      case NVML_ERROR_NOT_FOUND:
        return NotFoundError(message);
      case NVML_ERROR_NO_PERMISSION:
        return PermissionDeniedError(message);
      case NVML_ERROR_NOT_SUPPORTED:
      case NVML_ERROR_IN_USE:
      case NVML_ERROR_INSUFFICIENT_RESOURCES:
        return FailedPreconditionError(message);
      case NVML_ERROR_UNINITIALIZED:
      case NVML_ERROR_DRIVER_NOT_LOADED:
      case NVML_ERROR_GPU_IS_LOST:
        return UnavailableError(message);
      default:
        return InternalError(message);
    }
  }

  StatusOr<nvmlDevice_t> Handle(int index) const {
    unsigned int count = 0;
    nvmlReturn_t r = api_.DeviceGetCount(&count);
    if (r != NVML_SUCCESS) {
      return FromNvml(r, "nvmlDeviceGetCount");
    }
    if (index < 0 || static_cast<unsigned int>(index) >= count) {
      return InvalidArgumentError("no GPU " + std::to_string(index) + "; the node has " +
                                  std::to_string(count));
    }
    nvmlDevice_t device = nullptr;
    r = api_.DeviceGetHandleByIndex(static_cast<unsigned int>(index), &device);
    if (r != NVML_SUCCESS) {
      return FromNvml(r, "GPU " + std::to_string(index) + ": nvmlDeviceGetHandleByIndex");
    }
    return device;
  }

  StatusOr<std::string> Name(nvmlDevice_t device) const {
    char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
    nvmlReturn_t r = api_.DeviceGetName(device, buf, sizeof(buf));
    if (r != NVML_SUCCESS) {
      return FromNvml(r, "nvmlDeviceGetName");
    }
    return CString(buf, sizeof(buf));
  }

  StatusOr<std::string> Uuid(nvmlDevice_t device) const {
    char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    nvmlReturn_t r = api_.DeviceGetUUID(device, buf, sizeof(buf));
    if (r != NVML_SUCCESS) {
      return FromNvml(r, "nvmlDeviceGetUUID");
    }
    return CString(buf, sizeof(buf));
  }

  StatusOr<int64_t> MemoryMib(nvmlDevice_t device) const {
    nvmlMemory_t memory = {};
    nvmlReturn_t r = api_.DeviceGetMemoryInfo(device, &memory);
    if (r != NVML_SUCCESS) {
      return FromNvml(r, "nvmlDeviceGetMemoryInfo");
    }
    return static_cast<int64_t>(memory.total >> 20);
  }

  const GpuModel* ModelOf(const std::string& name, int64_t memory_mib) const {
    auto id = MatchCatalogModel(name, memory_mib, catalog_);
    return id.ok() ? &catalog_.Get(*id) : nullptr;
  }

  bool MigEnabled(nvmlDevice_t device) const {
    if (!api_.DeviceGetMigMode) {
      return false;
    }
    unsigned int current = NVML_DEVICE_MIG_DISABLE;
    unsigned int pending = NVML_DEVICE_MIG_DISABLE;
    return api_.DeviceGetMigMode(device, &current, &pending) == NVML_SUCCESS &&
           current == NVML_DEVICE_MIG_ENABLE;
  }

  // Every GPU instance on `device`, ascending start slot.
  StatusOr<std::vector<GpuInstanceRecord>> ListGpuInstances(nvmlDevice_t device,
                                                            const GpuModel* model) const {
    std::vector<GpuInstanceRecord> out;
    if (!api_.HasMig()) {
      return out;
    }
    std::set<unsigned int> seen;  // drivers may list one instance under two profile indexes
    for (unsigned int p = 0; p < kNvmlGpuInstanceProfileProbeCount; ++p) {
      nvmlGpuInstanceProfileInfo_t info = {};
      if (api_.DeviceGetGpuInstanceProfileInfo(device, p, &info) != NVML_SUCCESS) {
        continue;
      }
      std::vector<nvmlGpuInstance_t> handles(std::max(info.instanceCount, 8u));
      unsigned int n = static_cast<unsigned int>(handles.size());
      nvmlReturn_t r = api_.DeviceGetGpuInstances(device, info.id, handles.data(), &n);
      if (r != NVML_SUCCESS) {
        continue;
      }
      for (unsigned int k = 0; k < n && k < handles.size(); ++k) {
        nvmlGpuInstanceInfo_t gi = {};
        r = api_.GpuInstanceGetInfo(handles[k], &gi);
        if (r != NVML_SUCCESS) {
          return FromNvml(r, "nvmlGpuInstanceGetInfo");
        }
        if (!seen.insert(gi.id).second) {
          continue;
        }
        GpuInstanceRecord rec;
        rec.handle = handles[k];
        rec.id = gi.id;
        rec.nvml_index = p;
        rec.compute_slices = info.sliceCount;
        rec.start = static_cast<int>(gi.placement.start);
        rec.memory_slots = static_cast<int>(gi.placement.size);
        rec.profile = CatalogProfileFor(model, p, rec.memory_slots);
        out.push_back(std::move(rec));
      }
    }
    std::sort(out.begin(), out.end(), [](const GpuInstanceRecord& a, const GpuInstanceRecord& b) {
      return a.start < b.start;
    });
    return out;
  }

  // GPU instance id -> its (first) MIG device.
  std::map<unsigned int, nvmlDevice_t> MigDevices(nvmlDevice_t device) const {
    std::map<unsigned int, nvmlDevice_t> out;
    if (!api_.HasMigDevices()) {
      return out;
    }
    unsigned int max = 0;
    if (api_.DeviceGetMaxMigDeviceCount(device, &max) != NVML_SUCCESS) {
      return out;
    }
    for (unsigned int i = 0; i < max; ++i) {
      nvmlDevice_t mig = nullptr;
      if (api_.DeviceGetMigDeviceHandleByIndex(device, i, &mig) != NVML_SUCCESS) {
        continue;
      }
      unsigned int gi_id = 0;
      if (api_.DeviceGetGpuInstanceId(mig, &gi_id) != NVML_SUCCESS) {
        continue;
      }
      out.emplace(gi_id, mig);
    }
    return out;
  }

  // GPU instance id -> the compute instance id of its (first) MIG device.
  std::map<unsigned int, int> ComputeInstanceIds(nvmlDevice_t device) const {
    std::map<unsigned int, int> out;
    if (api_.DeviceGetComputeInstanceId == nullptr) {
      return out;
    }
    for (const auto& [gi_id, mig] : MigDevices(device)) {
      unsigned int ci_id = 0;
      if (api_.DeviceGetComputeInstanceId(mig, &ci_id) == NVML_SUCCESS) {
        out.emplace(gi_id, static_cast<int>(ci_id));
      }
    }
    return out;
  }

  // GPU instance id -> UUID of its (first) MIG device.
  std::map<unsigned int, std::string> MigDeviceUuids(nvmlDevice_t device) const {
    std::map<unsigned int, std::string> out;
    for (const auto& [gi_id, mig] : MigDevices(device)) {
      auto uuid = Uuid(mig);
      if (uuid.ok()) {
        out.emplace(gi_id, *uuid);
      }
    }
    return out;
  }

  static std::string GpuInstanceUuid(const std::string& gpu_uuid, unsigned int gi_id) {
    return "MIG-" + gpu_uuid + "/" + std::to_string(gi_id);
  }

  const GpuCatalog& catalog_;
  void* library_;
  NvmlApi api_;
  std::string sysfs_root_;
  std::string description_;
  // Telemetry state, by GPU index.
  nvmlEventSet_t event_set_ = nullptr;       // null: no XID events (old driver)
  std::vector<nvmlDevice_t> event_devices_;  // registered for XIDs; null: not registered
  std::vector<int64_t> xid_counts_;
  std::vector<int> last_xids_;
  std::vector<std::string> uuids_;  // last UUID read, reported for a lost GPU
  std::map<unsigned int, const GpuModel*> models_;
};

}  // namespace

StatusOr<std::unique_ptr<GpuBackend>> LoadNvmlBackend(const GpuCatalog& catalog,
                                                      const NvmlBackendOptions& options) {
  dlerror();
  void* library = dlopen(options.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    return UnavailableError("cannot load NVML library '" + options.library +
                            "': " + (why != nullptr ? why : "unknown error") +
                            " (is the NVIDIA driver installed?)");
  }
  NvmlApi api;
  Resolve(library, "nvmlInit_v2", &api.Init);
  Resolve(library, "nvmlShutdown", &api.Shutdown);
  Resolve(library, "nvmlErrorString", &api.ErrorString);
  Resolve(library, "nvmlSystemGetDriverVersion", &api.SystemGetDriverVersion);
  Resolve(library, "nvmlSystemGetNVMLVersion", &api.SystemGetNVMLVersion);
  Resolve(library, "nvmlDeviceGetCount_v2", &api.DeviceGetCount);
  Resolve(library, "nvmlDeviceGetHandleByIndex_v2", &api.DeviceGetHandleByIndex);
  Resolve(library, "nvmlDeviceGetName", &api.DeviceGetName);
  Resolve(library, "nvmlDeviceGetUUID", &api.DeviceGetUUID);
  Resolve(library, "nvmlDeviceGetMemoryInfo", &api.DeviceGetMemoryInfo);
  Resolve(library, "nvmlDeviceGetPciInfo_v3", &api.DeviceGetPciInfo);
  Resolve(library, "nvmlDeviceGetMigMode", &api.DeviceGetMigMode);
  Resolve(library, "nvmlDeviceGetGpuInstanceProfileInfo", &api.DeviceGetGpuInstanceProfileInfo);
  Resolve(library, "nvmlDeviceGetGpuInstances", &api.DeviceGetGpuInstances);
  Resolve(library, "nvmlDeviceGetGpuInstancePossiblePlacements_v2",
          &api.DeviceGetGpuInstancePossiblePlacements);
  Resolve(library, "nvmlDeviceCreateGpuInstanceWithPlacement",
          &api.DeviceCreateGpuInstanceWithPlacement);
  Resolve(library, "nvmlDeviceGetGpuInstanceById", &api.DeviceGetGpuInstanceById);
  Resolve(library, "nvmlGpuInstanceGetInfo", &api.GpuInstanceGetInfo);
  Resolve(library, "nvmlGpuInstanceGetComputeInstanceProfileInfo",
          &api.GpuInstanceGetComputeInstanceProfileInfo);
  Resolve(library, "nvmlGpuInstanceCreateComputeInstance", &api.GpuInstanceCreateComputeInstance);
  Resolve(library, "nvmlGpuInstanceGetComputeInstances", &api.GpuInstanceGetComputeInstances);
  Resolve(library, "nvmlComputeInstanceDestroy", &api.ComputeInstanceDestroy);
  Resolve(library, "nvmlGpuInstanceDestroy", &api.GpuInstanceDestroy);
  Resolve(library, "nvmlDeviceGetMaxMigDeviceCount", &api.DeviceGetMaxMigDeviceCount);
  Resolve(library, "nvmlDeviceGetMigDeviceHandleByIndex", &api.DeviceGetMigDeviceHandleByIndex);
  Resolve(library, "nvmlDeviceGetGpuInstanceId", &api.DeviceGetGpuInstanceId);
  Resolve(library, "nvmlDeviceGetComputeInstanceId", &api.DeviceGetComputeInstanceId);
  Resolve(library, "nvmlDeviceGetMinorNumber", &api.DeviceGetMinorNumber);
  Resolve(library, "nvmlDeviceGetNvLinkState", &api.DeviceGetNvLinkState);
  Resolve(library, "nvmlDeviceGetNvLinkRemotePciInfo_v2", &api.DeviceGetNvLinkRemotePciInfo);
  Resolve(library, "nvmlDeviceGetGpuFabricInfo", &api.DeviceGetGpuFabricInfo);
  Resolve(library, "nvmlDeviceGetGpuFabricInfoV", &api.DeviceGetGpuFabricInfoV);
  Resolve(library, "nvmlDeviceGetCpuAffinity", &api.DeviceGetCpuAffinity);
  Resolve(library, "nvmlDeviceGetNumaNodeId", &api.DeviceGetNumaNodeId);
  Resolve(library, "nvmlDeviceGetUtilizationRates", &api.DeviceGetUtilizationRates);
  Resolve(library, "nvmlDeviceGetTemperature", &api.DeviceGetTemperature);
  Resolve(library, "nvmlDeviceGetPowerUsage", &api.DeviceGetPowerUsage);
  Resolve(library, "nvmlDeviceGetClockInfo", &api.DeviceGetClockInfo);
  Resolve(library, "nvmlDeviceGetTotalEccErrors", &api.DeviceGetTotalEccErrors);
  Resolve(library, "nvmlEventSetCreate", &api.EventSetCreate);
  Resolve(library, "nvmlDeviceRegisterEvents", &api.DeviceRegisterEvents);
  Resolve(library, "nvmlEventSetWait_v2", &api.EventSetWait);
  Resolve(library, "nvmlEventSetFree", &api.EventSetFree);

  const std::pair<const char*, bool> required[] = {
      {"nvmlInit_v2", api.Init != nullptr},
      {"nvmlShutdown", api.Shutdown != nullptr},
      {"nvmlDeviceGetCount_v2", api.DeviceGetCount != nullptr},
      {"nvmlDeviceGetHandleByIndex_v2", api.DeviceGetHandleByIndex != nullptr},
      {"nvmlDeviceGetName", api.DeviceGetName != nullptr},
      {"nvmlDeviceGetUUID", api.DeviceGetUUID != nullptr},
      {"nvmlDeviceGetMemoryInfo", api.DeviceGetMemoryInfo != nullptr},
  };
  for (const auto& [name, present] : required) {
    if (!present) {
      dlclose(library);
      return UnavailableError("NVML library '" + options.library + "' lacks " + name +
                              " (driver too old?)");
    }
  }
  nvmlReturn_t r = api.Init();
  if (r != NVML_SUCCESS) {
    const char* text = api.ErrorString ? api.ErrorString(r) : nullptr;
    std::string why = std::string(text != nullptr ? text : "error") + " (NVML error " +
                      std::to_string(r) + ")";
    dlclose(library);
    return UnavailableError("nvmlInit failed: " + why);
  }
  auto backend = std::make_unique<NvmlBackend>(catalog, library, api, options.sysfs_root);
  backend->Init();
  return std::unique_ptr<GpuBackend>(std::move(backend));
}

StatusOr<std::unique_ptr<GpuBackend>> LoadNvmlBackend(const GpuCatalog& catalog,
                                                      std::string library) {
  NvmlBackendOptions options;
  options.library = std::move(library);
  return LoadNvmlBackend(catalog, options);
}

}  // namespace tessera
