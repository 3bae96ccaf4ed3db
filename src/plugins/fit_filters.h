// Filters every profile starts with: CPU and memory fit, GPU fit (count, model,
// per-GPU free milli and memory, MIG slot), and GPU locality for tasks that require
// it. Each tells "not now" (busy) from "never" (the node is too small or of the
// wrong kind). Thread safety: stateless.
#pragma once

#include "sched/framework.h"

namespace tessera {

// CPU and host memory requested <= free on the node; a task in an image only on a node
// that runs containers (label kContainersLabel).
class ResourceFitFilter final : public FilterPlugin {
 public:
  std::string_view name() const override { return "resource-fit"; }
  FilterResult Filter(const NodeLedger& node, const TaskRequest& request) const override;
};

// Enough GPUs of an allowed model, in a mode that serves the request, with room now;
// for a share, on a GPU whose single-user MPS admits its identity (GpuFitsRequest): a
// share that finds room only beside another tenant's shares there is "not now"
// (FilterCause::kMpsUser), never "never".
class GpuFitFilter final : public FilterPlugin {
 public:
  std::string_view name() const override { return "gpu-fit"; }
  FilterResult Filter(const NodeLedger& node, const TaskRequest& request) const override;
};

// For GpuTopology::kRequireLocal: the task's GPUs must share an NVLink domain or a
// NUMA node.
class GpuLocalityFilter final : public FilterPlugin {
 public:
  std::string_view name() const override { return "gpu-locality"; }
  FilterResult Filter(const NodeLedger& node, const TaskRequest& request) const override;
};

// Prefers nodes where a multi-GPU task's GPUs can share an NVLink domain and a NUMA
// node: 3 (one domain on one NUMA node), 2 (one domain), 1 (one NUMA node), 0
// (spread). Neutral (3) for single-GPU, MIG and CPU-only tasks and for kAny.
class GpuLocalityScorer final : public ScorePlugin {
 public:
  std::string_view name() const override { return "gpu-locality"; }
  NodeScore Score(const NodeLedger& node, const TaskRequest& request) override;
};

}  // namespace tessera
