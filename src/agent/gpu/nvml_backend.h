// The NVML GPU backend: NVIDIA's management library, loaded at run time with
// dlopen, so that one binary runs on machines with and without the driver.
//
// Discovery per GPU: name, UUID, memory, MIG mode and MIG instances (each GPU
// instance with its placement; its UUID is that of its MIG device), NVLink domains
// (GPUs whose active links reach each other, directly or through a shared NVSwitch,
// form one domain; a GPU without active links gets -1), NUMA node and CPU affinity.
// The NUMA node is the PCI device's (sysfs <root>/bus/pci/devices/<bus id>/numa_node,
// the CPU side of the link, which is what CPU binding wants), else
// nvmlDeviceGetNumaNodeId, else 0. CPUs come from nvmlDeviceGetCpuAffinity, else from
// the NUMA node's cpulist in sysfs, else none. Optional NVML functions that are
// missing or answer NOT_SUPPORTED degrade these fields; they never fail Discover().
//
// Telemetry (ReadTelemetry) per GPU: utilisation (nvmlDeviceGetUtilizationRates; not
// offered in MIG mode), memory used and free, GPU temperature, power, SM clock, ECC
// counts (corrected/uncorrected x volatile/aggregate; NOT_SUPPORTED reads 0), and per
// MIG instance its MIG device's memory and GPU instance id. XID events: every GPU is
// registered for nvmlEventTypeXidCriticalError on one event set when the backend
// loads, and each read drains that set without waiting. GPU_IS_LOST from any call, or
// no device handle, reports the GPU lost. The telemetry functions are optional: an
// older library without them reads zeros.
//
// A GPU whose product the catalog does not know is reported with an invalid model id.
// A GPU instance without a compute instance has no MIG device; it is reported with
// the UUID "MIG-<gpu uuid>/<gpu instance id>", which DestroyMigInstance accepts (as it
// accepts the older "MIG-GPU-<uuid>/<gi>/<ci>" form).
//
// Thread safety: one caller at a time (GpuBackend's rule). The backend holds one
// NVML initialisation for its lifetime and shuts it down in its destructor.
#pragma once

#include <memory>
#include <string>

#include "agent/gpu/gpu_backend.h"
#include "base/status.h"
#include "model/gpu_catalog.h"

namespace tessera {

struct NvmlBackendOptions {
  // Path or soname given to dlopen.
  std::string library = "libnvidia-ml.so.1";
  // Root of the sysfs tree read for NUMA nodes and their CPUs; tests point it at a
  // fixture directory.
  std::string sysfs_root = "/sys";
};

// Loads NVML and initialises it. Unavailable with a clear message when the library
// is absent, lacks a required function, or nvmlInit fails (no driver, no GPU access).
// `catalog` must outlive the backend.
StatusOr<std::unique_ptr<GpuBackend>> LoadNvmlBackend(const GpuCatalog& catalog,
                                                      const NvmlBackendOptions& options);
StatusOr<std::unique_ptr<GpuBackend>> LoadNvmlBackend(
    const GpuCatalog& catalog, std::string library = "libnvidia-ml.so.1");

}  // namespace tessera
