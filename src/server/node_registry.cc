#include "server/node_registry.h"

#include <algorithm>
#include <charconv>
#include <iostream>
#include <nlohmann/json.hpp>

namespace tessera {
namespace {

nlohmann::json DrainToStored(const DrainInfo& d) {
  return {{"reason", d.reason}, {"by", d.by}, {"kind", d.kind}, {"since_us", d.since}};
}

StatusOr<DrainInfo> DrainFromStored(const std::string& name, const nlohmann::json& d) {
  if (!d.is_object() || !d.value("reason", nlohmann::json()).is_string() ||
      !d.value("since_us", nlohmann::json()).is_number_integer()) {
    return InternalError("stored drain of node '" + name + "' is malformed: " + d.dump());
  }
  return DrainInfo{d["reason"].get<std::string>(), d.value("by", "admin"),
                   d.value("kind", "admin"), d["since_us"].get<int64_t>()};
}

// One node's stored drains into `node`.
Status ReadDrains(const std::string& name, const std::string& text, NodeInfo& node) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return InternalError("stored drains of node '" + name + "' are not a JSON object");
  }
  if (j.contains("node") && !j["node"].is_null()) {
    TESSERA_ASSIGN_OR_RETURN(node.drain, DrainFromStored(name, j["node"]));
  }
  if (j.contains("gpus") && j["gpus"].is_object()) {
    for (const auto& [index, d] : j["gpus"].items()) {
      TESSERA_ASSIGN_OR_RETURN(DrainInfo info, DrainFromStored(name, d));
      int gpu = -1;
      const auto [end, ec] = std::from_chars(index.data(), index.data() + index.size(), gpu);
      if (ec != std::errc() || end != index.data() + index.size() || gpu < 0) {
        return InternalError("stored drain of node '" + name + "' names GPU '" + index + "'");
      }
      node.gpu_drains[gpu] = std::move(info);
    }
  }
  return Status::Ok();
}

}  // namespace

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

Status NodeRegistry::CheckGpu(const NodeInfo* node, const std::string& name, int gpu) {
  if (node == nullptr) {
    return NotFoundError("no node '" + name + "'");
  }
  const size_t gpus = node->inventory.spec.gpus.size();
  if (gpu >= static_cast<int>(gpus)) {
    return InvalidArgumentError("node " + name + " has " + std::to_string(gpus) + " GPUs; no GPU " +
                                std::to_string(gpu));
  }
  return Status::Ok();
}

void NodeRegistry::Registered(NodeInfo& node, const NodeInventory& inventory,
                              const std::string& agent_id, const std::string& address,
                              Micros now) {
  node.inventory = inventory;
  node.agent_id = agent_id;
  node.address = address;
  node.up = true;
  node.reason.clear();
  node.last_seen = now;
  node.launches.clear();
  node.stops.clear();
}

NodeInfo& NodeRegistry::Register(const NodeInventory& inventory, const std::string& agent_id,
                                 const std::string& address, Micros now) {
  NodeInfo& node = FindOrAdd(inventory.spec.name);
  if (node.up && node.agent_id != agent_id) {
    std::cerr << "tessera server: node " << inventory.spec.name
              << " re-registered by a new agent\n";
  }
  Registered(node, inventory, agent_id, address, now);
  return node;
}

NodeInfo* NodeRegistry::Heard(const std::string& name, const std::string& agent_id, Micros now) {
  auto it = nodes_.find(name);
  if (it == nodes_.end() || !it->second.up || it->second.agent_id != agent_id) {
    return nullptr;
  }
  it->second.last_seen = now;
  return &it->second;
}

Micros NodeRegistry::HeartbeatInterval(Micros floor, Micros node_timeout,
                                       int64_t max_per_second) const {
  if (max_per_second <= 0) {
    return floor;
  }
  const Micros spread = static_cast<Micros>(nodes_.size()) * 1'000'000 / max_per_second;
  return std::clamp(spread, floor, std::max(floor, node_timeout / 4));
}

std::vector<GpuTelemetry> NodeRegistry::ByGpuIndex(const NodeInfo& node,
                                                   std::vector<GpuTelemetry> sample) {
  const size_t gpus = node.inventory.spec.gpus.size();
  std::vector<GpuTelemetry> by_index(gpus);
  std::vector<bool> seen(gpus, false);
  for (GpuTelemetry& t : sample) {
    if (t.index >= 0 && static_cast<size_t>(t.index) < gpus) {
      seen[static_cast<size_t>(t.index)] = true;
      by_index[static_cast<size_t>(t.index)] = std::move(t);
    }
  }
  for (size_t g = 0; g < gpus; ++g) {
    if (!seen[g]) {
      by_index[g].index = static_cast<int>(g);
      by_index[g].uuid = g < node.inventory.gpu_uuids.size() ? node.inventory.gpu_uuids[g] : "";
      by_index[g].lost = true;
    }
  }
  return by_index;
}

void NodeRegistry::NoteTelemetry(NodeInfo& node, std::vector<GpuTelemetry> by_index,
                                 const std::string& agent_id, Micros now) {
  node.telemetry = std::move(by_index);
  node.telemetry_agent = agent_id;
  node.telemetry_at = now;
}

