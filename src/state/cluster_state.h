// ClusterState: every node's spec and ledger, and cluster-wide totals.
//
// Nodes are numbered 0..n-1 in the order given (NodeId is the index). All changes go
// through Allocate/Release, which keep the totals consistent with the ledgers.
// Copyable, so that a what-if simulation can fork the live state.
// Thread safety: none; one driver thread owns it (the server takes a snapshot copy
// for each scheduling cycle).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/quantity.h"
#include "base/status.h"
#include "base/strong_id.h"
#include "model/gpu_catalog.h"
#include "model/node.h"
#include "state/node_ledger.h"

namespace tessera {

class ClusterState {
 public:
  // Validates every spec; node names must be unique.
  static StatusOr<ClusterState> Create(std::vector<NodeSpec> nodes, const GpuCatalog& catalog);

  ClusterState(const ClusterState& other);
  ClusterState& operator=(const ClusterState& other);
  ClusterState(ClusterState&&) noexcept = default;
  ClusterState& operator=(ClusterState&&) noexcept = default;
  ~ClusterState() = default;

  const GpuCatalog& catalog() const { return *catalog_; }
  size_t node_count() const { return ledgers_.size(); }
  const NodeSpec& spec(NodeId id) const { return (*specs_)[id.value()]; }
  const NodeLedger& node(NodeId id) const { return ledgers_[id.value()]; }
  const std::vector<NodeLedger>& nodes() const { return ledgers_; }
  StatusOr<NodeId> FindNode(std::string_view name) const;

  int64_t total_gpus() const { return total_gpus_; }
  MilliGpu total_gpu_milli() const { return MilliGpu(total_gpus_ * kMilliPerGpu); }
  MilliGpu allocated_gpu_milli() const { return MilliGpu(allocated_gpu_milli_); }
  MilliCpu total_cpu() const { return total_cpu_; }
  MilliCpu allocated_cpu() const { return allocated_cpu_; }

  Status Allocate(const Allocation& allocation);
  Status Release(const Allocation& allocation);

 private:
  ClusterState() = default;
  void BuildLedgers();

  const GpuCatalog* catalog_ = nullptr;
  // Specs are shared between copies: they never change after Create.
  std::shared_ptr<const std::vector<NodeSpec>> specs_;
  std::shared_ptr<const std::unordered_map<std::string, NodeId>> by_name_;
  std::vector<NodeLedger> ledgers_;
  int64_t total_gpus_ = 0;
  int64_t allocated_gpu_milli_ = 0;
  MilliCpu total_cpu_{0};
  MilliCpu allocated_cpu_{0};
};

}  // namespace tessera
