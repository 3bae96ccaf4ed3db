// ClusterState: every node's spec and ledger, and cluster-wide totals.
//
// Nodes are numbered 0..n-1 in the order given (NodeId is the index). All changes go
// through Allocate/Release, which keep the totals consistent with the ledgers.
// The node set changes in place (AddNode, RemoveNode, UpdateNode), as a server's agents
// come and go: a node that leaves keeps its id, absent (no capacity, drained, not found
// by name), and gets it back when it rejoins, so tables keyed by NodeId stay valid and
// ids grow only with the number of distinct node names.
// Copyable, so that a what-if simulation can fork the live state.
// Thread safety: none; its driver serialises access (the server's controller runs each
// scheduling cycle on it under the controller's lock; the simulator owns it outright).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
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
  // Node ids in use, absent nodes included.
  size_t node_count() const { return ledgers_.size(); }
  size_t present_count() const { return present_count_; }
  bool present(NodeId id) const { return id.value() < present_.size() && present_[id.value()]; }
  const NodeSpec& spec(NodeId id) const { return *specs_[id.value()]; }
  const NodeLedger& node(NodeId id) const { return ledgers_[id.value()]; }
  const std::vector<NodeLedger>& nodes() const { return ledgers_; }
  // NotFound for an unknown or absent node.
  StatusOr<NodeId> FindNode(std::string_view name) const;

  // A node joins, with its old id when a node of that name left before, else the next
  // one. InvalidArgument for a bad spec, AlreadyExists when the name is present.
  StatusOr<NodeId> AddNode(NodeSpec spec);
  // The node leaves. FailedPrecondition while it holds anything: its driver releases
  // what runs there first.
  Status RemoveNode(NodeId id);
  // An empty present node's spec changes (same name). FailedPrecondition while it holds
  // anything. Drains are cleared: the driver applies its own again.
  Status UpdateNode(NodeId id, NodeSpec spec);
  // A present node's labels change in place, even while it holds work: labels weigh
  // nothing in the ledgers (the scheduler regroups at its next NodesChanged).
  // InvalidArgument for an unknown node.
  Status RelabelNode(NodeId id, std::vector<std::pair<std::string, std::string>> labels);

  int64_t total_gpus() const { return total_gpus_; }
  MilliGpu total_gpu_milli() const { return MilliGpu(total_gpus_ * kMilliPerGpu); }
  MilliGpu allocated_gpu_milli() const { return MilliGpu(allocated_gpu_milli_); }
  MilliCpu total_cpu() const { return total_cpu_; }
  MilliCpu allocated_cpu() const { return allocated_cpu_; }

  Status Allocate(const Allocation& allocation);
  Status Release(const Allocation& allocation);
  // See NodeLedger::SetDrained / SetGpuDrained; InvalidArgument for an unknown node or GPU.
  Status SetNodeDrained(NodeId id, bool drained);
  Status SetGpuDrained(NodeId id, int gpu, bool drained);

  // Change tracking for incremental consumers (score caches). uid() differs between
  // any two live ClusterState objects, copies included (a moved-to object keeps the
  // uid of its source); change_seq() counts node changes.
  uint64_t uid() const { return uid_; }
  uint64_t change_seq() const { return change_seq_; }
  // Appends to `out` the nodes changed at sequence numbers [from, change_seq()), in
  // order, possibly with repeats. Returns false when `from` is older than the
  // window kept (kChangeWindow changes): the caller must then rescan every node.
  bool ChangesSince(uint64_t from, std::vector<NodeId>* out) const;
  static constexpr uint64_t kChangeWindow = 1 << 14;

 private:
  ClusterState() = default;
  void BuildLedgers();
  void RecordChange(NodeId id);
  Status CheckEmptyPresent(NodeId id, std::string_view what) const;
  // Puts `spec` in slot `i` (present) or an empty stand-in (absent), fixing the totals.
  void SetSlot(size_t i, std::shared_ptr<const NodeSpec> spec, bool present);
  static uint64_t NextUid();

  const GpuCatalog* catalog_ = nullptr;
  // Each spec is immutable and shared between copies (ledgers point at it); a node
  // change puts a new one in its slot. The name index is shared between copies until
  // one adds a name (copy on write; a state no copy shares adds in place, so a fleet
  // joining one node at a time costs O(nodes), not O(nodes^2)), absent nodes included.
  std::vector<std::shared_ptr<const NodeSpec>> specs_;
  std::shared_ptr<std::unordered_map<std::string, NodeId>> by_name_;
  std::vector<NodeLedger> ledgers_;
  std::vector<uint8_t> present_;
  size_t present_count_ = 0;
  int64_t total_gpus_ = 0;
  int64_t allocated_gpu_milli_ = 0;
  MilliCpu total_cpu_{0};
  MilliCpu allocated_cpu_{0};
  uint64_t uid_ = NextUid();
  uint64_t change_seq_ = 0;
  std::vector<NodeId> change_ring_ = std::vector<NodeId>(kChangeWindow);
};

}  // namespace tessera
