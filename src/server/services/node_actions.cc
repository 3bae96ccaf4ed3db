// NodeActions: drain, resume, fence, declare lost and remove, each one transaction of the
// controller's (Controller::Transact), acting through its ServiceStep. Drains are durable
// as the node registry's rows (node_registry.h); a removal's marker is the core's
// (ServiceStep::ForgetNode).
#include "server/services/node_actions.h"

#include <string>
#include <utility>
#include <vector>

#include "server/node_registry.h"
#include "server/views/node_views.h"

namespace tessera {
namespace {

constexpr const char* kStoreFailed = "the state store failed; the controller accepts no changes";

DrainInfo AdminDrain(const std::string& reason, Micros now) {
  return DrainInfo{reason, "admin", "admin", now};
}

// FailedPrecondition for a node that is up with `running` jobs on it (in id order).
Status BusyNode(const std::string& name, const std::vector<JobNumber>& running) {
  std::string ids;
  for (size_t i = 0; i < running.size() && i < 10; ++i) {
    ids += (i == 0 ? "" : ", ") + ToString(running[i]);
  }
  return FailedPreconditionError("node '" + name + "' is up and runs " +
                                 std::to_string(running.size()) + " job(s) (" + ids +
                                 "); drain it and let them finish, or remove it once it is down");
}

// The node's JSON as GET /v1/nodes shows it to the admin; null for an unknown node.
nlohmann::json AdminNodeJson(const ServiceStep& step, const std::string& name) {
  nlohmann::json out(nullptr);
  if (step.Node(name) != nullptr) {
    step.VisitNodeInputs(
        name, [&](const NodeViewInputs& in) { out = NodesJson(in, name, nullptr).at(0); });
  }
  return out;
}

}  // namespace

StatusOr<nlohmann::json> NodeActions::Drain(const std::string& name, int gpu,
                                            const std::string& reason) {
  if (reason.empty()) {
    return InvalidArgumentError("a drain needs a reason");
  }
  nlohmann::json result;
  auto decide = [&](ServiceStep& step) -> Status {
    TESSERA_RETURN_IF_ERROR(NodeRegistry::CheckGpu(step.Node(name), name, gpu));
    step.SetDrain(name, gpu, AdminDrain(reason, step.now()));
    return Status::Ok();
  };
  TESSERA_RETURN_IF_ERROR(controller_->Transact(
      decide, [&](const ServiceStep& step) { result = AdminNodeJson(step, name); }));
  return result;
}

StatusOr<nlohmann::json> NodeActions::Resume(const std::string& name, int gpu) {
  nlohmann::json result;
  auto decide = [&](ServiceStep& step) -> Status {
    const NodeInfo* node = step.Node(name);
    TESSERA_RETURN_IF_ERROR(NodeRegistry::CheckGpu(node, name, gpu));
    step.WakeLoop();
    const bool drained = gpu < 0 ? node->drain.has_value() : node->gpu_drains.count(gpu) > 0;
    if (drained) {
      step.SetDrain(name, gpu, std::nullopt);
    }
    return Status::Ok();
  };
  TESSERA_RETURN_IF_ERROR(controller_->Transact(
      decide, [&](const ServiceStep& step) { result = AdminNodeJson(step, name); }));
  return result;
}

Status NodeActions::FenceNode(const std::string& name, const std::string& reason) {
  return controller_->Transact([&](ServiceStep& step) -> Status {
    if (step.Node(name) == nullptr) {
      return NotFoundError("no node '" + name + "'");
    }
    // No new work from now on; the running work is requeued only when the node is
    // declared lost (its heartbeats are refused from now on), by when its tasks have
    // fenced themselves: a new attempt must not start while the old one may still run.
    step.SetDrain(name, -1, AdminDrain(reason, step.now()));
    step.WakeLoop();
    return Status::Ok();
  });
}

Status NodeActions::DeclareNodeLost(const std::string& name, const std::string& reason) {
  if (!controller_->healthy()) {
    return UnavailableError(kStoreFailed);
  }
  return controller_->Transact([&](ServiceStep& step) -> Status {
    const NodeInfo* node = step.Node(name);
    if (node == nullptr) {
      return NotFoundError("no node '" + name + "'");
    }
    if (!node->up) {
      return FailedPreconditionError("node '" + name + "' is down already");
    }
    step.NodeDown(name, reason);
    step.WakeLoop();
    return Status::Ok();
  });
}

StatusOr<nlohmann::json> NodeActions::RemoveNode(const std::string& name, WriteBatch extra) {
  if (!controller_->healthy()) {
    return UnavailableError(kStoreFailed);
  }
  TESSERA_RETURN_IF_ERROR(controller_->Transact([&](ServiceStep& step) -> Status {
    const NodeInfo* node = step.Node(name);
    if (node == nullptr) {
      return NotFoundError("no node '" + name + "'");
    }
    if (std::vector<JobNumber> running = step.JobsOnNode(name); node->up && !running.empty()) {
      return BusyNode(name, running);
    }
    // What a down node still holds is requeued, as when a node is lost.
    step.NodeDown(name, "removed by the admin");
    step.ForgetNode(name);  // `node` is gone from here on
    for (TokenRow& t : extra.tokens) {
      step.PutToken(std::move(t));
    }
    for (auto& [key, value] : extra.kv) {
      step.Put(std::move(key), std::move(value));
    }
    step.WakeLoop();
    return Status::Ok();
  }));
  return nlohmann::json{{"removed", name}};
}

}  // namespace tessera
