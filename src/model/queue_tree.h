// QueueTree: who may use how much of the cluster, with Kueue's quota semantics.
//
// The tree has two kinds of nodes. Queues are leaves: jobs are submitted to them
// (Kueue's ClusterQueue). Cohorts group queues and other cohorts (Kueue's
// hierarchical Cohort); they may hold quota of their own. Every node has, per
// resource, a nominal (guaranteed) quota, an optional borrowing limit (how much it
// may use beyond its own subtree's quota) and an optional lending limit (how much
// of its unused quota its parent may lend to others). See state/quota_ledger.h for
// the arithmetic.
//
// A resource that appears in no node of the tree is not limited by quota. A
// resource that appears in some node is limited everywhere: nodes that do not
// declare it have a nominal quota of 0 (they can still borrow).
//
// Thread safety: immutable after Create; share freely.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "base/strong_id.h"
#include "model/gpu_catalog.h"

namespace tessera {

struct QueueIdTag {};
// Index of a node (queue or cohort) in its QueueTree.
using QueueId = StrongId<QueueIdTag>;

enum class ResourceKind : uint8_t { kGpu, kGpuMemory, kCpu, kMemory };

// One quota dimension. GPU quota is in milli-GPU, for any model or for one model
// (a "flavor"); GPU memory and memory in MiB; CPU in milli-CPU.
struct ResourceName {
  ResourceKind kind = ResourceKind::kGpu;
  GpuModelId model;  // only for kGpu; invalid: any model

  bool operator==(const ResourceName&) const = default;
};

// "gpu", "gpu:H100-80GB", "gpu-memory", "cpu", "memory".
std::string ResourceNameString(const ResourceName& name, const GpuCatalog& catalog);
StatusOr<ResourceName> ParseResourceName(std::string_view text, const GpuCatalog& catalog);

struct Quota {
  int64_t nominal = 0;
  std::optional<int64_t> borrowing_limit;  // unset: may borrow all the parent can give
  std::optional<int64_t> lending_limit;    // unset: all of its quota may be lent
};

struct QueueQuota {
  ResourceName resource;
  Quota quota;
};

struct QueueNodeSpec {
  std::string name;      // unique across queues and cohorts
  bool cohort = false;   // false: a queue (leaf)
  std::string parent;    // a cohort's name; "": a root
  std::vector<QueueQuota> quotas;
  int64_t weight = 1;    // fair-share weight, > 0
  std::string tenant;    // who the queue bills; "": the queue's own name
};

struct PriorityClass {
  std::string name;
  int32_t value = 0;  // higher runs first and may preempt lower within a queue
};

struct QueueTreeSpec {
  std::vector<QueueNodeSpec> nodes;
  std::vector<PriorityClass> priority_classes;
};

class QueueTree {
 public:
  // Validates: unique names, parents exist and are cohorts, no cycles, queues are
  // leaves, quotas >= 0, weights > 0, no resource declared twice on one node.
  static StatusOr<QueueTree> Create(QueueTreeSpec spec, const GpuCatalog& catalog);

  size_t size() const { return nodes_.size(); }
  const QueueNodeSpec& spec(QueueId id) const { return nodes_[id.value()]; }
  bool is_queue(QueueId id) const { return !nodes_[id.value()].cohort; }
  QueueId parent(QueueId id) const { return parents_[id.value()]; }  // invalid for roots
  const std::vector<QueueId>& children(QueueId id) const { return children_[id.value()]; }
  // Leaf queues, in spec order.
  const std::vector<QueueId>& queues() const { return queues_; }
  // Every node with children after all of its children (for bottom-up passes).
  const std::vector<QueueId>& bottom_up() const { return bottom_up_; }
  const std::string& tenant(QueueId id) const;

  StatusOr<QueueId> Find(std::string_view name) const;       // queue or cohort
  StatusOr<QueueId> FindQueue(std::string_view name) const;  // leaf queues only

  // The quota dimensions, in a fixed order: the index space of ResourceVector.
  const std::vector<ResourceName>& resources() const { return resources_; }
  // The node's quota on resources()[r]; nominal 0 and no limits when undeclared.
  const Quota& quota(QueueId id, size_t r) const { return quotas_[id.value() * resources_.size() + r]; }
  // Each tenant the queues bill, with the nominal GPU quota (any model or one) of its
  // queues added up, in GPUs; cohorts' own quota is not counted.
  std::map<std::string, double> TenantNominalGpus() const;

  const std::vector<PriorityClass>& priority_classes() const { return priority_classes_; }
  std::optional<int32_t> PriorityOf(std::string_view class_name) const;

  const GpuCatalog& catalog() const { return *catalog_; }

  // A tree with one root queue `name` and no quota at all (nothing is limited).
  static QueueTree Unlimited(const GpuCatalog& catalog, std::string name = "default");

 private:
  QueueTree() = default;

  // The steps of Create, in this order.
  Status IndexNodes();   // names, weights and quotas, node by node; fills resources_
  Status LinkParents();  // parents exist and are cohorts (so queues stay leaves)
  Status CheckNoCycles() const;
  void DeriveTables();  // queues_, tenants_, bottom_up_ and quotas_

  const GpuCatalog* catalog_ = nullptr;
  std::vector<QueueNodeSpec> nodes_;
  std::vector<QueueId> parents_;
  std::vector<std::vector<QueueId>> children_;
  std::vector<QueueId> queues_;
  std::vector<QueueId> bottom_up_;
  std::vector<std::string> tenants_;
  std::unordered_map<std::string, QueueId> by_name_;
  std::vector<ResourceName> resources_;
  std::vector<Quota> quotas_;  // node-major: size() x resources().size()
  std::vector<PriorityClass> priority_classes_;
};

}  // namespace tessera
