// Cluster presets for the job simulator: nodes plus the queue tree that bills them.
//
// "philly-vc": Philly's virtual clusters from helios/summary/philly_vc.csv, 8 GPUs
// per node (P100), 16 nodes per rack, one NVLink domain per node; each VC is a queue
// (tenant) whose nominal GPU quota is its GPUs, all in one cohort "philly"; every
// tenant of the trace that is not in the file gets a queue with no nominal quota.
// "NxGxMODEL" (e.g. "64x8xH100-80GB"): N nodes of G GPUs, 16 nodes per rack, one
// queue per tenant of the trace with no quota (nothing limited). Several joined by '+'
// (e.g. "16x8xH100-80GB+32x4xV100-32GB") make a heterogeneous cluster; jobs are then
// split into tasks of at most the smallest node's GPUs, and every model runs a job at
// the same speed (the traces carry no per-model runtimes).
// Thread safety: functions, no shared state.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/gpu_catalog.h"
#include "model/node.h"
#include "model/queue_tree.h"

namespace tessera {

struct ClusterSetup {
  std::vector<NodeSpec> nodes;
  QueueTreeSpec queues;
  int gpus_per_node = 0;
};

// Node shape used by presets: per GPU 6 cores and 64 GiB, so GPU is the bottleneck.
inline constexpr int64_t kPresetCpuMilliPerGpu = 6000;
inline constexpr int64_t kPresetMemoryMiBPerGpu = 64 * 1024;

// `tenants`: the trace's tenants ("" stands for a tenant named "default").
StatusOr<ClusterSetup> MakeClusterPreset(std::string_view spec,
                                         const std::vector<std::string>& tenants,
                                         const std::string& traces_dir,
                                         const GpuCatalog& catalog);

}  // namespace tessera
