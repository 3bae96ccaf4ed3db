// TaskRequest: the resources one task (one process, one rank) asks for.
//
// GPU forms, by field:
//   gpu_count == 0                    CPU-only task
//   gpu_count == 1, gpu_milli < 1000  a software share of one GPU (plus gpu_memory cap)
//   gpu_count >= 1, gpu_milli == 1000 whole GPUs
//   mig_profile set                   one MIG instance of that profile (gpu_count == 1,
//                                     gpu_milli and gpu_memory 0: the profile sizes it)
// Multi-GPU tasks always take whole GPUs. `models` restricts the GPU models (empty:
// any). `identity` is not the user's to set: the core (JobLifecycle) stamps it on a
// job's shares from the job's tenant (TenantIdentity), for the rule that keeps shares of
// different Unix users off one single-user MPS GPU (state/gpu_ledger.h).
// Thread safety: values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/quantity.h"
#include "base/status.h"
#include "model/gpu_catalog.h"

namespace tessera {

// Where a multi-GPU task's GPUs should sit relative to each other.
enum class GpuTopology {
  kPreferLocal,   // same NVLink domain and NUMA node where possible (default)
  kRequireLocal,  // only nodes where that is possible
  kAny,
};

struct TaskRequest {
  MilliCpu cpu{0};
  MiB memory{0};
  int gpu_count = 0;
  MilliGpu gpu_milli{0};    // per GPU
  MiB gpu_memory{0};        // per GPU; 0: no memory requirement
  std::string mig_profile;  // "" unless a MIG instance is wanted
  GpuModelSet models;
  GpuTopology topology = GpuTopology::kPreferLocal;
  // Who a share runs as (TenantIdentity of its job's tenant); 0: unknown, which no
  // placement rule restricts. Set on fractional requests only (SetShareIdentity).
  uint64_t identity = 0;
  // The task runs in an OCI image: only nodes labelled kContainersLabel (node.h) can.
  bool needs_containers = false;

  bool cpu_only() const { return gpu_count == 0; }
  bool wants_mig() const { return !mig_profile.empty(); }
  bool whole_gpus() const { return gpu_count > 0 && !wants_mig() && gpu_milli == kWholeGpu; }
  bool fractional() const { return gpu_count == 1 && !wants_mig() && gpu_milli < kWholeGpu; }
  // GPU asked for in total, in milli (a MIG instance counts its charged share).
  MilliGpu TotalGpuMilli(const GpuCatalog& catalog) const;

  bool operator==(const TaskRequest&) const = default;
};

// The identity key of a tenant's tasks: tasks run as their tenant's Unix uid, and two
// tenants never share one (server/tenant_identities.h), so the tenant names the uid. A
// stable hash (FNV-1a, never 0): the same in every driver, process and what-if copy.
uint64_t TenantIdentity(std::string_view tenant);

// The limits beyond which a request is refused as absurd rather than left pending.
struct RequestLimits {
  int max_gpus_per_task = 64;
  MilliCpu max_cpu{1'000'000'000};  // a million cores
  MiB max_memory{1LL << 40};        // an exbibyte
};

// Returns InvalidArgument with a message a user can act on ("gpu_milli must be
// 1000 when gpu_count > 1", "MIG profile 2g.99gb does not exist on any model", ...).
Status ValidateTaskRequest(const TaskRequest& request, const GpuCatalog& catalog,
                           const RequestLimits& limits = {});

}  // namespace tessera
