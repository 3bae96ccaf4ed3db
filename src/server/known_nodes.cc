#include "server/known_nodes.h"

#include <algorithm>
#include <functional>
#include <string>

#include "state/cluster_state.h"

namespace tessera {
namespace {

void Mix(uint64_t& h, uint64_t v) {
  h ^= std::hash<uint64_t>{}(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
}

bool InSet(const NodeInfo& node, NodeSet set) { return set != NodeSet::kUp || node.up; }

bool Drained(const NodeRegistry& nodes, const NodeInfo& node) {
  return node.drain.has_value() || nodes.AwaitsRespec(node.inventory.spec.name);
}

bool WithDrains(NodeSet set) { return set != NodeSet::kKnownUndrained; }

}  // namespace

uint64_t NodeSetFingerprint(const NodeRegistry& nodes, NodeSet set) {
  uint64_t h = static_cast<uint64_t>(set) + 1;
  for (const auto& [name, node] : nodes.all()) {
    if (!InSet(node, set)) {
      continue;
    }
    const NodeSpec& spec = node.inventory.spec;
    Mix(h, node.seq);
    Mix(h, std::hash<std::string>{}(name));
    Mix(h, static_cast<uint64_t>(spec.cpu.value()));
    Mix(h, static_cast<uint64_t>(spec.memory.value()));
    Mix(h, WithDrains(set) && Drained(nodes, node) ? 1 : 0);
    for (size_t g = 0; g < spec.gpus.size(); ++g) {
      const GpuSpec& gpu = spec.gpus[g];
      Mix(h, (static_cast<uint64_t>(gpu.model.value()) << 32) ^
                 (static_cast<uint64_t>(gpu.mode) << 24) ^
                 (static_cast<uint64_t>(gpu.numa_node & 0xff) << 16) ^
                 (static_cast<uint64_t>(gpu.nvlink_domain & 0xffff) << 1) ^
                 (WithDrains(set) && node.gpu_drains.count(static_cast<int>(g)) > 0 ? 1 : 0));
    }
    for (const auto& [k, v] : spec.labels) {
      Mix(h, std::hash<std::string>{}(k + "=" + v));
    }
  }
  return h;
}

std::shared_ptr<const FitCache> NodeSetFit(const NodeRegistry& nodes, const GpuCatalog& catalog,
                                           NodeSet set, std::shared_ptr<const FitCache> last) {
  const uint64_t fingerprint = NodeSetFingerprint(nodes, set);
  if (last != nullptr && last->fingerprint() == fingerprint) {
    return last;
  }
  // In the order the core numbers them; a node known only by name (from a running
  // job's placement after a restart, its inventory not back yet) has no spec to judge.
  std::vector<const NodeInfo*> members;
  for (const auto& [name, node] : nodes.all()) {
    if (InSet(node, set) && ValidateNodeSpec(node.inventory.spec, catalog).ok()) {
      members.push_back(&node);
    }
  }
  std::sort(members.begin(), members.end(),
            [](const NodeInfo* a, const NodeInfo* b) { return a->seq < b->seq; });
  std::vector<NodeSpec> specs;
  specs.reserve(members.size());
  for (const NodeInfo* node : members) {
    specs.push_back(node->inventory.spec);
  }
  StatusOr<ClusterState> state = ClusterState::Create(std::move(specs), catalog);
  if (!state.ok()) {
    return nullptr;
  }
  ClusterState& cluster = state.value();
  for (size_t i = 0; i < members.size() && WithDrains(set); ++i) {
    const NodeId id(static_cast<uint32_t>(i));
    (void)cluster.SetNodeDrained(id, Drained(nodes, *members[i]));
    for (const auto& [gpu, drain] : members[i]->gpu_drains) {
      (void)cluster.SetGpuDrained(id, gpu, true);
    }
  }
  return std::make_shared<const FitCache>(cluster, fingerprint);
}

std::vector<DownNode> DownNodes(const NodeRegistry& nodes) {
  std::vector<DownNode> down;
  for (const auto& [name, node] : nodes.all()) {
    const NodeSpec& spec = node.inventory.spec;
    const bool named_only = spec.gpus.empty() && spec.cpu.value() == 0;  // no inventory yet
    if (!node.up && !named_only) {
      down.push_back({name, node.reason, node.last_seen});
    }
  }
  return down;
}

size_t NodesUp(const NodeRegistry& nodes) {
  size_t up = 0;
  for (const auto& [name, node] : nodes.all()) {
    up += node.up ? 1 : 0;
  }
  return up;
}

bool SetFitVerdicts(const NodeRegistry& nodes, const GpuCatalog& catalog,
                    const WaitContext& last, WaitContext& c) {
  // From the node registry, not the core: they hold while the nodes and their drains
  // do, and do not wait for a cycle to see a node come or go.
  c.fit = NodeSetFit(nodes, catalog, NodeSet::kKnown, last.fit);
  c.fit_up = NodeSetFit(nodes, catalog, NodeSet::kUp, last.fit_up);
  c.fit_undrained = NodeSetFit(nodes, catalog, NodeSet::kKnownUndrained, last.fit_undrained);
  c.down = DownNodes(nodes);
  return c.fit_undrained == nullptr || c.fit_undrained != last.fit_undrained;
}

void FitVerdicts::Publish(const NodeRegistry& nodes, PublishedJobs& views,
                          std::shared_ptr<WaitContext> c) {
  if (SetFitVerdicts(nodes, *catalog_, *views.context(), *c)) {
    defaults_.SetNodes(nodes);  // the per-GPU room: once per node change
  }
  stale_ = false;
  views.SetContext(std::move(c));
}

void FitVerdicts::Refresh(const NodeRegistry& nodes, PublishedJobs& views) {
  if (!stale_) {
    return;
  }
  auto c = std::make_shared<WaitContext>(*views.context());
  if (c->built) {
    c->nodes_up = NodesUp(nodes);
  }
  Publish(nodes, views, std::move(c));
}

}  // namespace tessera
