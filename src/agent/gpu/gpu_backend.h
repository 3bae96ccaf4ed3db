// GpuBackend: how the node agent sees and slices the GPUs of its machine.
//
// Two implementations: NVML loaded at run time (nvml_backend.h) on real machines, and
// a fake inventory built from a spec string (fake_gpus.h) for tests, the simulator
// and laptops. Both follow the same rules: GPU indexes are NVML's (0..n-1), MIG
// instances are created one GPU instance with one full compute instance at a time,
// at a legal memory-slot start, and are named by their MIG UUID.
//
// Telemetry (ReadTelemetry): one GpuTelemetry per GPU in index order, with its MIG
// instances in ascending start slot. A GPU the driver cannot reach (NVML's GPU_IS_LOST,
// or no device handle) is reported with lost=true and zero readings, keeping its index,
// its last known UUID and the XID counters; it does not fail the call. Readings the
// driver does not offer (an old driver, a GPU without ECC) are 0. XID counters count
// from the backend's start; ECC counters are the driver's (volatile: since it loaded;
// aggregate: the card's life), the fake's count from its start.
//
// Error codes: a bad argument (unknown GPU index, profile or start slot) is
// InvalidArgument; a call that the current state forbids (GPU not in MIG mode,
// overlap with an existing instance, no compute slices left) is FailedPrecondition;
// an unknown instance UUID is NotFound; a missing or failing driver is Unavailable.
//
// Thread safety: one caller at a time per backend (the agent serialises its calls).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "api/agent_protocol.h"
#include "base/status.h"
#include "base/strong_id.h"
#include "model/gpu_catalog.h"
#include "model/node.h"

namespace tessera {

struct MigInstanceInfo {
  std::string uuid;     // "MIG-..." as NVML names the MIG device
  std::string profile;  // catalog profile name, e.g. "3g.40gb"
  int start = -1;       // first memory slot
  // The driver's ids of its GPU instance and compute instance (-1: unknown): they name
  // its capability device nodes (task_sandbox.h).
  int gpu_instance = -1;
  int compute_instance = -1;
  bool operator==(const MigInstanceInfo&) const = default;
};

struct DiscoveredGpu {
  int index = 0;
  int minor = -1;            // its device node is /dev/nvidia<minor>; -1: unknown (= index)
  std::string uuid;          // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
  std::string product_name;  // as NVML names it, e.g. "NVIDIA H100 80GB HBM3"
  GpuModelId model;          // invalid (GpuModelId{}) when the catalog has no such model
  SharingMode mode = SharingMode::kExclusive;
  int numa_node = 0;
  int nvlink_domain = -1;  // GPUs linked by NVLink share a domain number; -1: no NVLink peer
  int64_t memory_mib = 0;
  bool mig_enabled = false;
  std::vector<MigInstanceInfo> mig_instances;  // ascending start slot
  std::vector<int> cpus;  // CPU affinity (NVML, or all CPUs of its NUMA node); may be empty
  // The multi-node NVLink fabric the GPU belongs to (NVL72-class), as
  // "<clusterUuid>/<cliqueId>"; "" when the driver reports none.
  std::string fabric_domain;
  int replicas = 0;  // timeslice only (a fake spec's, or the agent's --gpu-sharing)
};

// The node's NVLink fabric domain: the one every GPU that reports a fabric agrees on;
// "" when none reports one or they disagree (no label beats a wrong one).
std::string NodeFabricDomain(const std::vector<DiscoveredGpu>& gpus);

// Where one task runs, as the agent tells the backend (GpuBackend::SetTaskLoad).
struct GpuLoad {
  int gpu = 0;             // GPU index
  std::string mig_uuid;    // "": the card itself (whole, or a software share of it)
  int64_t milli = 1000;    // compute share of the card, 1..1000; ignored for a MIG instance
  int64_t memory_mib = 0;  // the task's GPU memory cap; 0: none
  bool operator==(const GpuLoad&) const = default;
};

class GpuBackend {  // thread safety: one caller at a time
 public:
  virtual ~GpuBackend() = default;
  // "fake: 2x8xH100-80GB" / "NVML 12.550.54.15 driver 550.54.15, 8 GPUs".
  virtual std::string Describe() const = 0;
  virtual StatusOr<std::vector<DiscoveredGpu>> Discover() = 0;
  // Creates a MIG GPU instance + compute instance of `profile` at memory-slot `start`
  // on GPU `gpu`; returns the new instance with its UUID.
  virtual StatusOr<MigInstanceInfo> CreateMigInstance(int gpu, std::string_view profile,
                                                      int start) = 0;
  virtual Status DestroyMigInstance(int gpu, std::string_view uuid) = 0;
  // One sample of every GPU (see "Telemetry" above). An error only when the driver
  // as a whole fails (or, for the fake, its fault file cannot be read).
  virtual StatusOr<std::vector<GpuTelemetry>> ReadTelemetry() = 0;
  // Tells the backend what task `task_id` runs on, replacing what it was told before;
  // an empty `load` means the task ended. Only a backend that makes its readings up
  // (the fake) uses it; NVML measures the real thing and ignores it.
  virtual void SetTaskLoad(std::string_view task_id, std::vector<GpuLoad> load) {
    (void)task_id;
    (void)load;
  }
};

// Maps an NVML product name plus its memory to a catalog model: "NVIDIA A100-SXM4-80GB",
// "NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA L40S", "Tesla T4", ... A name the
// catalog knows (canonical or alias, after dropping the "NVIDIA"/"Tesla" prefix) wins
// when its memory agrees; otherwise the model family of the name ("H100") picks the
// family member nearest in memory. Memory agrees within 8%; `memory_mib` <= 0 means
// unknown (then a "NNGB" in the name stands in). NotFound when nothing matches.
StatusOr<GpuModelId> MatchCatalogModel(std::string_view product_name, int64_t memory_mib,
                                       const GpuCatalog& catalog);

// One MIG instance already on a GPU, as the geometry check sees it.
struct MigSlotUse {
  int start = 0;
  int memory_slots = 0;
  int compute_slices = 0;
  std::string profile;  // catalog profile name, "" when not a catalog profile
};

// Whether an instance of catalog profile `profile_name` of `model` may start at `start`
// next to `existing`: InvalidArgument for an unknown profile or a start slot the
// profile never takes; FailedPrecondition for an overlap, too few compute slices left,
// or the profile's instance limit reached. Shared by the backends.
Status CheckMigPlacement(const GpuModel& model, std::string_view profile_name, int start,
                         const std::vector<MigSlotUse>& existing);

}  // namespace tessera
