// NodeLedger: free and used resources of one node: CPU, memory and one GpuLedger per GPU.
//
// An Allocation (a task's CPU, memory and GPU grants on one node) is applied all or
// nothing: Allocate checks every part before changing anything, so a failed call
// leaves the ledger untouched. Release undoes an Allocate exactly. Every change bumps
// version(), which caches of per-node scores use to know they are stale.
// Thread safety: none; ClusterState serialises access.
#pragma once

#include <cstdint>
#include <vector>

#include "base/quantity.h"
#include "base/status.h"
#include "base/strong_id.h"
#include "model/gpu_catalog.h"
#include "model/node.h"
#include "state/gpu_ledger.h"

namespace tessera {

// The shape of an allocation, for affinity: kShapeCpuOnly, kShapeShare (a fraction
// of one GPU), kShapeMig (one MIG instance), or k >= 1 (k whole GPUs).
inline constexpr int kShapeCpuOnly = 0;
inline constexpr int kShapeShare = -1;
inline constexpr int kShapeMig = -2;

struct Allocation {
  NodeId node;
  MilliCpu cpu{0};
  MiB memory{0};
  std::vector<GpuGrant> gpus;
  // Who the task runs as (TaskRequest::identity of its request); 0: unknown.
  uint64_t identity = 0;

  MilliGpu TotalGpuMilli() const;
  int Shape() const;
  bool operator==(const Allocation&) const = default;
};

class NodeLedger {
 public:
  NodeLedger(const NodeSpec* spec, const GpuCatalog& catalog);

  const NodeSpec& spec() const { return *spec_; }
  // Reads `spec` from now on: one that differs from the current one in labels only
  // (ClusterState::RelabelNode); its labels may change which GPUs serve one user.
  void RebindSpec(const NodeSpec* spec);
  MilliCpu free_cpu() const { return spec_->cpu - used_cpu_; }
  MiB free_memory() const { return spec_->memory - used_memory_; }
  MilliCpu used_cpu() const { return used_cpu_; }
  MiB used_memory() const { return used_memory_; }
  const std::vector<GpuLedger>& gpus() const { return gpus_; }
  int gpu_count() const { return static_cast<int>(gpus_.size()); }
  MilliGpu free_gpu_milli() const { return MilliGpu(free_gpu_milli_); }
  uint64_t version() const { return version_; }

  // Drains keep new work off the node (Placer) or one GPU (GpuFitsRequest); what
  // runs there stays. InvalidArgument for an unknown GPU index.
  bool drained() const { return drained_; }
  void SetDrained(bool drained);
  Status SetGpuDrained(int gpu, bool drained);

  Status Allocate(const Allocation& allocation);
  Status Release(const Allocation& allocation);

  // Same used quantities and GPU ledgers (versions may differ).
  bool SameUsage(const NodeLedger& other) const;

  // How many live allocations of a shape the node holds (see AllocationShape).
  // Affinity-style scorers (GPU clustering) group like with like through this.
  int ShapeCount(int shape) const;
  bool HasGpuAllocations() const;

 private:
  Status CheckGrantsDistinct(const Allocation& allocation) const;
  void CountShape(int shape, int delta);
  void ApplyLabels();  // the GPUs' one_user() from the spec's MPS labels

  const NodeSpec* spec_;
  MilliCpu used_cpu_{0};
  MiB used_memory_{0};
  int64_t free_gpu_milli_ = 0;
  std::vector<GpuLedger> gpus_;
  std::vector<std::pair<int, int>> shape_counts_;  // (shape, live allocations)
  uint64_t version_ = 0;
  bool drained_ = false;
};

}  // namespace tessera
