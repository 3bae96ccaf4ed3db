#include "server/modules/node_history.h"

#include <cstdio>
#include <iostream>
#include <utility>

namespace tessera {
namespace {

// Keys sort by node, then time: the time is zero-padded.
std::string NodeHistoryKey(const std::string& name, Micros at) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%020lld", static_cast<long long>(at));
  return NodeHistory::kKeyPrefix + name + "/" + buf;
}

}  // namespace

Status NodeHistory::Load(Store& store) {
  TESSERA_ASSIGN_OR_RETURN(auto records, store.ListKv(kKeyPrefix));
  last_.clear();
  for (const auto& [key, text] : records) {  // by node, then time: the last one stays
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) {
      std::cerr << "tessera server: node history record " << key << " is malformed; ignored\n";
      continue;
    }
    const std::string name = j["name"].get<std::string>();
    if (j.value("event", "") == "leave" || !j.contains("inventory")) {
      last_[name] = std::nullopt;
      continue;
    }
    StatusOr<NodeInventory> inv = NodeInventoryFromJson(j["inventory"], *catalog_);
    if (inv.ok()) {
      last_[name] = std::move(inv->spec);
    }
  }
  return Status::Ok();
}

void NodeHistory::OnNodeJoined(const NodeInventory& inventory, ModuleStep& step) {
  const std::string& name = inventory.spec.name;
  auto it = last_.find(name);
  if (it != last_.end() && it->second && *it->second == inventory.spec) {
    return;  // only changes are recorded
  }
  last_[name] = inventory.spec;
  const Micros now = step.now();
  step.Put(NodeHistoryKey(name, now),
                               nlohmann::json{{"name", name},
                                              {"at_us", now},
                                              {"event", "join"},
                                              {"inventory", ToJson(inventory, *catalog_)}}
                                   .dump());
}

void NodeHistory::OnNodeRemoved(const std::string& name, ModuleStep& step) {
  last_[name] = std::nullopt;
  const Micros now = step.now();
  step.Put(
      NodeHistoryKey(name, now),
      nlohmann::json{{"name", name}, {"at_us", now}, {"event", "leave"}}.dump());
}

StatusOr<nlohmann::json> NodeHistory::Records(Store& store, Micros until) {
  TESSERA_ASSIGN_OR_RETURN(auto records, store.ListKv(kKeyPrefix));
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& [key, text] : records) {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_object() && j.contains("at_us") && j["at_us"].is_number_integer() &&
        j["at_us"].get<Micros>() < until) {
      nodes.push_back(std::move(j));
    }
  }
  return nodes;
}

}  // namespace tessera
