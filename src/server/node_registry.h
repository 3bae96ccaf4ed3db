// NodeRegistry: the nodes the controller knows, as their agents reported them: each
// node's inventory, its agent and liveness, the launches and stops waiting for its next
// heartbeat, its drains and its last telemetry. Also the nodes whose new inventory waits
// until they hold nothing (respec) and the launches to send again to agents that
// registered without them (relaunch). What a registration or a telemetry sample changes
// of one node is its static steps' (Registered, ByGpuIndex, NoteTelemetry).
//
// Drains are durable: the registry writes each node's drains as one store row (key
// DrainsKey(name)) whenever they change, and reads them back at the controller's start,
// before any agent has registered (a drained node stays drained across a restart).
//
// Invariants: nodes are numbered (NodeInfo::seq) in the order they first became known,
// and a node keeps its number while it is known, up or down; the core adds nodes in that
// order. A node in respec() is up and drained in the core until its spec is updated.
//
// Thread safety: none of its own. It is part of the controller's core state, guarded by
// the controller's core lock (Controller::mu_): the caller holds it for every call and
// for as long as it keeps a pointer or reference into the registry.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "api/agent_protocol.h"
#include "base/clock.h"
#include "base/status.h"
#include "model/gpu_catalog.h"
#include "store/store.h"

namespace tessera {

// Why a node or GPU takes no new work.
struct DrainInfo {
  std::string reason;
  std::string by;    // "admin" or "health"
  std::string kind;  // "admin", or the HealthKind name
  Micros since = 0;
};

struct NodeInfo {
  NodeInventory inventory;
  std::string agent_id;
  std::string address;
  bool up = false;
  std::string reason;
  Micros last_seen = 0;
  std::vector<TaskLaunch> launches;  // durable, not yet handed out
  std::vector<TaskStop> stops;
  std::optional<DrainInfo> drain;       // the whole node
  std::map<int, DrainInfo> gpu_drains;  // by GPU index
  std::vector<GpuTelemetry> telemetry;  // the last sample, by GPU index
  std::string telemetry_agent;          // the agent whose counters it holds
  Micros telemetry_at = 0;
  // Nodes are numbered in the core in the order they first became known.
  uint64_t seq = 0;
};

class NodeRegistry {
 public:
  // Every known node by name, up or down.
  std::map<std::string, NodeInfo>& all() { return nodes_; }
  const std::map<std::string, NodeInfo>& all() const { return nodes_; }
  // Null for an unknown node.
  NodeInfo* Find(const std::string& name);
  // A node not known yet, numbered after every other.
  NodeInfo& Add(const std::string& name);
  // The node, added (numbered after every other) when it is not known yet.
  NodeInfo& FindOrAdd(const std::string& name);
  // NotFound for an unknown node (`node` null), InvalidArgument for a GPU index `gpu` it
  // does not have (gpu < 0: the whole node). `name`: the node's name, for the messages.
  static Status CheckGpu(const NodeInfo* node, const std::string& name, int gpu);
  // Its agent `agent_id` registered from `address` with `inventory`: the node is up,
  // seen `now`, and what waited for the previous agent's heartbeat is dropped (the
  // registration's reconciliation decides what to send again). Drains, telemetry and
  // number are kept.
  static void Registered(NodeInfo& node, const NodeInventory& inventory,
                         const std::string& agent_id, const std::string& address, Micros now);
  // The node of `inventory` (added when not known yet) Registered by its agent; a
  // replaced agent of a node that was up is logged.
  NodeInfo& Register(const NodeInventory& inventory, const std::string& agent_id,
                     const std::string& address, Micros now);
  // The node `name` heard from its agent `agent_id` at `now` (its last sign of life);
  // null when it is unknown, down, or registered by another agent since (the caller's
  // agent is to register again).
  NodeInfo* Heard(const std::string& name, const std::string& agent_id, Micros now);
  // The heartbeat interval to tell agents: `floor`, or with `max_per_second` > 0 the
  // known nodes spread over that rate, yet never above a quarter of `node_timeout`
  // (unless `floor` is), so that several beats fall within the timeout whatever the fleet.
  Micros HeartbeatInterval(Micros floor, Micros node_timeout, int64_t max_per_second) const;

  // Telemetry. `sample` by GPU index of the node's inventory: one entry per GPU, those
  // the driver no longer reports marked lost (with their UUIDs); indexes the inventory
  // does not have are left out.
  static std::vector<GpuTelemetry> ByGpuIndex(const NodeInfo& node,
                                              std::vector<GpuTelemetry> sample);
  // Whether a sample from `agent_id` continues the node's last one (the same agent's
  // counters, GPU for GPU), so that the two may be compared.
  static bool ContinuesTelemetry(const NodeInfo& node, const std::string& agent_id) {
    return node.telemetry_agent == agent_id &&
           node.telemetry.size() == node.inventory.spec.gpus.size();
  }
  // The sample (ByGpuIndex) becomes the node's last one.
  static void NoteTelemetry(NodeInfo& node, std::vector<GpuTelemetry> by_index,
                            const std::string& agent_id, Micros now);

