#include "server/node_registry.h"

namespace tessera {

NodeInfo* NodeRegistry::Find(const std::string& name) {
  auto it = nodes_.find(name);
  return it == nodes_.end() ? nullptr : &it->second;
}

NodeInfo& NodeRegistry::Add(const std::string& name) {
  NodeInfo& node = nodes_[name];
  node.seq = next_seq_++;
  return node;
}

NodeInfo& NodeRegistry::FindOrAdd(const std::string& name) {
  auto [slot, fresh] = nodes_.try_emplace(name);
  if (fresh) {
    slot->second.seq = next_seq_++;
  }
  return slot->second;
}

StatusOr<NodeInfo*> NodeRegistry::FindGpu(const std::string& name, int gpu) {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    return NotFoundError("no node '" + name + "'");
  }
  const size_t gpus = it->second.inventory.spec.gpus.size();
  if (gpu >= static_cast<int>(gpus)) {
    return InvalidArgumentError("node " + name + " has " + std::to_string(gpus) + " GPUs; no GPU " +
                                std::to_string(gpu));
  }
  return &it->second;
}

}  // namespace tessera
