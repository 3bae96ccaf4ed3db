#include "state/cluster_state.h"

#include <atomic>

namespace tessera {

StatusOr<ClusterState> ClusterState::Create(std::vector<NodeSpec> nodes,
                                            const GpuCatalog& catalog) {
  if (nodes.size() >= NodeId::kInvalidValue) {
    return InvalidArgumentError("too many nodes");
  }
  auto by_name = std::make_shared<std::unordered_map<std::string, NodeId>>();
  for (size_t i = 0; i < nodes.size(); ++i) {
    TESSERA_RETURN_IF_ERROR(ValidateNodeSpec(nodes[i], catalog));
    if (!by_name->emplace(nodes[i].name, NodeId(static_cast<uint32_t>(i))).second) {
      return InvalidArgumentError("node name '" + nodes[i].name + "' appears twice");
    }
  }
  ClusterState state;
  state.catalog_ = &catalog;
  state.specs_ = std::make_shared<const std::vector<NodeSpec>>(std::move(nodes));
  state.by_name_ = std::move(by_name);
  state.BuildLedgers();
  return state;
}

void ClusterState::BuildLedgers() {
  ledgers_.clear();
  ledgers_.reserve(specs_->size());
  total_gpus_ = 0;
  total_cpu_ = MilliCpu(0);
  for (const NodeSpec& spec : *specs_) {
    ledgers_.emplace_back(&spec, *catalog_);
    total_gpus_ += static_cast<int64_t>(spec.gpus.size());
    total_cpu_ += spec.cpu;
  }
}

uint64_t ClusterState::NextUid() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

Status ClusterState::SetNodeDrained(NodeId id, bool drained) {
  if (!id.valid() || id.value() >= ledgers_.size()) {
    return InvalidArgumentError("unknown node");
  }
  ledgers_[id.value()].SetDrained(drained);
  RecordChange(id);
  return Status::Ok();
}

Status ClusterState::SetGpuDrained(NodeId id, int gpu, bool drained) {
  if (!id.valid() || id.value() >= ledgers_.size()) {
    return InvalidArgumentError("unknown node");
  }
  TESSERA_RETURN_IF_ERROR(ledgers_[id.value()].SetGpuDrained(gpu, drained));
  RecordChange(id);
  return Status::Ok();
}

void ClusterState::RecordChange(NodeId id) {
  change_ring_[change_seq_ % kChangeWindow] = id;
  ++change_seq_;
}

bool ClusterState::ChangesSince(uint64_t from, std::vector<NodeId>* out) const {
  if (from > change_seq_ || change_seq_ - from > kChangeWindow) {
    return false;
  }
  for (uint64_t s = from; s < change_seq_; ++s) {
    out->push_back(change_ring_[s % kChangeWindow]);
  }
  return true;
}

ClusterState::ClusterState(const ClusterState& other) : uid_(NextUid()) { *this = other; }

ClusterState& ClusterState::operator=(const ClusterState& other) {
  if (this == &other) {
    return *this;
  }
  // Ledgers point at specs; specs are shared and immutable, so the pointers stay valid.
  catalog_ = other.catalog_;
  specs_ = other.specs_;
  by_name_ = other.by_name_;
  ledgers_ = other.ledgers_;
  total_gpus_ = other.total_gpus_;
  allocated_gpu_milli_ = other.allocated_gpu_milli_;
  total_cpu_ = other.total_cpu_;
  allocated_cpu_ = other.allocated_cpu_;
  // A copy is a new state for change tracking: consumers must rescan it.
  uid_ = NextUid();
  change_seq_ = 0;
  return *this;
}

StatusOr<NodeId> ClusterState::FindNode(std::string_view name) const {
  auto it = by_name_->find(std::string(name));
  if (it == by_name_->end()) {
    return NotFoundError("no node named '" + std::string(name) + "'");
  }
  return it->second;
}

Status ClusterState::Allocate(const Allocation& a) {
  if (!a.node.valid() || a.node.value() >= ledgers_.size()) {
    return InvalidArgumentError("allocation names an unknown node");
  }
  TESSERA_RETURN_IF_ERROR(ledgers_[a.node.value()].Allocate(a));
  allocated_gpu_milli_ += a.TotalGpuMilli().value();
  allocated_cpu_ += a.cpu;
  RecordChange(a.node);
  return Status::Ok();
}

Status ClusterState::Release(const Allocation& a) {
  if (!a.node.valid() || a.node.value() >= ledgers_.size()) {
    return InvalidArgumentError("release names an unknown node");
  }
  TESSERA_RETURN_IF_ERROR(ledgers_[a.node.value()].Release(a));
  allocated_gpu_milli_ -= a.TotalGpuMilli().value();
  allocated_cpu_ -= a.cpu;
  RecordChange(a.node);
  return Status::Ok();
}

}  // namespace tessera
