// NodeHistory: the node inventory's history, for what-if replays (sim/whatif.h) and
// GET /v1/admin/history.
//
// Owns: the records under "history/nodes/<name>/<time>" (a join with the node's
// inventory, or a leave), and each node's last recorded spec (none after a leave).
// Hooks: Load (each node's last record), OnNodeJoined (a join record when the node's
// spec first appears or changes), OnNodeRemoved (a leave record: the admin removed it).
// Invariants: only changes are recorded, so the history grows with the fleet's
// changes, not with its registrations; a record goes into the step's batch, durable
// with the registration or removal it records; keys sort by node, then time.
// Thread safety: none for the hooks; the controller calls them with its core lock
// held. Records reads only the store (thread-safe) and needs no lock.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "api/agent_protocol.h"
#include "model/gpu_catalog.h"
#include "server/modules/controller_module.h"

namespace tessera {

class NodeHistory final : public ControllerModule {
 public:
  static constexpr const char* kKeyPrefix = "history/nodes/";

  explicit NodeHistory(const GpuCatalog& catalog) : catalog_(&catalog) {}

  Status Load(Store& store) override;
  void OnNodeJoined(const NodeInventory& inventory, ModuleStep& step) override;
  void OnNodeRemoved(const std::string& name, ModuleStep& step) override;

  // The stored records before `until`, by node then time (the "nodes" of
  // GET /v1/admin/history).
  static StatusOr<nlohmann::json> Records(Store& store, Micros until);
  // The node's last recorded spec: null when it has no record, an empty optional after
  // a leave.
  const std::optional<NodeSpec>* Last(const std::string& name) const {
    auto it = last_.find(name);
    return it != last_.end() ? &it->second : nullptr;
  }

 private:
  const GpuCatalog* catalog_;
  std::map<std::string, std::optional<NodeSpec>> last_;  // by node name
};

}  // namespace tessera
