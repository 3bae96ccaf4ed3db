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
  state.specs_.reserve(nodes.size());
  for (NodeSpec& spec : nodes) {
    state.specs_.push_back(std::make_shared<const NodeSpec>(std::move(spec)));
  }
  state.by_name_ = std::move(by_name);
  state.BuildLedgers();
  return state;
}

void ClusterState::BuildLedgers() {
  ledgers_.clear();
  ledgers_.reserve(specs_.size());
  present_.assign(specs_.size(), 1);
  present_count_ = specs_.size();
  total_gpus_ = 0;
  total_cpu_ = MilliCpu(0);
  for (const auto& spec : specs_) {
    ledgers_.emplace_back(spec.get(), *catalog_);
    total_gpus_ += static_cast<int64_t>(spec->gpus.size());
    total_cpu_ += spec->cpu;
  }
}

void ClusterState::SetSlot(size_t i, std::shared_ptr<const NodeSpec> spec, bool present) {
  if (i == specs_.size()) {
    specs_.emplace_back();
    ledgers_.emplace_back(spec.get(), *catalog_);
    present_.push_back(0);
  } else if (present_[i]) {
    total_gpus_ -= static_cast<int64_t>(specs_[i]->gpus.size());
    total_cpu_ -= specs_[i]->cpu;
    --present_count_;
  }
  if (!present) {
    // An absent node keeps its name only: no capacity, and drained so nothing lands.
    auto stand_in = std::make_shared<NodeSpec>();
    stand_in->name = spec->name;
    spec = std::move(stand_in);
  }
  specs_[i] = std::move(spec);
  ledgers_[i] = NodeLedger(specs_[i].get(), *catalog_);
  present_[i] = present ? 1 : 0;
  if (present) {
    total_gpus_ += static_cast<int64_t>(specs_[i]->gpus.size());
    total_cpu_ += specs_[i]->cpu;
    ++present_count_;
  } else {
    ledgers_[i].SetDrained(true);
  }
  RecordChange(NodeId(static_cast<uint32_t>(i)));
}

Status ClusterState::CheckEmptyPresent(NodeId id, std::string_view what) const {
  if (!present(id)) {
    return InvalidArgumentError(std::string(what) + ": unknown node");
  }
  const NodeLedger& n = ledgers_[id.value()];
  if (n.used_cpu().value() != 0 || n.used_memory().value() != 0 || n.HasGpuAllocations()) {
    return FailedPreconditionError(std::string(what) + ": node '" + n.spec().name +
                                   "' still holds allocations");
  }
  return Status::Ok();
}

StatusOr<NodeId> ClusterState::AddNode(NodeSpec spec) {
  TESSERA_RETURN_IF_ERROR(ValidateNodeSpec(spec, *catalog_));
  auto it = by_name_->find(spec.name);
  size_t slot = specs_.size();
  if (it != by_name_->end()) {
    if (present(it->second)) {
      return AlreadyExistsError("node '" + spec.name + "' is already in the cluster");
    }
    slot = it->second.value();
  } else {
    if (slot + 1 >= NodeId::kInvalidValue) {
      return InvalidArgumentError("too many nodes");
    }
    if (by_name_.use_count() > 1) {
      by_name_ = std::make_shared<std::unordered_map<std::string, NodeId>>(*by_name_);
    }
    by_name_->emplace(spec.name, NodeId(static_cast<uint32_t>(slot)));
  }
  SetSlot(slot, std::make_shared<const NodeSpec>(std::move(spec)), true);
  return NodeId(static_cast<uint32_t>(slot));
}

Status ClusterState::RemoveNode(NodeId id) {
  TESSERA_RETURN_IF_ERROR(CheckEmptyPresent(id, "remove"));
  SetSlot(id.value(), specs_[id.value()], false);
  return Status::Ok();
}

Status ClusterState::UpdateNode(NodeId id, NodeSpec spec) {
  TESSERA_RETURN_IF_ERROR(CheckEmptyPresent(id, "update"));
  if (spec.name != specs_[id.value()]->name) {
    return InvalidArgumentError("update: node '" + specs_[id.value()]->name +
                                "' cannot be renamed to '" + spec.name + "'");
  }
  TESSERA_RETURN_IF_ERROR(ValidateNodeSpec(spec, *catalog_));
  SetSlot(id.value(), std::make_shared<const NodeSpec>(std::move(spec)), true);
  return Status::Ok();
}

Status ClusterState::RelabelNode(NodeId id,
                                 std::vector<std::pair<std::string, std::string>> labels) {
  if (!present(id)) {
    return InvalidArgumentError("relabel: unknown node");
  }
  auto spec = std::make_shared<NodeSpec>(*specs_[id.value()]);
  spec->labels = std::move(labels);
  specs_[id.value()] = std::move(spec);
  // Same capacity and GPUs: the ledger keeps what it holds and reads the new spec.
  ledgers_[id.value()].RebindSpec(specs_[id.value()].get());
  RecordChange(id);
  return Status::Ok();
}

uint64_t ClusterState::NextUid() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

Status ClusterState::SetNodeDrained(NodeId id, bool drained) {
  if (!present(id)) {
    return InvalidArgumentError("unknown node");
  }
  ledgers_[id.value()].SetDrained(drained);
  RecordChange(id);
  return Status::Ok();
}

Status ClusterState::SetGpuDrained(NodeId id, int gpu, bool drained) {
  if (!present(id)) {
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
  present_ = other.present_;
  present_count_ = other.present_count_;
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
  if (it == by_name_->end() || !present(it->second)) {
    return NotFoundError("no node named '" + std::string(name) + "'");
  }
  return it->second;
}

Status ClusterState::Allocate(const Allocation& a) {
  if (!present(a.node)) {
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