std::pair<std::string, std::string> NodeRegistry::SetDrain(NodeInfo& node, int gpu,
                                                         std::optional<DrainInfo> drain) {
  const std::string& name = node.inventory.spec.name;
  const std::string what =
      gpu < 0 ? "node " + name : "node " + name + " GPU " + std::to_string(gpu);
  if (drain) {
    std::cerr << "tessera server: " << what << " drained by " << drain->by << ": " << drain->reason
              << "\n";
  } else {
    std::cerr << "tessera server: " << what << " resumed\n";
  }
  if (gpu < 0) {
    node.drain = std::move(drain);
  } else if (drain) {
    node.gpu_drains[gpu] = std::move(*drain);
  } else {
    node.gpu_drains.erase(gpu);
  }
  nlohmann::json stored = {{"node", nullptr}, {"gpus", nlohmann::json::object()}};
  if (node.drain) {
    stored["node"] = DrainToStored(*node.drain);
  }
  for (const auto& [index, d] : node.gpu_drains) {
    stored["gpus"][std::to_string(index)] = DrainToStored(d);
  }
  return {DrainsKeyPrefix() + node.inventory.spec.name, stored.dump()};
}

std::pair<std::string, std::string> NodeRegistry::NoDrainsRow(const std::string& name) {
  const nlohmann::json none = {{"node", nullptr}, {"gpus", nlohmann::json::object()}};
  return {DrainsKeyPrefix() + name, none.dump()};
}

std::pair<std::string, std::string> NodeRegistry::RemovedRow(const std::string& name, Micros at) {
  return {RemovedKeyPrefix() + name, nlohmann::json{{"at_us", at}}.dump()};
}

std::pair<std::string, std::string> NodeRegistry::Remove(const std::string& name) {
  std::pair<std::string, std::string> row = NoDrainsRow(name);
  std::cerr << "tessera server: node " << name << " removed by the admin\n";
  nodes_.erase(name);  // last: `name` may be the node's own
  return row;
}

bool NodeRegistry::ForgetRemoved(const std::vector<std::pair<std::string, std::string>>& rows) {
  bool forgot = false;
  for (const auto& [key, value] : rows) {
    if (!value.empty()) {
      nodes_.erase(key.substr(std::string(RemovedKeyPrefix()).size()));
      forgot = true;
    }
  }
  return forgot;
}

Status NodeRegistry::ClearRemoved(Store& store, const std::string& name) {
  TESSERA_ASSIGN_OR_RETURN(std::optional<std::string> marker,
                           store.GetKv(RemovedKeyPrefix() + name));
  if (!marker || marker->empty()) {
    return Status::Ok();
  }
  WriteBatch batch;
  batch.kv.emplace_back(RemovedKeyPrefix() + name, "");
  return store.Commit(std::move(batch));
}

Status NodeRegistry::RestoreDrains(const std::vector<std::pair<std::string, std::string>>& rows,
                                   Micros now) {
  const size_t prefix = std::string(DrainsKeyPrefix()).size();
  for (const auto& [key, text] : rows) {
    const std::string name = key.substr(prefix);
    TESSERA_RETURN_IF_ERROR(ReadDrains(name, text, AwaitAgent(name, now)));
  }
  return Status::Ok();
}

Status NodeRegistry::RestoreInventories(
    const std::vector<std::pair<std::string, std::string>>& rows, const GpuCatalog& catalog,
    Micros now) {
  for (const auto& [key, text] : rows) {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) {
      return InternalError("stored node '" + key + "' is not JSON");
    }
    TESSERA_ASSIGN_OR_RETURN(NodeInventory inventory, NodeInventoryFromJson(j, catalog));
    NodeInfo& node = AwaitAgent(inventory.spec.name, now);
    node.inventory = std::move(inventory);
  }
  return Status::Ok();
}

std::pair<std::string, std::string> NodeRegistry::InventoryRow(const NodeInventory& inventory,
                                                               const GpuCatalog& catalog) {
  return {InventoryKeyPrefix() + inventory.spec.name, ToJson(inventory, catalog).dump()};
}

NodeInfo& NodeRegistry::AwaitAgent(const std::string& name, Micros now) {
  NodeInfo& node = FindOrAdd(name);
  if (node.inventory.spec.name.empty()) {
    node.inventory.spec.name = name;
    node.up = false;
    node.reason = "waiting for its agent after a controller restart";
    node.last_seen = now;
  }
  return node;
}

std::vector<std::string> NodeRegistry::Silent(Micros now, Micros timeout) const {
  std::vector<std::string> silent;
  for (const auto& [name, node] : nodes_) {
    if (now - node.last_seen > timeout && (node.up || node.reason.rfind("waiting", 0) == 0)) {
      silent.push_back(name);
    }
  }
  return silent;
}

std::vector<std::string> NodeRegistry::SilentDue(Micros now, Micros timeout) {
  if (now < next_silence_check_) {
    return {};
  }
  next_silence_check_ = now + std::min<Micros>(1'000'000, timeout / 10);
  return Silent(now, timeout);
}

void NodeRegistry::TakeDown(NodeInfo& node, const std::string& reason) {
  node.up = false;
  node.reason = reason;
  node.launches.clear();
  node.stops.clear();
}

std::map<std::string, HeartbeatResponse> NodeRegistry::Deliver(
    std::vector<std::pair<std::string, TaskLaunch>> launches,
    const std::vector<std::pair<std::string, TaskStop>>& stops,
    const std::function<bool(const TaskKey&)>& running, bool collect) {
  std::map<std::string, HeartbeatResponse> queued;
  for (auto& [name, launch] : launches) {
    NodeInfo* node = Find(name);
    if (node == nullptr || !running(launch.key)) {
      continue;
    }
    if (collect) {
      queued[name].launch.push_back(launch);
    }
    node->launches.push_back(std::move(launch));
  }
  for (const auto& [name, stop] : stops) {
    NodeInfo* node = Find(name);
    const TaskKey& key = stop.key;
    if (node == nullptr || std::any_of(node->stops.begin(), node->stops.end(),
                                       [&key](const TaskStop& s) { return s.key == key; })) {
      continue;
    }
    node->stops.push_back(stop);
    if (collect) {
      queued[name].stop.push_back(stop);
    }
  }
  return queued;
}

}  // namespace tessera
