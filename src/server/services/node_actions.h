// NodeActions: the admin's actions on nodes: drain and resume a node or one of its GPUs,
// fence a node whose credential was revoked, declare a node lost before its heartbeats
// time out, and remove (forget) a node.
//
// Owns: nothing but the rules of the actions (which node or GPU an action applies to,
// when a removal is refused, the refusals' codes and messages, the drains' and downs'
// reasons). It keeps no state: one may be built over a controller at any time, and many
// may share one.
// Uses: the controller's transactions only (Controller::Transact, with the ServiceStep of
// services/service_step.h): it reads nodes as NodeInfo (up, drains, inventory) and acts
// through the step (SetDrain, NodeDown, JobsOnNode, ForgetNode, Put and PutToken, the
// loop woken); the controller holds the core lock, seals the step and makes it durable.
// What the core needs of a removal at Open and at a name's next registration (the
// removal's marker: Controller::ForgetRemovedNodes; the server clears it with
// NodeRegistry::ClearRemoved) stays out of this service: the step's ForgetNode writes it.
// Invariants: one action is one transaction (its rows durable together before it
// answers); a refusal changes nothing. A removal of a node that is up and runs a job is
// refused; a node removed or declared lost is down first, its running work lost with it
// (requeued or failed by the jobs' restart policies). A fence only drains: the work there
// is requeued once the node is declared lost or its heartbeats time out, by when its
// tasks have fenced themselves. The store is never waited on with the core lock held
// (Transact); the loop is woken after a fence, a loss, a resume and a removal.
// Lock discipline: as the controller's. The server calls RemoveNode and FenceNode with its
// node-credential lock held or just after it; that lock comes before the core lock.
// Thread safety: as the controller's; every method may be called from any thread.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "server/controller.h"
#include "server/services/service_step.h"
#include "store/store.h"

namespace tessera {

class NodeActions {
 public:
  // `controller` must outlive the service.
  explicit NodeActions(Controller& controller) : controller_(&controller) {}

  // Takes a node (gpu < 0) or one of its GPUs out of service for new work, durably; what
  // runs there keeps running. NotFound for an unknown node, InvalidArgument for an
  // unknown GPU or an empty reason. Returns the node's JSON (as GET /v1/nodes shows it).
  StatusOr<nlohmann::json> Drain(const std::string& node, int gpu, const std::string& reason);
  // Lifts a drain (an admin's or a health check's; none: nothing changes). Returns the
  // node's JSON. NotFound for an unknown node, InvalidArgument for an unknown GPU.
  StatusOr<nlohmann::json> Resume(const std::string& node, int gpu);
  // A node whose credential was revoked: drained at once (by "admin", with `reason`), so
  // nothing new starts there. NotFound for an unknown node.
  Status FenceNode(const std::string& node, const std::string& reason);
  // A node known to be gone before its heartbeats time out (its machine was powered off;
  // a driver of scenarios): down at once, its jobs lost with it as when its heartbeats
  // stop. Unavailable once the store failed, NotFound for an unknown node,
  // FailedPrecondition for one already down.
  Status DeclareNodeLost(const std::string& node, const std::string& reason);
  // Forgets a node (its inventory, drains and whatever `extra` holds, e.g. its
  // credential's tombstone, in one durable batch), so that the name may register afresh.
  // Unavailable once the store failed, NotFound for an unknown node, FailedPrecondition
  // while the node is up and a job runs there. The jobs of a node that is down are
  // requeued (as for a lost node). Returns {"removed": node}.
  StatusOr<nlohmann::json> RemoveNode(const std::string& node, WriteBatch extra);

 private:
  Controller* controller_;
};

}  // namespace tessera