  // Drains (the node's when gpu < 0, else one GPU's): set, or lifted with nullopt (logged).
  // Returns the node's drains row to make durable (key, value). The node must be known.
  std::pair<std::string, std::string> SetDrain(NodeInfo& node, int gpu,
                                                std::optional<DrainInfo> drain);
  // The stored drains rows (DrainsKeyPrefix() + name -> value) into the nodes, adding a
  // node not known yet as waiting for its agent (`now`: its last sign of life).
  // Internal for a row this version cannot read, naming the node.
  Status RestoreDrains(const std::vector<std::pair<std::string, std::string>>& rows, Micros now);
  static const char* DrainsKeyPrefix() { return "drain/"; }
  // The row of a node without drains (a removed node's).
  static std::pair<std::string, std::string> NoDrainsRow(const std::string& name);

  // Nodes the admin removed (services/node_actions.h) stay forgotten across a restart: a
  // marker row per name (RemovedKeyPrefix() + name), {"at_us"} once removed, "" once
  // the name registered again.
  static const char* RemovedKeyPrefix() { return "removed_node/"; }
  // The admin removed node `name`: it is no longer known (logged). Returns the row that
  // clears its drains (NoDrainsRow).
  std::pair<std::string, std::string> Remove(const std::string& name);
  // The marker of node `name` removed at `at`.
  static std::pair<std::string, std::string> RemovedRow(const std::string& name, Micros at);
  // The stored markers (`rows`), at the start: the nodes they name are forgotten. Whether
  // any marker named a removed node (cleared ones do not).
  bool ForgetRemoved(const std::vector<std::pair<std::string, std::string>>& rows);
  // Before a name's first registration: its marker in `store` cleared, durably, when it
  // says the node was removed.
  static Status ClearRemoved(Store& store, const std::string& name);

  // At the controller's start, the stored inventories (InventoryKeyPrefix() + name ->
  // JSON) into nodes waiting for their agents (`now`: their last sign of life, so that
  // each agent gets a whole timeout to come back). Internal for a row this version cannot
  // read.
  Status RestoreInventories(const std::vector<std::pair<std::string, std::string>>& rows,
                            const GpuCatalog& catalog, Micros now);
  static const char* InventoryKeyPrefix() { return "node/"; }
  // The row that keeps a registered inventory across restarts.
  static std::pair<std::string, std::string> InventoryRow(const NodeInventory& inventory,
                                                          const GpuCatalog& catalog);
  // A node known only through a restored job's placement: added, waiting for its agent,
  // unless it is known already. The node.
  NodeInfo& AwaitAgent(const std::string& name, Micros now);
  // The nodes silent for longer than `timeout` at `now` that are up or waiting for their
  // agents: to be taken down. In name order.
  std::vector<std::string> Silent(Micros now, Micros timeout) const;
  // Silent, for a loop that asks at every cycle (cycles follow every exit): the walk over
  // every node is made at most every tenth of `timeout` and at most 1 s apart (a lost
  // node is noticed that much late at most); empty between walks.
  std::vector<std::string> SilentDue(Micros now, Micros timeout);
  // The node is down for `reason`: not up, the commands waiting for its heartbeat dropped.
  static void TakeDown(NodeInfo& node, const std::string& reason);

  // Hands durable commands to their nodes' queues, where they wait for the node's next
  // heartbeat (resent until the agent answers): each launch for which `running` holds
  // (its attempt still runs), each stop not queued already; a command for a node no
  // longer known is dropped. With `collect`, returns what was queued, by node (what a
  // push may send at once).
  std::map<std::string, HeartbeatResponse> Deliver(
      std::vector<std::pair<std::string, TaskLaunch>> launches,
      const std::vector<std::pair<std::string, TaskStop>>& stops,
      const std::function<bool(const TaskKey&)>& running, bool collect);

  // Up nodes whose new spec waits for them to hold nothing (drained until then).
  std::set<std::string>& respec() { return respec_; }
  bool AwaitsRespec(const std::string& name) const { return respec_.count(name) > 0; }
  // Launches to send again: an agent registered without a task placed on it, which
  // it therefore never received (agents keep every task they got until its end is
  // durable in the controller). Built at the next cycle, once the node is in the
  // cluster state.
  std::vector<std::pair<std::string, TaskKey>>& relaunch() { return relaunch_; }

 private:
  std::map<std::string, NodeInfo> nodes_;
  uint64_t next_seq_ = 0;
  std::set<std::string> respec_;
  std::vector<std::pair<std::string, TaskKey>> relaunch_;
  Micros next_silence_check_ = 0;  // SilentDue's next walk
};

}  // namespace tessera
