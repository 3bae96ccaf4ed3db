#include "model/queue_tree.h"

#include <algorithm>
#include <utility>

#include "base/strings.h"

namespace tessera {
namespace {

constexpr std::string_view kGpuPrefix = "gpu:";

// "queue 'team-a'" or "cohort 'org'", for error messages.
std::string Describe(const QueueNodeSpec& node) {
  return std::string(node.cohort ? "cohort '" : "queue '") + node.name + "'";
}

Status CheckQuota(const QueueNodeSpec& node, const QueueQuota& q, const GpuCatalog& catalog) {
  const std::string resource = ResourceNameString(q.resource, catalog);
  if (q.resource.model.valid() &&
      (q.resource.kind != ResourceKind::kGpu || q.resource.model.value() >= catalog.size())) {
    return InvalidArgumentError(Describe(node) + " has a quota on an invalid resource '" +
                                resource + "'");
  }
  if (q.quota.nominal < 0) {
    return InvalidArgumentError(Describe(node) + ": nominal quota on " + resource +
                                " must not be negative, got " + std::to_string(q.quota.nominal));
  }
  if (q.quota.borrowing_limit && *q.quota.borrowing_limit < 0) {
    return InvalidArgumentError(Describe(node) + ": borrowing limit on " + resource +
                                " must not be negative, got " +
                                std::to_string(*q.quota.borrowing_limit));
  }
  if (q.quota.lending_limit && *q.quota.lending_limit < 0) {
    return InvalidArgumentError(Describe(node) + ": lending limit on " + resource +
                                " must not be negative, got " +
                                std::to_string(*q.quota.lending_limit));
  }
  // As in Kueue: a root has nobody to borrow from or lend to, so a limit there is a
  // mistake (most likely a forgotten parent), not something to ignore silently.
  if (node.parent.empty() && (q.quota.borrowing_limit || q.quota.lending_limit)) {
    return InvalidArgumentError(Describe(node) + " has no parent, so it cannot have a " +
                                (q.quota.borrowing_limit ? "borrowing" : "lending") + " limit on " +
                                resource);
  }
  return Status::Ok();
}

// Priority classes: unique, named.
Status CheckPriorityClasses(const std::vector<PriorityClass>& classes) {
  for (size_t i = 0; i < classes.size(); ++i) {
    const PriorityClass& pc = classes[i];
    if (pc.name.empty()) {
      return InvalidArgumentError("priority class #" + std::to_string(i) + " has no name");
    }
    for (size_t j = 0; j < i; ++j) {
      if (classes[j].name == pc.name) {
        return InvalidArgumentError("duplicate priority class '" + pc.name + "'");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

std::string ResourceNameString(const ResourceName& name, const GpuCatalog& catalog) {
  switch (name.kind) {
    case ResourceKind::kGpu:
      if (!name.model.valid()) {
        return "gpu";
      }
      if (name.model.value() < catalog.size()) {
        return std::string(kGpuPrefix) + catalog.Get(name.model).name;
      }
      return std::string(kGpuPrefix) + "#" + std::to_string(name.model.value());
    case ResourceKind::kGpuMemory:
      return "gpu-memory";
    case ResourceKind::kCpu:
      return "cpu";
    case ResourceKind::kMemory:
      return "memory";
  }
  return "unknown";
}

StatusOr<ResourceName> ParseResourceName(std::string_view text, const GpuCatalog& catalog) {
  std::string_view t = Trim(text);
  if (t == "gpu") {
    return ResourceName{ResourceKind::kGpu, GpuModelId()};
  }
  if (t == "gpu-memory") {
    return ResourceName{ResourceKind::kGpuMemory, GpuModelId()};
  }
  if (t == "cpu") {
    return ResourceName{ResourceKind::kCpu, GpuModelId()};
  }
  if (t == "memory") {
    return ResourceName{ResourceKind::kMemory, GpuModelId()};
  }
  if (StartsWith(t, kGpuPrefix)) {
    std::string_view model = Trim(t.substr(kGpuPrefix.size()));
    if (model.empty()) {
      return InvalidArgumentError("resource '" + std::string(t) +
                                  "' names no GPU model after 'gpu:'");
    }
    StatusOr<GpuModelId> id = catalog.Find(model);
    if (!id.ok()) {
      return InvalidArgumentError("resource '" + std::string(t) + "': " + id.status().message());
    }
    return ResourceName{ResourceKind::kGpu, *id};
  }
  return InvalidArgumentError("unknown resource '" + std::string(t) +
                              "'; expected gpu, gpu:<model>, gpu-memory, cpu or memory");
}

StatusOr<QueueTree> QueueTree::Create(QueueTreeSpec spec, const GpuCatalog& catalog) {
  QueueTree tree;
  tree.catalog_ = &catalog;
  tree.nodes_ = std::move(spec.nodes);
  tree.priority_classes_ = std::move(spec.priority_classes);
  TESSERA_RETURN_IF_ERROR(tree.IndexNodes());
  TESSERA_RETURN_IF_ERROR(tree.LinkParents());
  TESSERA_RETURN_IF_ERROR(tree.CheckNoCycles());
  TESSERA_RETURN_IF_ERROR(CheckPriorityClasses(tree.priority_classes_));
  tree.DeriveTables();
  return tree;
}

Status QueueTree::IndexNodes() {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const QueueNodeSpec& node = nodes_[i];
    if (node.name.empty()) {
      return InvalidArgumentError("node #" + std::to_string(i) + " of the queue tree has no name");
    }
    auto [it, inserted] = by_name_.emplace(node.name, QueueId(static_cast<uint32_t>(i)));
    if (!inserted) {
      return InvalidArgumentError("duplicate name '" + node.name +
                                  "': " + Describe(nodes_[it->second.value()]) + " and " +
                                  Describe(node) + " (names are unique across queues and cohorts)");
    }
    if (node.weight <= 0) {
      return InvalidArgumentError(Describe(node) + ": weight must be > 0, got " +
                                  std::to_string(node.weight));
    }
    for (size_t a = 0; a < node.quotas.size(); ++a) {
      TESSERA_RETURN_IF_ERROR(CheckQuota(node, node.quotas[a], *catalog_));
      for (size_t b = 0; b < a; ++b) {
        if (node.quotas[a].resource == node.quotas[b].resource) {
          return InvalidArgumentError(Describe(node) + " declares a quota on " +
                                      ResourceNameString(node.quotas[a].resource, *catalog_) +
                                      " twice");
        }
      }
      if (std::find(resources_.begin(), resources_.end(), node.quotas[a].resource) ==
          resources_.end()) {
        resources_.push_back(node.quotas[a].resource);
      }
    }
  }
  return Status::Ok();
}

Status QueueTree::LinkParents() {
  const size_t n = nodes_.size();
  parents_.assign(n, QueueId());
  children_.assign(n, {});
  for (size_t i = 0; i < n; ++i) {
    const QueueNodeSpec& node = nodes_[i];
    if (node.parent.empty()) {
      continue;
    }
    auto it = by_name_.find(node.parent);
    if (it == by_name_.end()) {
      return InvalidArgumentError(Describe(node) + " has parent '" + node.parent +
                                  "', which does not exist");
    }
    if (!nodes_[it->second.value()].cohort) {
      return InvalidArgumentError(Describe(node) + " has parent '" + node.parent +
                                  "', which is a queue; only cohorts have children");
    }
    parents_[i] = it->second;
    children_[it->second.value()].push_back(QueueId(static_cast<uint32_t>(i)));
  }
  return Status::Ok();
}

Status QueueTree::CheckNoCycles() const {
  // Every chain of parents reaches a root within n steps.
  const size_t n = nodes_.size();
  for (size_t i = 0; i < n; ++i) {
    QueueId at(static_cast<uint32_t>(i));
    std::vector<std::string> chain = {nodes_[i].name};
    for (size_t steps = 0; parents_[at.value()].valid(); ++steps) {
      at = parents_[at.value()];
      chain.push_back(nodes_[at.value()].name);
      if (at.value() == i || steps >= n) {
        return InvalidArgumentError(Describe(nodes_[i]) +
                                    ": its chain of parents loops: " + Join(chain, " -> "));
      }
    }
  }
  return Status::Ok();
}

void QueueTree::DeriveTables() {
  const size_t n = nodes_.size();
  for (size_t i = 0; i < n; ++i) {
    const QueueNodeSpec& node = nodes_[i];
    if (!node.cohort) {
      queues_.emplace_back(static_cast<uint32_t>(i));
    }
    tenants_.push_back(node.tenant.empty() ? node.name : node.tenant);
  }

  // Post-order from every root, in spec order: children before their parent.
  bottom_up_.reserve(n);
  std::vector<std::pair<QueueId, size_t>> stack;  // node, next child to visit
  for (size_t i = 0; i < n; ++i) {
    if (parents_[i].valid()) {
      continue;
    }
    stack.emplace_back(QueueId(static_cast<uint32_t>(i)), 0);
    while (!stack.empty()) {
      auto& [id, next] = stack.back();
      const std::vector<QueueId>& kids = children_[id.value()];
      if (next < kids.size()) {
        QueueId child = kids[next++];
        stack.emplace_back(child, 0);  // invalidates `id` and `next`; not used below
        continue;
      }
      bottom_up_.push_back(id);
      stack.pop_back();
    }
  }

  const size_t r_count = resources_.size();
  quotas_.assign(n * r_count, Quota{});
  for (size_t i = 0; i < n; ++i) {
    for (const QueueQuota& q : nodes_[i].quotas) {
      size_t r = static_cast<size_t>(std::find(resources_.begin(), resources_.end(), q.resource) -
                                     resources_.begin());
      quotas_[i * r_count + r] = q.quota;
    }
  }
}

const std::string& QueueTree::tenant(QueueId id) const { return tenants_[id.value()]; }

std::map<std::string, double> QueueTree::TenantNominalGpus() const {
  std::map<std::string, double> quota_gpus;
  for (QueueId q : queues_) {
    double& gpus = quota_gpus[tenant(q)];
    for (size_t r = 0; r < resources_.size(); ++r) {
      if (resources_[r].kind == ResourceKind::kGpu) {
        gpus += static_cast<double>(quota(q, r).nominal) / 1000.0;
      }
    }
  }
  return quota_gpus;
}

StatusOr<QueueId> QueueTree::Find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  if (it == by_name_.end()) {
    return NotFoundError("no queue or cohort named '" + std::string(name) + "'");
  }
  return it->second;
}

StatusOr<QueueId> QueueTree::FindQueue(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  if (it == by_name_.end()) {
    return NotFoundError("no queue named '" + std::string(name) + "'");
  }
  if (nodes_[it->second.value()].cohort) {
    return NotFoundError("no queue named '" + std::string(name) +
                         "': it is a cohort, and jobs go to queues");
  }
  return it->second;
}

std::optional<int32_t> QueueTree::PriorityOf(std::string_view class_name) const {
  for (const PriorityClass& pc : priority_classes_) {
    if (pc.name == class_name) {
      return pc.value;
    }
  }
  return std::nullopt;
}

QueueTree QueueTree::Unlimited(const GpuCatalog& catalog, std::string name) {
  QueueTreeSpec spec;
  QueueNodeSpec queue;
  queue.name = name.empty() ? "default" : std::move(name);
  spec.nodes.push_back(std::move(queue));
  StatusOr<QueueTree> tree = Create(std::move(spec), catalog);
  return std::move(tree).value();
}

}  // namespace tessera
